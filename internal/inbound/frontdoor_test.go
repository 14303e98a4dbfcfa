package inbound

import (
	"bytes"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// fakeClock is a settable clock for the rate limits.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// post sends a request and returns the whole response (status, headers).
func (c *client) post(path string, body []byte, h http.Header) *http.Response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// captureRecordSizes are the value and header sizes of the capture
// records (not outcomes) on the inbound topic.
func captureRecordSizes(t *testing.T, s *Service) (values, headers []int) {
	t.Helper()
	for _, r := range readCommitted(t, s.cfg.Brokers, s.cfg.Topics.Inbound) {
		if recordKind(r) != kindCapture {
			continue
		}
		n := 0
		for _, h := range r.Headers {
			n += len(h.Key) + len(h.Value)
		}
		values, headers = append(values, len(r.Value)), append(headers, n)
	}
	return values, headers
}

// TestForgedRequestsAreKeptAsMetadata is the attack: an anonymous sender
// posts ~900 KB bodies with forged signatures and ~60 KB of headers to a
// source's public path. They are refused (401, 400) and kept as metadata:
// a record of a few KiB, listed as rejected with the reason, and counted.
func TestForgedRequestsAreKeptAsMetadata(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	reg := prometheus.NewRegistry()
	s := f.service(func(c *Config) { c.Registerer = reg }, nil)
	c := server(t, s)
	c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_real"})

	huge := bytes.Repeat([]byte("A"), 900<<10)
	forged := stripeHeaders("whsec_guess", time.Now(), huge)
	for i := range 60 {
		forged.Set("X-Pad-"+strings.Repeat("p", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26)), strings.Repeat("v", 1000))
	}
	if code, resp := c.raw(http.MethodPost, "/in/stripe", huge, forged); code != http.StatusUnauthorized {
		t.Fatalf("forged signature: %d %s, want 401", code, resp)
	}
	unsigned := forged.Clone()
	unsigned.Del("Stripe-Signature")
	if code, _ := c.raw(http.MethodPost, "/in/stripe", huge, unsigned); code != http.StatusBadRequest {
		t.Fatalf("no signature: %d, want 400", code)
	}
	waitVerifier(t, s, "2 refusals recorded", atLeast(StatusRejected, 2))

	values, headers := captureRecordSizes(t, s)
	if len(values) != 2 {
		t.Fatalf("%d capture records, want the 2 refusals", len(values))
	}
	for i := range values {
		if values[i] > maxKeptBytes || headers[i] > maxKeptHeaderBytes+2<<10 {
			t.Errorf("refusal %d kept %d body bytes and %d header bytes; want at most %d and ~%d", i, values[i], headers[i], maxKeptBytes, maxKeptHeaderBytes)
		}
	}
	reasons := countBy(c.list("source=stripe&status=rejected"), func(it Item) string { return it.Reason })
	if reasons[ReasonBadSignature] != 1 || reasons[ReasonMissingSignature] != 1 {
		t.Fatalf("rejected %v", reasons)
	}
	wantCounter(t, reg, "laneway_inbound_refused_total", map[string]string{"source": "stripe", "reason": ReasonBadSignature}, 1)
	wantCounter(t, reg, "laneway_inbound_refused_total", map[string]string{"source": "stripe", "reason": ReasonMissingSignature}, 1)
	if code, _ := c.raw(http.MethodPost, "/in/nope", huge, forged); code != http.StatusNotFound {
		t.Fatalf("unknown source: %d", code)
	}
	wantCounter(t, reg, "laneway_inbound_refused_total", map[string]string{"source": unknownSourceLabel, "reason": ReasonUnknownSource}, 1)
}

