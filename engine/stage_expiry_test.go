package engine

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/deadtopic"
)

// TestPausedPushEndpointBacklogExpires pauses a push endpoint and lets its
// parked backlog age past max_age (issue #13, item 3): every parked
// delivery must end as a max_age dead letter, counted in
// laneway_dead_letters_total{reason="max_age"}, without a request, whatever
// the pause; none is left to the parked topic's retention
// (laneway_parked_expired_offsets_total stays 0), and the commit passes
// them all. The parked window (4) is smaller than the backlog (10), so
// records beyond it die unread too. The stage's clock is moved past
// max_age (10 minutes here) once the backlog is parked, so no wait races
// the parking.
func TestPausedPushEndpointBacklogExpires(t *testing.T) {
	stageBackends(t, 1, func(t *testing.T, r *stageRig) {
		rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
		ep := testEndpoint("ep-paused", rc.URL("/paused"))
		ep.Paused = true
		var skew atomic.Int64
		s := r.startStage(stageOpts{endpoints: newFakeEndpoints(ep), tweak: func(c *DeliveryConfig) {
			c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			c.ParkedWindow = 4
			c.Retry.MaxAge = 10 * time.Minute
		}})
		s.waitOwned(t, 0)
		const n = 10
		var want []string
		for i := range n {
			id := fmt.Sprintf("evt-%d", i)
			// Two deliveries per entity: facts, so neither supersedes the other.
			r.produce(0, testDelivery(id, "ep-paused", fmt.Sprintf("order:%d", i/2), int64(i%2+1)))
			want = append(want, id+":ep-paused", event.ReasonMaxAge)
		}
		s.events.Wait(t, 30*time.Second, "the paused lane to park", func(e Event) bool {
			return e.Kind == EventLaneParked && e.Endpoint == "ep-paused" && e.Reason == "paused"
		})
		r.waitParked(t, "ep-paused", n)
		if got := r.deadLetters(); len(got) != 0 {
			t.Fatalf("dead letters before max_age passed: %s", deadtopic.Describe(got))
		}

		// Past max_age, and within the broker's tolerance of timestamps
		// in the future (an hour by default), which the dead letters carry.
		skew.Store(int64(20 * time.Minute))
		letters := r.waitDeadLetters(time.Minute, "every parked delivery's max_age dead letter", hasLetters(want...))
		if len(letters) != n {
			t.Fatalf("dead letters %s, want %d, one per delivery", deadtopic.Describe(letters), n)
		}
		if v := s.counter(t, "laneway_parked_expired_offsets_total"); v != 0 {
			t.Fatalf("laneway_parked_expired_offsets_total = %v: parked records were skipped uncounted by a dead letter", v)
		}
		if got := rc.requests(); len(got) != 0 {
			t.Fatalf("the paused endpoint got requests: %+v", got)
		}
		last := r.lastParked("ep-paused")
		waitCond(t, time.Minute, "the commit to pass the expired deliveries and their parked records", func() (bool, string) {
			p, err := r.committedProgress()
			if err != nil {
				return false, err.Error()
			}
			at := r.committed(0)
			return at == n && p.NeedsFrom("ep-paused") > last, fmt.Sprintf("deliveries at %d, parked progress %+v (last parked %d)", at, p, last)
		})
		// Counted when its produce is acknowledged, before its delivery is
		// finished: once the commit has passed them all, every letter is.
		if v := s.counter(t, "laneway_dead_letters_total", "reason", event.ReasonMaxAge); v != n {
			t.Fatalf(`laneway_dead_letters_total{reason="max_age"} = %v, want %d`, v, n)
		}
	})
}
