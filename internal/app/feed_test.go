package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/laneway/laneway/receiver"
)

// feedConsumer reads one pull endpoint's feed with its consumer token.
type feedConsumer struct {
	t     *testing.T
	base  string
	id    string
	token string
}

func (c feedConsumer) read(cursor string, wait time.Duration) (int, receiver.FeedPage) {
	c.t.Helper()
	q := url.Values{"limit": {"50"}, "wait": {fmt.Sprint(int(wait.Seconds()))}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	req, _ := http.NewRequest("GET", c.base+"/v1/feed/"+c.id+"?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("read feed: %v", err)
	}
	defer resp.Body.Close()
	var p receiver.FeedPage
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			c.t.Fatalf("feed page: %v", err)
		}
	}
	return resp.StatusCode, p
}

func (c feedConsumer) ack(cursor string) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+"/v1/feed/"+c.id+"/ack", strings.NewReader(`{"cursor":"`+cursor+`"}`))
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("ack: %v %v", resp, err)
	}
	resp.Body.Close()
}

// follow reads from cursor until want events arrived, checking as it goes
// that sequences run on without a gap and each entity's revisions rise.
func (c feedConsumer) follow(cursor string, first int64, want int, within time.Duration) (string, []receiver.FeedEvent) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var got []receiver.FeedEvent
	next := first
	last := map[string]int64{}
	for len(got) < want {
		if time.Now().After(deadline) {
			c.t.Fatalf("%d of %d events after %s", len(got), want, within)
		}
		code, p := c.read(cursor, 5*time.Second)
		if code != http.StatusOK {
			c.t.Fatalf("read feed: %d", code)
		}
		for _, it := range p.Events {
			if it.Sequence != next {
				c.t.Fatalf("sequence %d after %d: a gap or a step back", it.Sequence, next-1)
			}
			if it.Entity.Revision <= last[it.Entity.ID] {
				c.t.Fatalf("%s revision %d after %d", it.Entity.ID, it.Entity.Revision, last[it.Entity.ID])
			}
			next, last[it.Entity.ID] = next+1, it.Entity.Revision
		}
		got = append(got, p.Events...)
		cursor = p.NextCursor
	}
	return cursor, got
}

// A pull endpoint's consumer reads every event in order, long-polling for
// new ones, acknowledges, and after a restart of Laneway resumes from its
// acknowledged position without a cursor of its own (issue #17).
func TestPullFeedEndToEndAcrossRestart(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		var cfg app.Config
		dataDir := t.TempDir()
		a := startApp(t, b, func(c *app.Config) {
			if b.Name == testenv.Embedded.Name {
				c.DataDir = dataDir
			}
			cfg = *c
		})
		api := newAPI(t, a.HTTPAddr())
		ep := api.createEndpoint(map[string]any{"tenant": "acme", "mode": "pull"})
		code, out := api.do("POST", "/v1/endpoints/"+ep.ID+"/feed-tokens", nil)
		var tok struct{ Token string }
		if code != http.StatusCreated || json.Unmarshal(out, &tok) != nil {
			t.Fatalf("feed token: %d %s", code, out)
		}
		consumer := feedConsumer{t: t, base: api.base, id: ep.ID, token: tok.Token}
		publishFacts := func(from, to int) {
			for rev := from; rev <= to; rev++ {
				for e := range 4 {
					code, out := api.do("POST", "/v1/events", map[string]any{"type": "order.updated", "tenant": "acme",
						"entity": fmt.Sprintf("order:%d", e), "revision": rev, "data": map[string]int{"rev": rev}})
					if code != http.StatusAccepted {
						t.Fatalf("publish: %d %s", code, out)
					}
				}
			}
		}
		publishFacts(1, 5)
		cursor, got := consumer.follow("", 0, 20, time.Minute)
		if len(got) != 20 {
			t.Fatalf("%d events, want 20", len(got))
		}
		consumer.ack(cursor)

		// A long poll that waits for the next event, made before it exists.
		polled := make(chan receiver.FeedPage, 1)
		go func() {
			_, p := consumer.read(cursor, 20*time.Second)
			polled <- p
		}()
		publishFacts(6, 6)
		select {
		case p := <-polled:
			if len(p.Events) == 0 || p.Events[0].Sequence != 20 {
				t.Fatalf("long poll answered %+v, want the event at sequence 20", p)
			}
		case <-time.After(40 * time.Second):
			t.Fatal("the long poll never answered")
		}

		stopApp(t, a)
		a = startWith(t, cfg)
		api.base = "http://" + a.HTTPAddr()
		consumer.base = api.base
		publishFacts(7, 7)
		// No cursor: the read starts at the acknowledged position, 20.
		_, rest := consumer.follow("", 20, 8, time.Minute)
		if rest[0].Entity.Revision != 6 {
			t.Fatalf("after the restart the feed resumed at %+v, want revision 6 at sequence 20", rest[0])
		}
	})
}
