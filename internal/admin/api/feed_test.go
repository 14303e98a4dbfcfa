package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/modes/feed"
)

// A consumer token reads its own endpoint's feed only; a rotation keeps
// the old token for its overlap and no longer; a revoked token stops at
// once; the admin token never reads a feed.
func TestFeedTokensRotateAndRevoke(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.AdminToken = testToken
		c.Feeds = &specFeeds{}
	})
	create := func(body string) map[string]any {
		r := h.do("POST", "/v1/endpoints", body)
		wantStatus(t, r, http.StatusCreated)
		return r.json(t)
	}
	pull, other := create(`{"tenant":"acme","mode":"pull"}`), create(`{"tenant":"acme","mode":"pull"}`)
	if pull["mode"] != "pull" || pull["url"] != "" {
		t.Fatalf("created %v", pull)
	}
	id, otherID := pull["id"].(string), other["id"].(string)
	newToken := func(path, body string) (tokenID, token string) {
		r := h.do("POST", path, body)
		wantStatus(t, r, http.StatusCreated)
		got := r.json(t)
		token, _ = got["token"].(string)
		if !strings.HasPrefix(token, "lwf_") {
			t.Fatalf("token answer %v", got)
		}
		return got["id"].(string), token
	}
	oldID, old := newToken("/v1/endpoints/"+id+"/feed-tokens", "")
	_, othersToken := newToken("/v1/endpoints/"+otherID+"/feed-tokens", "")
	read := func(token string) int {
		return h.do("GET", "/v1/feed/"+id, "", "Authorization", "Bearer "+token).status
	}
	if got := read(old); got != http.StatusOK {
		t.Fatalf("own token: %d", got)
	}
	if got := read(othersToken); got != http.StatusUnauthorized {
		t.Fatalf("another endpoint's token: %d, want 401", got)
	}
	if got := read(testToken); got != http.StatusUnauthorized {
		t.Fatalf("admin token: %d, want 401", got)
	}

	newID, current := newToken("/v1/endpoints/"+id+"/feed-tokens/"+oldID+"/rotate", `{"overlap_seconds":3600}`)
	if read(old) != http.StatusOK || read(current) != http.StatusOK {
		t.Fatal("during the overlap both tokens must read")
	}
	h.clock.advance(time.Hour)
	if got := read(old); got != http.StatusUnauthorized {
		t.Fatalf("rotated-out token after its overlap: %d, want 401", got)
	}
	if r := h.do("GET", "/v1/endpoints/"+id+"/feed-tokens", ""); !strings.Contains(string(r.body), newID) || strings.Contains(string(r.body), oldID) || strings.Contains(string(r.body), current) {
		t.Fatalf("token list %s: want the new token's id only, never a token", r.body)
	}
	wantStatus(t, h.do("DELETE", "/v1/endpoints/"+id+"/feed-tokens/"+newID, ""), http.StatusNoContent)
	if got := read(current); got != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d, want 401", got)
	}
	stored, _ := h.store.Get(id)
	for _, tk := range stored.FeedTokens {
		if strings.Contains(tk.Hash, current) || strings.Contains(tk.Hash, old) {
			t.Fatal("a token is stored in clear")
		}
	}
}

// A page's events carry their sequences, and next_cursor reads on.
func TestFeedPageShape(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.AdminToken = testToken
		c.Feeds = &specFeeds{}
	})
	seedSpecEndpoints(h.store)
	auth := []string{"Authorization", "Bearer " + specFeedToken}
	r := h.do("GET", "/v1/feed/ep_pull?limit=1", "", auth...) // from the acknowledged position, 3
	wantStatus(t, r, http.StatusOK)
	page := r.json(t)
	events, _ := page["events"].([]any)
	if len(events) != 1 || events[0].(map[string]any)["sequence"] != float64(3) {
		t.Fatalf("page %s: want the event at sequence 3", r.body)
	}
	r = h.do("GET", "/v1/feed/ep_pull?cursor="+page["next_cursor"].(string), "", auth...)
	wantStatus(t, r, http.StatusOK)
	if events, _ := r.json(t)["events"].([]any); len(events) != 1 || events[0].(map[string]any)["sequence"] != float64(4) {
		t.Fatalf("next page %s: want sequence 4", r.body)
	}
}