// TestRefusalsBeyondTheKeepBudgetAreOnlyCounted: what refusals can make
// Laneway store is bounded by RefusedKeepRate, not by the sender.
func TestRefusalsBeyondTheKeepBudgetAreOnlyCounted(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	reg := prometheus.NewRegistry()
	clock := &fakeClock{now: time.Now()}
	s := f.service(func(c *Config) {
		c.Registerer, c.Now, c.RefusedKeepRate, c.RefusedKeepBurst = reg, clock.Now, 1, 2
	}, nil)
	c := server(t, s)
	c.createSource(map[string]any{"id": "gh", "kind": "github", "tenant": "acme", "secret": "k"})
	for range 5 {
		if code, _ := c.raw(http.MethodPost, "/in/gh", []byte(`{}`), nil); code != http.StatusBadRequest {
			t.Fatalf("unsigned: %d", code)
		}
	}
	waitVerifier(t, s, "2 refusals kept", atLeast(StatusRejected, 2))
	if values, _ := captureRecordSizes(t, s); len(values) != 2 {
		t.Fatalf("%d refusals kept, want the burst of 2", len(values))
	}
	wantCounter(t, reg, "laneway_inbound_refused_total", map[string]string{"source": "gh", "reason": ReasonMissingSignature}, 5)
	wantCounter(t, reg, "laneway_inbound_refused_unkept_total", nil, 3)
}

// TestRateLimits floods the door from one address, then one source from
// everywhere: 429 with Retry-After, counted by reason, and another address
// or a later moment is served again.
func TestRateLimits(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	reg := prometheus.NewRegistry()
	clock := &fakeClock{now: time.Now()}
	s := f.service(func(c *Config) {
		c.Registerer, c.Now = reg, clock.Now
		c.RateLimits = RateLimits{
			PerAddress: 1, PerAddressBurst: 2, PerSource: 1, PerSourceBurst: 3,
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		}
	}, nil)
	c := server(t, s)
	c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_k"})
	from := func(addr string) http.Header { return http.Header{"X-Forwarded-For": {"198.51.100.7, " + addr}} }

	// One address: its burst of 2, then 429 whatever the path.
	for i, want := range []int{http.StatusNotFound, http.StatusNotFound, http.StatusTooManyRequests} {
		resp := c.post("/in/scan-"+string(rune('a'+i)), nil, from("203.0.113.1"))
		if resp.StatusCode != want {
			t.Fatalf("request %d from one address: %d, want %d", i, resp.StatusCode, want)
		}
		if want == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "1" {
			t.Errorf("429 without Retry-After: 1 (got %q)", resp.Header.Get("Retry-After"))
		}
	}
	if code := c.post("/in/scan-z", nil, from("203.0.113.2")).StatusCode; code != http.StatusNotFound {
		t.Fatalf("another address: %d, want 404 (its own budget)", code)
	}
	clock.Add(time.Second)
	if code := c.post("/in/scan-y", nil, from("203.0.113.1")).StatusCode; code != http.StatusNotFound {
		t.Fatalf("the first address a second later: %d, want 404", code)
	}
	wantCounter(t, reg, "laneway_inbound_refused_total", map[string]string{"source": unknownSourceLabel, "reason": refusedRateAddress}, 1)

	// One source from many addresses: its burst of 3, then 429.
	body := stripeBody(1)
	for i, want := range []int{http.StatusAccepted, http.StatusAccepted, http.StatusAccepted, http.StatusTooManyRequests} {
		h := stripeHeaders("whsec_k", clock.Now(), body)
		h.Set("X-Forwarded-For", "192.0.2."+string(rune('1'+i)))
		if code := c.post("/in/stripe", body, h).StatusCode; code != want {
			t.Fatalf("request %d to one source: %d, want %d", i, code, want)
		}
	}
	wantCounter(t, reg, "laneway_inbound_refused_total", map[string]string{"source": "stripe", "reason": refusedRateSource}, 1)
}

// TestGitHubReplaysWithNewDeliveryIDs is the attack: one captured GitHub
// request (a valid signature over its body) is resent with fresh
// X-GitHub-Delivery ids and other X-GitHub-Event types, neither of which
// GitHub signs. It is forwarded once, under the first request's type.
func TestGitHubReplaysWithNewDeliveryIDs(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		f := newFixture(t, b)
		s := f.service(nil, nil)
		c := server(t, s)
		gh := c.createSource(map[string]any{"id": "gh", "kind": "github", "tenant": "acme"})
		body := []byte(`{"ref":"refs/heads/main","repository":{"full_name":"acme/app"}}`)
		first := c.capture("gh", body, githubHeaders(gh.Secret, "d-1", "push", body))
		for i, typ := range []string{"delete", "release", "push"} {
			c.capture("gh", body, githubHeaders(gh.Secret, "d-forged-"+string(rune('a'+i)), typ, body))
		}
		totals := waitVerifier(t, s, "4 outcomes", decidedAtLeast(4))
		if totals[StatusVerified] != 1 || totals[StatusDuplicate] != 3 {
			t.Fatalf("outcomes %v, want 1 verified and 3 duplicates", totals)
		}
		envs := parseEnvelopes(t, f.envelopes(t))
		if len(envs) != 1 || envs[0].Type != "github.push" {
			t.Fatalf("forwarded %+v, want one github.push", envs)
		}
		for _, it := range c.list("source=gh&status=duplicate") {
			if it.DuplicateOf != first {
				t.Errorf("duplicate %+v is not of %s", it, first)
			}
		}
	})
}

