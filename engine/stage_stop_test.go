package engine

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stopBoundSlack is what Stop may take beyond RevokeTimeout: its doc
// promises about RevokeTimeout + 15 s (the commit and the breakers' handover
// are bounded); 5 s more for a loaded test machine.
const stopBoundSlack = 20 * time.Second

// TestStopReturnsWhileKafkaIsUnreachable owns a partition, lets an endpoint
// answer 413 (so a dead letter must be written) once Kafka cannot take it,
// and stops the stage: Stop must return within RevokeTimeout + 20 s however
// Kafka behaves (before the owner rewrite it waited forever for the dead
// letter's produce callback). Kafka is made unreachable two ways: the kfake
// cluster is closed (every request fails), or it keeps its connections but
// never answers a Produce (the group and commits still work). In the second
// case the commit on Stop must not cover the delivery whose dead letter was
// never acknowledged, so its next owner makes it again.
func TestStopReturnsWhileKafkaIsUnreachable(t *testing.T) {
	for _, mode := range []string{"cluster_closed", "produce_unanswered"} {
		t.Run(mode, func(t *testing.T) {
			r := kfakeStageRig(t, 1)
			release := make(chan struct{})
			rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, n int) {
				if n == 0 {
					w.WriteHeader(http.StatusOK) // the first delivery: the partition is owned and working
					return
				}
				select { // the second: answered once Kafka is unreachable
				case <-release:
				case <-req.Context().Done():
					return
				}
				w.WriteHeader(http.StatusRequestEntityTooLarge)
			})
			eps := newFakeEndpoints(testEndpoint("ep-1", rc.URL("/ep-1")))
			s := r.startStage(stageOpts{endpoints: eps, tweak: func(c *DeliveryConfig) {
				c.AttemptTimeout = 2 * time.Second // RevokeTimeout = 4 s
			}})
			s.waitOwned(t, 0)

			r.produce(0, testDelivery("evt-ok", "ep-1", "order:1", 1))
			rc.next(t, 30*time.Second, "the first delivery")
			s.events.waitAttempts(t, 30*time.Second, "delivered", 1)
			waitCond(t, 30*time.Second, "the first delivery's commit", func() (bool, string) {
				at := r.committed(0)
				return at == 1, "committed " + itoa(at)
			})
			r.produce(0, testDelivery("evt-too-large", "ep-1", "order:2", 1))
			rc.next(t, 30*time.Second, "the second delivery")

			switch mode {
			case "cluster_closed":
				r.cluster.Close()
			case "produce_unanswered":
				r.cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
					r.cluster.KeepControl()
					return nil, nil, true // no answer, the connection stays open
				})
			}
			close(release)
			s.events.waitAttempts(t, 30*time.Second, "dead", 1) // the 413 classified: its dead letter is then issued
			if v := s.counter(t, "laneway_dead_letters_total", "reason", "payload_too_large"); v != 0 {
				t.Fatalf("%v dead letters acknowledged by an unreachable Kafka", v)
			}

			bound := s.cfg.RevokeTimeout + stopBoundSlack
			took := s.stopWithin(t, bound)
			t.Logf("Stop with an unacknowledged dead letter took %v (bound %v)", took.Round(time.Millisecond), bound)
			if v := s.counter(t, "laneway_dead_letters_total", "reason", "payload_too_large"); v != 0 {
				t.Fatalf("a dead letter counted as written although Kafka never acknowledged it (%v)", v)
			}
			if mode == "produce_unanswered" {
				if at := r.committed(0); at != 1 {
					t.Fatalf("deliveries committed at %d after Stop, want 1: the delivery whose dead letter never landed must stay unfinished", at)
				}
			}
		})
	}
}

