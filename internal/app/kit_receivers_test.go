package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/fleet"
)

var eventTypes = []string{"order.updated", "payment.approved", "customer.created"}

// subscription is one test endpoint's config and its receiver.
type subscription struct {
	tenant   string
	types    []string
	limit    int
	id       string
	receiver *fleet.Endpoint
}

func (s subscription) wants(tenant, typ string) bool {
	return s.tenant == tenant && (len(s.types) == 0 || slices.Contains(s.types, typ))
}

// createSubscriptions creates 20 endpoints of 3 tenants on the fleet, with
// varied event types and concurrency limits.
func createSubscriptions(t *testing.T, api apiClient, f *fleet.Fleet) []subscription {
	var subs []subscription
	for i := range 20 {
		s := subscription{tenant: fmt.Sprintf("tenant-%d", i%3), limit: 1 + i%5}
		switch i % 4 {
		case 1:
			s.types = eventTypes[:1]
		case 2:
			s.types = eventTypes[1:]
		}
		// The receiver answers slowly enough for requests to overlap, so
		// the concurrency limit is actually exercised.
		slow := func(w http.ResponseWriter, _ *http.Request, _ int) {
			time.Sleep(time.Millisecond)
			w.WriteHeader(http.StatusOK)
		}
		ep := api.createEndpoint(map[string]any{
			"tenant": s.tenant, "url": f.URL(i), "event_types": s.types, "max_concurrency": s.limit,
		})
		s.id = ep.ID
		recv, err := f.Add(i, ep.Secret, slow)
		if err != nil {
			t.Fatal(err)
		}
		s.receiver = recv
		subs = append(subs, s)
	}
	return subs
}

// checkDeliveries requires each subscription to have received exactly its
// events, in order, within its limit, all signed, and some endpoint to have
// used its full limit.
func checkDeliveries(t *testing.T, subs []subscription, expected map[string][]string) {
	t.Helper()
	reachedLimit := false
	for _, s := range subs {
		receipts := s.receiver.Receipts()
		got := make([]string, 0, len(receipts))
		for _, r := range receipts {
			got = append(got, r.MsgID)
		}
		want := slices.Clone(expected[s.id])
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("endpoint %s (%s %v): got %d deliveries, want %d", s.id, s.tenant, s.types, len(got), len(want))
		}
		checkOrder(t, s.id, receipts)
		if m := s.receiver.MaxInFlight(); m > int64(s.limit) {
			t.Errorf("endpoint %s saw %d concurrent requests, limit %d", s.id, m, s.limit)
		} else if s.limit > 1 && m == int64(s.limit) {
			reachedLimit = true
		}
		if bad := s.receiver.BadSignatures(); bad != 0 {
			t.Errorf("endpoint %s: %d deliveries failed signature verification", s.id, bad)
		}
	}
	if !reachedLimit {
		t.Errorf("no endpoint ever used its full concurrency limit: lanes are not running in parallel")
	}
}

// checkOrder requires revisions of each entity to arrive strictly increasing.
func checkOrder(t *testing.T, endpointID string, receipts []fleet.Receipt) {
	t.Helper()
	last := map[string]int64{}
	for _, r := range receipts {
		if prev, ok := last[r.Entity]; ok && r.Revision <= prev {
			t.Errorf("endpoint %s entity %s: revision %d arrived after %d", endpointID, r.Entity, r.Revision, prev)
			return
		}
		last[r.Entity] = r.Revision
	}
}

// checkFirstDeliveryOrder allows replays (duplicates) but no first delivery
// of a revision after the first delivery of a higher one.
func checkFirstDeliveryOrder(t *testing.T, receipts []fleet.Receipt) {
	t.Helper()
	seen := map[string]bool{}
	highest := map[string]int64{}
	for _, r := range receipts {
		if seen[r.MsgID] {
			continue
		}
		seen[r.MsgID] = true
		if r.Revision < highest[r.Entity] {
			t.Errorf("entity %s: revision %d first delivered after %d", r.Entity, r.Revision, highest[r.Entity])
		}
		highest[r.Entity] = max(highest[r.Entity], r.Revision)
	}
}

// distinctIDs counts the distinct deliveries among receipts.
func distinctIDs(receipts []fleet.Receipt) int {
	seen := map[string]bool{}
	for _, r := range receipts {
		seen[r.MsgID] = true
	}
	return len(seen)
}

// hookReceiver is a webhook receiver for the failure-policy tests. Unlike the
// recording fleet it records every request, failed ones included (arrival,
// answer, the connection it came on), measures concurrency overall and per
// entity, and lets a behaviour hijack the connection.
type hookReceiver struct {
	srv      *httptest.Server
	behave   hookBehavior
	verifier atomic.Pointer[standardwebhooks.Webhook]
	closing  chan struct{}
	notify   chan struct{}

	mu          sync.Mutex
	reqs        []*hookRequest
	perMsg      map[string]int
	inFlight    int
	maxInFlight int
	perEntity   map[string]int
	overlaps    []string // entities seen with two requests in flight at once
	badSigs     int
}

