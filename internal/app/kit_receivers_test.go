package app_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

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

// startRecorder starts a fleet.Recorder that answers as answer and wants
// every delivery signed with the secret given to setSecret.
func startRecorder(t *testing.T, answer fleet.Answer) *fleet.Recorder {
	t.Helper()
	rc := fleet.NewRecorder(fleet.RecorderConfig{Answer: answer, Signed: true})
	t.Cleanup(rc.Close)
	return rc
}

// setSecret sets the endpoint secret rc checks signatures with.
func setSecret(t *testing.T, rc *fleet.Recorder, secret string) {
	t.Helper()
	if err := rc.SetSecret(secret); err != nil {
		t.Fatal(err)
	}
}

// waitRecorded waits until cond holds, re-checking after every answered
// request and every 100 ms (for conditions on things other than requests).
func waitRecorded(t *testing.T, rc *fleet.Recorder, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for !cond() {
		select {
		case <-rc.Changed():
		case <-poll.C:
		case <-deadline.C:
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
	}
}

// checkRecordedOrder requires each entity's first successful deliveries to come
// in strictly increasing revisions.
func checkRecordedOrder(t *testing.T, reqs []fleet.Request) {
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
