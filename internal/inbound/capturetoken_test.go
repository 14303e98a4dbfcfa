package inbound

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestGuessingTheCapturePathFails is the attack: a sender who knows a
// source's id (and even holds a valid signature) but not its capture
// token tries the bare path and guessed tokens. Every try gets the 404 an
// unknown source gets, nothing is stored, and the source's rate limit is
// not spent: the provider, at the token's path, is still served.
func TestGuessingTheCapturePathFails(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	reg := prometheus.NewRegistry()
	s := f.service(func(c *Config) {
		c.Registerer = reg
		c.RateLimits = RateLimits{PerAddress: -1, PerSource: 0.001, PerSourceBurst: 2}
	}, nil)
	c := server(t, s)
	gh := c.createSource(map[string]any{"id": "gh", "kind": "github", "tenant": "acme"})
	var tok captureTokenJSON
	c.json(http.MethodPost, "/v1/inbound/sources/gh/capture-token/rotate", nil, http.StatusOK, &tok)
	if len(tok.CaptureToken) != 43 || tok.CapturePath != "/in/gh/"+tok.CaptureToken || tok.PreviousCaptureToken != "" {
		t.Fatalf("rotate on a source without a token: %+v", tok)
	}

	body := []byte(`{"repository":{"full_name":"acme/app"}}`)
	signed := githubHeaders(gh.Secret, "d-1", "push", body)
	_, unknown := c.raw(http.MethodPost, "/in/nope", body, signed)
	wrongLast := tok.CaptureToken[:42] + "A"
	if strings.HasSuffix(tok.CaptureToken, "A") {
		wrongLast = tok.CaptureToken[:42] + "B"
	}
	guesses := []string{
		"/in/gh", "/in/gh/" + NewCaptureToken(), "/in/gh/" + wrongLast, "/in/gh/" + tok.CaptureToken[:42],
		"/in/gh/" + tok.CaptureToken + "A", "/in/gh/" + strings.ToUpper(tok.CaptureToken), "/in/gh/%20",
	}
	for _, path := range guesses {
		code, out := c.raw(http.MethodPost, path, body, signed)
		if code != http.StatusNotFound || !bytes.Equal(out, unknown) {
			t.Fatalf("POST %s: %d %s, want the unknown source's 404 %s", path, code, out, unknown)
		}
	}
	for range 2 { // the source's burst: the guesses spent none of it
		c.capture("gh/"+tok.CaptureToken, body, signed)
	}
	waitVerifier(t, s, "the provider's requests decided", decidedAtLeast(2))
	if values, _ := captureRecordSizes(t, s); len(values) != 2 {
		t.Fatalf("%d capture records, want the provider's 2 (no guess stored)", len(values))
	}
	items := c.list("source=gh")
	for _, it := range items {
		if it.Path != "/in/gh/{capture_token}" {
			t.Errorf("request %s kept path %q, want the token left out", it.ID, it.Path)
		}
	}
	for _, r := range readCommitted(t, s.cfg.Brokers, s.cfg.Topics.Inbound) {
		for _, h := range r.Headers {
			if bytes.Contains(h.Value, []byte(tok.CaptureToken)) {
				t.Fatalf("record at %d of the inbound topic holds the token in header %s", r.Offset, h.Key)
			}
		}
	}
	wantCounter(t, reg, "laneway_inbound_refused_total", map[string]string{"source": "gh", "reason": refusedToken}, float64(len(guesses)))
}