// A feed consumer that falls behind raises its endpoint's oldest pending
// age, but not the platform's healthy figure: its pace is its own.
func TestFeedConsumerLagIsNotThePlatformsHealth(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.AdminToken = testToken
		c.Feeds, c.Health = &specFeeds{}, &specHealth{}
	})
	seedSpecEndpoints(h.store)
	r := h.do("GET", "/v1/endpoints/ep_pull", "")
	wantStatus(t, r, http.StatusOK)
	health, _ := r.json(t)["health"].(map[string]any)
	if age := health["oldest_pending_age_seconds"]; age != float64(60) {
		t.Fatalf("pull endpoint's oldest pending age %v, want its consumer's 60 s", age)
	}
	r = h.do("GET", "/v1/health", "")
	wantStatus(t, r, http.StatusOK)
	if got := r.json(t)["healthy_oldest_pending_age_seconds"]; got != float64(0) {
		t.Fatalf("healthy oldest pending age %v, want 0: the only other endpoint is parked", got)
	}
}

// A batch endpoint shows how far its feed was sent, and its backlog there
// is its oldest pending delivery.
func TestBatchEndpointShowsItsFeedPosition(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.AdminToken = testToken
		c.Feeds, c.Health = &specFeeds{}, &specHealth{}
	})
	seedSpecEndpoints(h.store)
	r := h.do("GET", "/v1/endpoints/ep_batch", "")
	wantStatus(t, r, http.StatusOK)
	got := r.json(t)
	pos, _ := got["feed"].(map[string]any)
	if pos["acked_cursor"] != feed.Cursor(3) || pos["lag"] != float64(2) {
		t.Fatalf("feed position %v: want sent up to sequence 3, 2 behind", pos)
	}
	if age := got["health"].(map[string]any)["oldest_pending_age_seconds"]; age != float64(60) {
		t.Fatalf("oldest pending age %v, want the backlog's 60 s", age)
	}
}

// The feed routes (on the public listener too) answered the admin token
// with its own hint, which told anyone whether a guess was the admin
// token, and took guesses as fast as they came (#27, item 8). Every failed
// authentication gets the same answer, and past FeedAuthLimit.Failures
// from one address the feed routes answer 429 with Retry-After until the
// window has earned them back; other addresses are not affected.
func TestFeedAuthFailuresAreAnsweredAlikeAndLimited(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.AdminToken = testToken
		c.Feeds = &specFeeds{}
		c.FeedAuthLimit = FeedAuthLimit{Failures: 3, Window: 30 * time.Second}
	})
	r := h.do("POST", "/v1/endpoints", `{"tenant":"acme","mode":"pull"}`)
	wantStatus(t, r, http.StatusCreated)
	id := r.json(t)["id"].(string)
	r = h.do("POST", "/v1/endpoints/"+id+"/feed-tokens", "")
	wantStatus(t, r, http.StatusCreated)
	consumer := r.json(t)["token"].(string)
	read := func(token string) response {
		return h.do("GET", "/v1/feed/"+id, "", "Authorization", "Bearer "+token)
	}

	admin, guess := read(testToken), read("lwf_not-a-token")
	if admin.status != http.StatusUnauthorized || guess.status != http.StatusUnauthorized || string(admin.body) != string(guess.body) {
		t.Fatalf("admin token: %d %s; a guess: %d %s; want the same 401", admin.status, admin.body, guess.status, guess.body)
	}
	wantStatus(t, read(consumer), http.StatusOK) // a success costs nothing
	wantStatus(t, read("lwf_guess-3"), http.StatusUnauthorized)
	limited := read(consumer)
	wantStatus(t, limited, http.StatusTooManyRequests)
	if ra := limited.header.Get("Retry-After"); ra != "10" {
		t.Fatalf("Retry-After %q, want 10 (one failure's share of the 30 s window)", ra)
	}
	h.clock.advance(10 * time.Second)
	wantStatus(t, read(consumer), http.StatusOK)
}
