package benchrecv_test

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// lookup knows ids "s<slot>" and maps slot s to entity s%2, revision s/2+1.
func lookup(_ int, msgID string) (benchrecv.Delivery, bool) {
	rest, ok := strings.CutPrefix(msgID, "s")
	s, err := strconv.Atoi(rest)
	if !ok || err != nil || s < 0 || s >= 10 {
		return benchrecv.Delivery{}, false
	}
	return benchrecv.Delivery{Slot: s, Entity: s % 2, Revision: int64(s/2 + 1)}, true
}

func start(t *testing.T, cfg benchrecv.Config) *benchrecv.Receiver {
	t.Helper()
	cfg.Slots, cfg.Lookup = 10, lookup
	r, err := benchrecv.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

func post(t *testing.T, url, msgID string, h http.Header, body string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("webhook-id", msgID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestCountsDuplicatesAndOrder(t *testing.T) {
	r := start(t, benchrecv.Config{Endpoints: 2})
	for _, id := range []string{"s0", "s2", "s2", "s6", "s4", "nope"} {
		if code := post(t, r.URL(1), id, nil, "{}"); code != http.StatusNoContent {
			t.Fatalf("%s: status %d", id, code)
		}
	}
	post(t, r.RawURL(), "", nil, "{}")
	got := r.Stats()
	want := benchrecv.Stats{Requests: 6, Received: 4, Duplicates: 1, OrderViolations: 1, Unmatched: 1, Raw: 1}
	if got != want {
		t.Fatalf("stats %+v, want %+v", got, want)
	}
	if r.ReceivedAt(6) == 0 || r.ReceivedAt(8) != 0 {
		t.Fatalf("receipt times: slot 6 %d, slot 8 %d", r.ReceivedAt(6), r.ReceivedAt(8))
	}
}

func TestEndpointsHaveTheirOwnPorts(t *testing.T) {
	r := start(t, benchrecv.Config{Endpoints: 2})
	if r.URL(0)[:20] == r.URL(1)[:20] {
		t.Fatalf("endpoints share a port: %s %s", r.URL(0), r.URL(1))
	}
	shared := start(t, benchrecv.Config{Endpoints: 2, SharedListener: true})
	if a, b := shared.URL(0), shared.URL(1); strings.TrimSuffix(a, "/ep/0") != strings.TrimSuffix(b, "/ep/1") {
		t.Fatalf("SharedListener: %s and %s differ", a, b)
	}
}

func TestMeasuresInFlightAndEntityOverlap(t *testing.T) {
	r := start(t, benchrecv.Config{Endpoints: 1, Delay: 100 * time.Millisecond})
	var wg sync.WaitGroup
	for _, id := range []string{"s0", "s2", "s1"} { // s0 and s2 are both entity 0
		wg.Go(func() { post(t, r.URL(0), id, nil, "{}") })
	}
	wg.Wait()
	if m := r.MaxInFlight(0); m != 3 {
		t.Errorf("max in flight %d, want 3", m)
	}
	if o := r.Stats().EntityOverlaps; o != 1 {
		t.Errorf("entity overlaps %d, want 1", o)
	}
}

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// sign returns the timestamp and signature headers of a request with
// webhook-id id and body, signed with secret now.
func sign(t *testing.T, id, body string) http.Header {
	t.Helper()
	wh, _ := standardwebhooks.NewWebhook(secret)
	now := time.Now()
	sig, err := wh.Sign(id, now, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return http.Header{"Webhook-Timestamp": {strconv.FormatInt(now.Unix(), 10)}, "Webhook-Signature": {sig}}
}

func TestVerify(t *testing.T) {
	r := start(t, benchrecv.Config{Endpoints: 1, Verify: true})
	if err := r.SetSecret(0, secret); err != nil {
		t.Fatal(err)
	}
	good := `{"id":"s4","entity":{"revision":3}}`
	if code := post(t, r.URL(0), "s4", sign(t, "s4", good), good); code != http.StatusNoContent {
		t.Fatalf("good delivery: status %d", code)
	}
	wrong := `{"id":"s6","entity":{"revision":1}}`
	post(t, r.URL(0), "s6", sign(t, "s6", wrong), wrong)
	if code := post(t, r.URL(0), "s8", sign(t, "s8", good), good+" "); code != http.StatusUnauthorized {
		t.Fatalf("tampered body: status %d, want 401", code)
	}
	got := r.Stats()
	if got.Received != 2 || got.BadSignatures != 1 || got.PayloadMismatches != 1 {
		t.Fatalf("stats %+v", got)
	}
}

func TestPortsSpreadEndpoints(t *testing.T) {
	r := start(t, benchrecv.Config{Endpoints: 5, Ports: 2})
	host := func(n int) string { return strings.TrimSuffix(r.URL(n), "/ep/"+strconv.Itoa(n)) }
	if r.Ports() != 2 || host(0) != host(2) || host(0) != host(4) || host(0) == host(1) || host(1) != host(3) {
		t.Fatalf("%d ports: %s %s %s %s %s", r.Ports(), host(0), host(1), host(2), host(3), host(4))
	}
	if code := post(t, r.URL(3), "s1", nil, "{}"); code != http.StatusNoContent {
		t.Fatalf("endpoint 3 on a shared port: status %d", code)
	}
	if r.MaxInFlight(3) != 1 || r.MaxInFlight(1) != 0 {
		t.Fatalf("request counted for the wrong endpoint")
	}
}

func TestBehaviorHoldsAndAnswers(t *testing.T) {
	r := start(t, benchrecv.Config{Endpoints: 2})
	hold := make(chan struct{})
	r.SetBehavior(0, benchrecv.Behavior{Hold: hold})
	r.SetBehavior(1, benchrecv.Behavior{Status: http.StatusServiceUnavailable, Delay: 50 * time.Millisecond})
	done := make(chan int)
	go func() { done <- post(t, r.URL(0), "s0", nil, "{}") }()
	t0 := time.Now()
	if code := post(t, r.URL(1), "s1", nil, "{}"); code != http.StatusServiceUnavailable || time.Since(t0) < 50*time.Millisecond {
		t.Fatalf("endpoint 1: status %d after %s", code, time.Since(t0))
	}
	select {
	case code := <-done:
		t.Fatalf("held request answered %d before release", code)
	case <-time.After(100 * time.Millisecond):
	}
	if r.InFlight(0) != 1 {
		t.Fatalf("held request not in flight: %d", r.InFlight(0))
	}
	r.SetBehavior(0, benchrecv.Behavior{}) // later requests are not held
	if code := post(t, r.URL(0), "s2", nil, "{}"); code != http.StatusNoContent {
		t.Fatalf("after SetBehavior: status %d", code)
	}
	close(hold)
	if code := <-done; code != http.StatusNoContent {
		t.Fatalf("released request: status %d", code)
	}
}
