package engine

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/laneway/laneway/deliver"
)

// TestReleaseHandsOverEveryBreakerUsed delivers to two endpoints of one
// partition: ep-idle succeeds, so its lane goes idle and is dropped (the
// stage reports it at 0 pending and in flight), while ep-busy fails and its lane waits on a
// long retry delay. Releasing the partition (Stop) must flush the breakers
// to Redis and then forget both endpoints' breakers, the idle one's too:
// a breaker left in memory would be used as is, without a Warm, if the
// partition came back to this instance after another owner changed it.
func TestReleaseHandsOverEveryBreakerUsed(t *testing.T) {
	stageBackends(t, 1, func(t *testing.T, r *stageRig) {
		rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
			if strings.HasSuffix(req.URL.Path, "/busy") {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		eps := newFakeEndpoints(testEndpoint("ep-idle", rc.URL("/idle")), testEndpoint("ep-busy", rc.URL("/busy")))
		br := newFakeBreakers()
		s := r.startStage(stageOpts{endpoints: eps, breakers: br, tweak: func(c *DeliveryConfig) {
			c.AttemptTimeout = 2 * time.Second
			// ep-busy's delivery waits an hour after its first failure.
			c.Retry = deliver.RetryPolicy{Base: time.Hour, Min: time.Hour, Max: time.Hour, MaxAttempts: 100, MaxAge: 72 * time.Hour}
		}})
		s.waitOwned(t, 0)
		r.produce(0, testDelivery("evt-idle", "ep-idle", "order:1", 1), testDelivery("evt-busy", "ep-busy", "order:2", 1))

		s.events.waitAttempts(t, 30*time.Second, "delivered", 1)
		s.events.waitAttempts(t, 30*time.Second, "retry", 1)
		// An attempt's event is told in the step that settles it, under the
		// partition's lock, which the gauges are read under too.
		idle := laneIdle(t, s.reg, "ep-idle")
		busy, busyShown := metricValue(t, s.reg, "laneway_endpoint_pending", "endpoint", "ep-busy")
		if !idle || !busyShown || busy != 1 {
			t.Fatalf("after the two attempts ep-idle idle %t, ep-busy pending %v (shown %t): want ep-idle's lane idle while ep-busy's waits", idle, busy, busyShown)
		}
		if records, _, _ := br.snapshot(); !slices.Contains(records, "ep-idle") || !slices.Contains(records, "ep-busy") {
			t.Fatalf("the breakers recorded %v, want both endpoints", records)
		}

		s.stopWithin(t, s.cfg.RevokeTimeout+stopBoundSlack)
		_, events, forgets := br.snapshot()
		flushAt := slices.Index(events, "flush")
		forgetAt := slices.IndexFunc(events, func(e string) bool { return strings.HasPrefix(e, "forget:") })
		if flushAt < 0 || forgetAt < 0 || forgetAt < flushAt {
			t.Fatalf("breaker calls %v: want a Flush, then a Forget", events)
		}
		var forgotten []string
		for _, ids := range forgets {
			forgotten = append(forgotten, ids...)
		}
		for _, id := range []string{"ep-idle", "ep-busy"} {
			if !slices.Contains(forgotten, id) {
				t.Errorf("the breaker of %s was not forgotten on release (calls %v)", id, events)
			}
		}
	})
}

// TestRevokeHandsOverOnlyTheRevokedBreakers runs the same two endpoints on
// each of two partitions and lets a second instance join: the first
// instance flushes and forgets the breakers of both endpoints of the
// partition it gives up (the idle one included) and keeps those of the
// partition it still owns.
func TestRevokeHandsOverOnlyTheRevokedBreakers(t *testing.T) {
	stageBackends(t, 2, func(t *testing.T, r *stageRig) {
		rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
			if strings.Contains(req.URL.Path, "/busy") {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		ids := func(p int) []string { return []string{"ep-idle-" + itoa(int64(p)), "ep-busy-" + itoa(int64(p))} }
		eps := newFakeEndpoints(
			testEndpoint(ids(0)[0], rc.URL("/idle/0")), testEndpoint(ids(0)[1], rc.URL("/busy/0")),
			testEndpoint(ids(1)[0], rc.URL("/idle/1")), testEndpoint(ids(1)[1], rc.URL("/busy/1")))
		tweak := func(c *DeliveryConfig) {
			c.AttemptTimeout = 2 * time.Second
			c.Retry = deliver.RetryPolicy{Base: time.Hour, Min: time.Hour, Max: time.Hour, MaxAttempts: 100, MaxAge: 72 * time.Hour}
		}
		br := newFakeBreakers()
		first := r.startStage(stageOpts{endpoints: eps, breakers: br, tweak: tweak})
		first.waitOwned(t, 0)
		first.waitOwned(t, 1)
		for p := range 2 {
			r.produce(int32(p), testDelivery("evt-idle-"+itoa(int64(p)), ids(p)[0], "order:1", 1),
				testDelivery("evt-busy-"+itoa(int64(p)), ids(p)[1], "order:2", 1))
		}
		deadline := time.Now().Add(30 * time.Second)
		first.events.waitAttempts(t, time.Until(deadline), "delivered", 2)
		first.events.waitAttempts(t, time.Until(deadline), "retry", 2)
		ok := first.counter(t, "laneway_delivery_attempts_total", "outcome", "delivered")
		retry := first.counter(t, "laneway_delivery_attempts_total", "outcome", "retry")
		idle0, idle1 := laneIdle(t, first.reg, ids(0)[0]), laneIdle(t, first.reg, ids(1)[0])
		if ok != 2 || retry != 2 || !idle0 || !idle1 {
			t.Fatalf("delivered %v, retry %v, idle lanes idle %t and %t: want the idle lanes to go and the busy ones to wait", ok, retry, idle0, idle1)
		}
		if _, events, _ := br.snapshot(); slices.ContainsFunc(events, func(e string) bool { return strings.HasPrefix(e, "forget:") }) {
			t.Fatalf("breakers forgotten before any release: %v", events)
		}

		second := r.startStage(stageOpts{endpoints: eps, breakers: newFakeBreakers(), tweak: tweak})
		moved := int32(-1)
		waitCond(t, 2*time.Minute, "a partition to move to the second instance", func() (bool, string) {
			for _, p := range []int32{0, 1} {
				if second.owned(p) != nil && first.owned(p) == nil {
					moved = p
					return true, ""
				}
			}
			return false, "no partition moved yet"
		})
		var events []string
		var forgotten []string
		waitCond(t, 30*time.Second, "the revoked partition's breakers to be forgotten", func() (bool, string) {
			var forgets [][]string
			_, events, forgets = br.snapshot()
			forgotten = nil
			for _, f := range forgets {
				forgotten = append(forgotten, f...)
			}
			return slices.Contains(forgotten, ids(int(moved))[0]) && slices.Contains(forgotten, ids(int(moved))[1]), strings.Join(events, " ")
		})
		flushAt := slices.Index(events, "flush")
		forgetAt := slices.IndexFunc(events, func(e string) bool { return strings.HasPrefix(e, "forget:") })
		if flushAt < 0 || forgetAt < flushAt {
			t.Fatalf("breaker calls %v: want a Flush before the Forget", events)
		}
		for _, id := range ids(1 - int(moved)) {
			if slices.Contains(forgotten, id) {
				t.Fatalf("the breaker of %s, on the partition the first instance kept, was forgotten (calls %v)", id, events)
			}
		}
	})
}

// laneIdle reports whether an endpoint holds nothing: no delivery pending or
// in flight (its series stay a minute after its last outcome, at 0).
func laneIdle(t *testing.T, reg prometheus.Gatherer, id string) bool {
	t.Helper()
	pending, _ := metricValue(t, reg, "laneway_endpoint_pending", "endpoint", id)
	inFlight, _ := metricValue(t, reg, "laneway_endpoint_in_flight", "endpoint", id)
	return pending == 0 && inFlight == 0
}