// TestRevokeCancelsAttemptsAtRevokeTimeout holds an attempt at the receiver
// longer than the revoke deadline (AttemptTimeout 30 s, RevokeTimeout 1 s)
// and revokes the partition, by Stop or by a second instance joining the
// group: the attempt is canceled at the deadline (the receiver sees its
// request's context end), counted as outcome "canceled" and not "retry",
// never fed to the breaker, and left unfinished, so the next owner makes it.
func TestRevokeCancelsAttemptsAtRevokeTimeout(t *testing.T) {
	const attemptTimeout, revokeTimeout = 30 * time.Second, time.Second
	tweak := func(c *DeliveryConfig) { c.AttemptTimeout, c.RevokeTimeout = attemptTimeout, revokeTimeout }
	holdFirst := func(t *testing.T) *receiver { return holdFirstReceiver(t, 2*attemptTimeout) }

	t.Run("stop", func(t *testing.T) {
		stageBackends(t, 1, func(t *testing.T, r *stageRig) {
			rc := holdFirst(t)
			eps := newFakeEndpoints(testEndpoint("ep-1", rc.URL("/ep-1")))
			br := newFakeBreakers()
			s := r.startStage(stageOpts{endpoints: eps, breakers: br, tweak: tweak})
			s.waitOwned(t, 0)
			r.produce(0, testDelivery("evt-held", "ep-1", "order:1", 1))
			rc.next(t, 30*time.Second, "the held attempt")

			took := s.stopWithin(t, revokeTimeout+stopBoundSlack)
			t.Logf("Stop with an attempt held past the revoke deadline took %v", took.Round(time.Millisecond))
			if took < revokeTimeout {
				t.Fatalf("Stop took %v: it did not wait RevokeTimeout (%v) for the attempt", took, revokeTimeout)
			}
			rc.waitEnded(t, 0)
			checkCanceledOnly(t, s, br, 1)

			// The canceled delivery stayed unfinished: the next owner makes it.
			br2 := newFakeBreakers()
			s2 := r.startStage(stageOpts{endpoints: eps, breakers: br2, tweak: tweak})
			s2.events.waitAttempts(t, time.Minute, "delivered", 1) // the next owner delivers the canceled delivery
			if got := rc.answered("evt-held", http.StatusOK); got != 1 {
				t.Fatalf("evt-held answered 200 %d times, want 1", got)
			}
		})
	})

	t.Run("rebalance", func(t *testing.T) {
		stageBackends(t, 2, func(t *testing.T, r *stageRig) {
			rc := holdFirst(t)
			eps := newFakeEndpoints(testEndpoint("ep-0", rc.URL("/ep-0")), testEndpoint("ep-1", rc.URL("/ep-1")))
			br := newFakeBreakers()
			first := r.startStage(stageOpts{endpoints: eps, breakers: br, tweak: tweak})
			first.waitOwned(t, 0)
			first.waitOwned(t, 1)
			r.produce(0, testDelivery("evt-p0", "ep-0", "order:0", 1))
			r.produce(1, testDelivery("evt-p1", "ep-1", "order:1", 1))
			rc.next(t, 30*time.Second, "the first held attempt")
			rc.next(t, 30*time.Second, "the second held attempt")

			// A second instance joins: the cooperative balancer moves one
			// partition to it, and the first instance's revoke cancels the
			// attempt on that partition at the deadline.
			br2 := newFakeBreakers()
			second := r.startStage(stageOpts{endpoints: eps, breakers: br2, tweak: tweak})
			first.events.waitAttempts(t, 2*time.Minute, "canceled", 1) // the revoke cancels one attempt
			moved := int32(-1)
			waitCond(t, time.Minute, "the second instance to own the revoked partition", func() (bool, string) {
				for _, p := range []int32{0, 1} {
					if second.owned(p) != nil && first.owned(p) == nil {
						moved = p
						return true, ""
					}
				}
				return false, "no partition moved yet"
			})
			movedID := []string{"evt-p0", "evt-p1"}[moved]
			keptID := []string{"evt-p0", "evt-p1"}[1-moved]
			rc.waitEndedID(t, movedID)
			if rc.endedID(keptID) {
				t.Fatalf("the attempt of %s, on the partition the first instance kept, was ended too", keptID)
			}
			checkCanceledOnly(t, first, br, 1)
			second.events.waitAttempts(t, time.Minute, "delivered", 1) // the new owner delivers the canceled delivery
			if v, n := second.counter(t, "laneway_delivery_attempts_total", "outcome", "delivered"), rc.answered(movedID, http.StatusOK); v != 1 || n != 1 {
				t.Fatalf("delivered by the new owner: %v, %s answered 200: %d; want 1 and 1", v, movedID, n)
			}
			if rec, _, _ := br2.snapshot(); len(rec) != 1 || rec[0] != "ep-"+itoa(int64(moved)) {
				t.Fatalf("the new owner fed its breaker %v, want the one success of ep-%d", rec, moved)
			}
		})
	})
}