// hookRequest is one request as the receiver saw it.
type hookRequest struct {
	Path     string
	MsgID    string
	Entity   string
	Revision int64
	Attempt  int       // 1 for the first request carrying this webhook-id
	At       time.Time // arrival
	Done     time.Time // answered (or hijacked, or abandoned)
	Status   int       // 0: no response (connection reset, client gave up)
	Reused   bool      // came on a connection that had served a request before
	InFlight int       // requests in flight at arrival, this one included
}

// hookBehavior answers one request and returns the status it sent, 0 if it
// sent none. rq is filled in up to Attempt and Reused.
type hookBehavior func(w http.ResponseWriter, r *http.Request, rq *hookRequest) int

type hookConnKey struct{}

type hookConn struct{ served atomic.Int64 }

func startHookReceiver(t *testing.T, behave hookBehavior) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{
		behave: behave, closing: make(chan struct{}), notify: make(chan struct{}, 1),
		perMsg: map[string]int{}, perEntity: map[string]int{},
	}
	rc.srv = httptest.NewUnstartedServer(http.HandlerFunc(rc.serve))
	rc.srv.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, hookConnKey{}, &hookConn{})
	}
	rc.srv.Start()
	t.Cleanup(func() {
		close(rc.closing) // releases hanging handlers
		rc.srv.Close()
	})
	return rc
}

// URL of path on the receiver.
func (rc *hookReceiver) URL(path string) string { return rc.srv.URL + path }

// setSecret sets the endpoint secret signatures are checked with.
func (rc *hookReceiver) setSecret(t *testing.T, secret string) {
	t.Helper()
	v, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	rc.verifier.Store(v)
}

func (rc *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	rq := &hookRequest{Path: r.URL.Path, MsgID: r.Header.Get("webhook-id"), At: time.Now()}
	if c, ok := r.Context().Value(hookConnKey{}).(*hookConn); ok {
		rq.Reused = c.served.Add(1) > 1
	}
	body, _ := io.ReadAll(r.Body)
	var p event.Payload
	_ = json.Unmarshal(body, &p)
	rq.Entity, rq.Revision = p.Entity.ID, p.Entity.Revision
	verifier := rc.verifier.Load()
	badSig := rq.MsgID != "" && (verifier == nil || verifier.Verify(body, r.Header) != nil)

	rc.mu.Lock()
	rc.perMsg[rq.MsgID]++
	rq.Attempt = rc.perMsg[rq.MsgID]
	rc.inFlight++
	rq.InFlight = rc.inFlight
	rc.maxInFlight = max(rc.maxInFlight, rc.inFlight)
	if rq.Entity != "" {
		rc.perEntity[rq.Entity]++
		if rc.perEntity[rq.Entity] > 1 {
			rc.overlaps = append(rc.overlaps, rq.Entity)
		}
	}
	if badSig {
		rc.badSigs++
	}
	rc.reqs = append(rc.reqs, rq)
	rc.mu.Unlock()

	var status int
	if badSig {
		w.WriteHeader(http.StatusUnauthorized)
		status = http.StatusUnauthorized
	} else {
		status = rc.behave(w, r, rq)
	}

	rc.mu.Lock()
	rq.Done, rq.Status = time.Now(), status
	rc.inFlight--
	if rq.Entity != "" {
		rc.perEntity[rq.Entity]--
	}
	rc.mu.Unlock()
	select {
	case rc.notify <- struct{}{}:
	default:
	}
}

// requests returns copies of the requests seen so far, in arrival order,
// that match keep (all when nil).
func (rc *hookReceiver) requests(keep func(hookRequest) bool) []hookRequest {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []hookRequest
	for _, rq := range rc.reqs {
		if keep == nil || keep(*rq) {
			out = append(out, *rq)
		}
	}
	return out
}

func (rc *hookReceiver) stats() (maxInFlight, badSigs int, overlaps []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.maxInFlight, rc.badSigs, append([]string(nil), rc.overlaps...)
}

// waitFor waits until cond holds, re-checking after every answered request
// and every 100 ms (for conditions on things other than requests).
func (rc *hookReceiver) waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-rc.notify:
		case <-poll.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// delivered returns, per webhook-id, the first request answered 2xx.
func (rc *hookReceiver) delivered() map[string]hookRequest {
	out := map[string]hookRequest{}
	for _, rq := range rc.requests(func(rq hookRequest) bool { return rq.Status >= 200 && rq.Status < 300 }) {
		if _, ok := out[rq.MsgID]; !ok {
			out[rq.MsgID] = rq
		}
	}
	return out
}

// checkHookOrder requires each entity's first successful deliveries to come
// in strictly increasing revisions.
func checkHookOrder(t *testing.T, reqs []hookRequest) {
	t.Helper()
	seen := map[string]bool{}
	last := map[string]int64{}
	for _, rq := range reqs {
		if rq.Status < 200 || rq.Status > 299 || seen[rq.MsgID] {
			continue
		}
		seen[rq.MsgID] = true
		if prev, ok := last[rq.Entity]; ok && rq.Revision <= prev {
			t.Errorf("entity %s: revision %d delivered after revision %d", rq.Entity, rq.Revision, prev)
		}
		last[rq.Entity] = rq.Revision
	}
}