// TestCaptureTokenRotation: the previous token works until the overlap is
// ended; removing the token reopens the bare path; the token is shown
// only where secrets are.
func TestCaptureTokenRotation(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	s := f.service(nil, nil)
	c := server(t, s)
	mine := strings.Repeat("t", 40)
	src := c.createSource(map[string]any{"id": "gh", "kind": "github", "tenant": "acme", "capture_token": mine})
	if src.CaptureToken != mine || src.CapturePath != "/in/gh/"+mine || !src.HasCaptureToken {
		t.Fatalf("created %+v", src)
	}
	c.json(http.MethodPost, "/v1/inbound/sources", map[string]any{"id": "x", "kind": "github", "tenant": "acme", "capture_token": "short"}, http.StatusBadRequest, nil)
	body := []byte(`{"repository":{"full_name":"acme/app"}}`)
	post := func(path string) int {
		code, _ := c.raw(http.MethodPost, path, body, githubHeaders(src.Secret, NewCaptureToken(), "push", body))
		return code
	}

	var rotated captureTokenJSON
	c.json(http.MethodPost, "/v1/inbound/sources/gh/capture-token/rotate", nil, http.StatusOK, &rotated)
	if rotated.PreviousCaptureToken != mine || rotated.CaptureToken == mine {
		t.Fatalf("rotated %+v", rotated)
	}
	for path, want := range map[string]int{"/in/gh/" + mine: 202, "/in/gh/" + rotated.CaptureToken: 202, "/in/gh": 404} {
		if got := post(path); got != want {
			t.Fatalf("during the overlap POST %s: %d, want %d", path, got, want)
		}
	}
	var shown sourceJSON
	c.json(http.MethodPatch, "/v1/inbound/sources/gh", map[string]any{"previous_capture_token": ""}, http.StatusOK, &shown)
	if shown.CaptureToken != "" || shown.CapturePath != "/in/gh/{capture_token}" || !shown.HasCaptureToken {
		t.Fatalf("PATCH answered %+v: the token is shown only by create, rotate and reveal", shown)
	}
	if got := post("/in/gh/" + mine); got != http.StatusNotFound {
		t.Fatalf("the old token after the overlap: %d, want 404", got)
	}
	var revealed secretsJSON
	c.json(http.MethodGet, "/v1/inbound/sources/gh/secret", nil, http.StatusOK, &revealed)
	if revealed.CaptureToken != rotated.CaptureToken || revealed.CapturePath != rotated.CapturePath || revealed.PreviousCaptureToken != "" {
		t.Fatalf("revealed %+v", revealed)
	}

	c.json(http.MethodPatch, "/v1/inbound/sources/gh", map[string]any{"capture_token": ""}, http.StatusOK, &shown)
	if shown.HasCaptureToken || shown.CapturePath != "/in/gh" {
		t.Fatalf("token removed: %+v", shown)
	}
	if a, b := post("/in/gh"), post("/in/gh/"+rotated.CaptureToken); a != 202 || b != 404 {
		t.Fatalf("without a token: bare path %d (want 202), tokened path %d (want 404)", a, b)
	}
}

// TestCaptureTokensAreSealed: the token is on the sources topic only
// under the key; a store without the key keeps the bare path closed and
// asks the provider at the token's path to retry (it cannot check it).
func TestCaptureTokensAreSealed(t *testing.T) {
	b := testenv.Kfake(t)
	f := newFixture(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := githubSource("gh", "k", "")
	src.CaptureToken, src.PreviousCaptureToken = NewCaptureToken(), NewCaptureToken()
	ring := testenv.Ring(t, secretbox.NewKey("k1"))
	if err := sealedSourceStore(t, b, f.topics.Sources, ring).Put(ctx, src); err != nil {
		t.Fatal(err)
	}
	if keys := testenv.SealedKeyIDs(ctx, t, b.Brokers, f.topics.Sources, src.CaptureToken, src.PreviousCaptureToken); keys["gh"] != "k1" {
		t.Fatalf("gh sealed under %q, want k1", keys["gh"])
	}
	got, _ := sealedSourceStore(t, b, f.topics.Sources, ring).Get("gh")
	if got.CaptureToken != src.CaptureToken || got.PreviousCaptureToken != src.PreviousCaptureToken {
		t.Fatalf("read back %+v", got)
	}

	s := f.service(func(c *Config) { c.Secrets = testenv.Ring(t, secretbox.NewKey("k2")) }, nil)
	c := server(t, s)
	body := []byte(`{"repository":{"full_name":"acme/app"}}`)
	for path, want := range map[string]int{"/in/gh": 404, "/in/gh/" + src.CaptureToken: 503} {
		if code, out := c.raw(http.MethodPost, path, body, githubHeaders("k", "d1", "push", body)); code != want {
			t.Fatalf("held source, POST %s: %d %s, want %d", path, code, out, want)
		}
	}
}

func TestAcceptsToken(t *testing.T) {
	tok, prev := NewCaptureToken(), NewCaptureToken()
	with := Source{CaptureToken: tok, PreviousCaptureToken: prev}
	without := Source{}
	cases := []struct {
		src   *Source
		token string
		want  bool
	}{
		{&with, tok, true}, {&with, prev, true}, {&with, "", false}, {&with, tok[:len(tok)-1], false},
		{&with, tok + "x", false}, {&with, NewCaptureToken(), false},
		{&without, "", true}, {&without, tok, false},
		{&Source{heldToken: true}, "", false}, {&Source{heldToken: true}, "anything", true},
	}
	for i, tc := range cases {
		if got := tc.src.acceptsToken(tc.token); got != tc.want {
			t.Errorf("case %d: acceptsToken(%q) = %v, want %v", i, tc.token, got, tc.want)
		}
	}
	for _, bad := range []string{"short", strings.Repeat("a", 129), strings.Repeat("a", 31) + "/"} {
		if validateCaptureTokens(bad, "") == nil {
			t.Errorf("token %q accepted", bad)
		}
	}
	if validateCaptureTokens("", tok) == nil {
		t.Error("a previous token without a current one accepted")
	}
}