// holdFirstReceiver holds the first attempt of every delivery until its
// request ends (a canceled attempt closes the connection) or hold passes,
// and answers 200 to every later one.
func holdFirstReceiver(t *testing.T, hold time.Duration) *receiver {
	var mu sync.Mutex
	seen := map[string]bool{}
	return newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
		id := req.Header.Get("webhook-id")
		mu.Lock()
		first := !seen[id]
		seen[id] = true
		mu.Unlock()
		if first {
			select {
			case <-req.Context().Done():
				return
			case <-time.After(hold):
			}
		}
		w.WriteHeader(http.StatusOK)
	})
}

// checkCanceledOnly checks that the stage counted exactly want attempts,
// all canceled, and fed nothing to its breaker.
func checkCanceledOnly(t *testing.T, s *testStage, br *fakeBreakers, want int) {
	t.Helper()
	for outcome, n := range map[string]float64{"canceled": float64(want), "retry": 0, "delivered": 0, "dead": 0, "gone": 0} {
		if v := s.counter(t, "laneway_delivery_attempts_total", "outcome", outcome); v != n {
			t.Errorf("laneway_delivery_attempts_total{outcome=%q} = %v, want %v", outcome, v, n)
		}
	}
	if records, _, _ := br.snapshot(); len(records) != 0 {
		t.Errorf("the canceled attempt fed the breaker: Record for %v", records)
	}
	if v := s.counter(t, "laneway_deliveries_total", "outcome", "dead"); v != 0 {
		t.Errorf("a canceled attempt ended its delivery as dead (%v)", v)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// committed returns the deliveries group's committed offset of partition
// p, -1 for none.
func (r *stageRig) committed(p int32) int64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := r.adm.FetchOffsets(ctx, r.group)
	if err != nil {
		return -1
	}
	if o, ok := resp.Lookup(r.tops.Deliveries, p); ok && o.Err == nil {
		return o.At
	}
	return -1
}

// TestStopReturnsWhileAssignmentCannotReadOffsets stops the stage while it
// is taking a partition over and Kafka cannot answer the offset reads the
// assignment needs (ListOffsets refused with NOT_LEADER_FOR_PARTITION, a
// leaderless partition; or, after that, the cluster gone altogether). Stop
// must still return within RevokeTimeout + 20 s, as its doc promises
// whatever Kafka does.
func TestStopReturnsWhileAssignmentCannotReadOffsets(t *testing.T) {
	for _, mode := range []string{"offsets_refused", "cluster_closed"} {
		t.Run(mode, func(t *testing.T) {
			r := kfakeStageRig(t, 1)
			refused := r.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Err: kerr.NotLeaderForPartition, Count: -1})
			eps := newFakeEndpoints(testEndpoint("ep-1", "http://127.0.0.1:9/never"))
			s := r.startStage(stageOpts{endpoints: eps, tweak: func(c *DeliveryConfig) { c.AttemptTimeout = time.Second }})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := refused.Wait(ctx, 3); err != nil {
				t.Fatalf("the assignment never asked for offsets: %v", err)
			}
			if mode == "cluster_closed" {
				r.cluster.Close()
			}
			bound := s.cfg.RevokeTimeout + stopBoundSlack
			took := s.stopWithin(t, bound)
			t.Logf("Stop during the assignment took %v (bound %v)", took.Round(time.Millisecond), bound)
		})
	}
}