// TestWrongSecretIsRefused: a request signed with another secret is
// refused at once (401), so the provider shows the failure and retries;
// after the operator fixes the secret, the retry is taken.
func TestWrongSecretIsRefused(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	s := f.service(nil, nil)
	c := server(t, s)
	c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_pasted_wrong"})
	body := stripeBody(7)
	if code, _ := c.raw(http.MethodPost, "/in/stripe", body, stripeHeaders("whsec_right", time.Now(), body)); code != http.StatusUnauthorized {
		t.Fatalf("wrong secret: %d, want 401", code)
	}
	c.json(http.MethodPost, "/v1/inbound/sources/stripe/secret/rotate", map[string]string{"secret": "whsec_right"}, http.StatusOK, nil)
	c.capture("stripe", body, stripeHeaders("whsec_right", time.Now(), body))
	waitVerifier(t, s, "the retry verified", atLeast(StatusVerified, 1))
}

// TestPublicHandlerAnswersNosniff: every answer of the public listener
// (accepted, refused, unknown source, unknown path, wrong method) tells
// browsers not to guess its type.
func TestPublicHandlerAnswersNosniff(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	s := f.service(nil, nil)
	admin := server(t, s)
	gh := admin.createSource(map[string]any{"id": "gh", "kind": "github", "tenant": "acme"})
	pub := httptest.NewServer(s.PublicHandler())
	t.Cleanup(pub.Close)
	c := &client{t: t, base: pub.URL}
	body := []byte(`{"repository":{"full_name":"acme/app"}}`)
	for _, tc := range []struct {
		method, path string
		h            http.Header
		want         int
	}{
		{http.MethodPost, "/in/gh", githubHeaders(gh.Secret, "d-1", "push", body), http.StatusAccepted},
		{http.MethodPost, "/in/gh", githubHeaders("forged", "d-2", "push", body), http.StatusUnauthorized},
		{http.MethodPost, "/in/gh", nil, http.StatusBadRequest},
		{http.MethodPost, "/in/nope", nil, http.StatusNotFound},
		{http.MethodPost, "/in/gh/" + NewCaptureToken(), nil, http.StatusNotFound},
		{http.MethodGet, "/v1/inbound/sources", nil, http.StatusNotFound},
		{http.MethodGet, "/in/gh", nil, http.StatusNotFound},
	} {
		req, err := http.NewRequest(tc.method, c.base+tc.path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(req.Header, tc.h)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: %d with X-Content-Type-Options %q, want %d with nosniff",
				tc.method, tc.path, resp.StatusCode, resp.Header.Get("X-Content-Type-Options"), tc.want)
		}
	}
}

// TestRefusedBodiesAreMarkedTruncatedOnlyWhenCut: a short forged body is
// kept whole (truncated false, so the console does not claim bytes are
// missing); a long one, or a too_large one, is marked truncated.
func TestRefusedBodiesAreMarkedTruncatedOnlyWhenCut(t *testing.T) {
	c := &Capture{Header: http.Header{}}
	for _, tc := range []struct {
		reason    string
		body      []byte
		kept      int
		truncated bool
	}{
		{ReasonBadSignature, []byte(`{"a":1}`), 7, false},
		{ReasonBadSignature, bytes.Repeat([]byte("a"), maxKeptBytes+1), maxKeptBytes, true},
		{ReasonTooLarge, []byte(`{"a"`), 4, true},
		{ReasonMissingSignature, nil, 0, false},
	} {
		k := refusedCapture(c, tc.reason, "", tc.body)
		if len(k.Body) != tc.kept || k.Truncated != tc.truncated {
			t.Errorf("%s with %d bytes: kept %d, truncated %v; want %d, %v", tc.reason, len(tc.body), len(k.Body), k.Truncated, tc.kept, tc.truncated)
		}
	}
}
