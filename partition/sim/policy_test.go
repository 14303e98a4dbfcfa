package sim

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/partition"
)

// Rules 8–13 on hand-built attempts, each with a case it must pass and one
// it must flag.

var policyStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// policySim is a run with one element (ep/e, created at the start) and a
// policy of 3 attempts, a 1 s base, an 8 s cap, a 100 ms floor and a
// minute's max_age.
func policySim() *Sim {
	s := &Sim{
		p: params{retry: deliver.RetryPolicy{Base: time.Second, Max: 8 * time.Second, Min: 100 * time.Millisecond,
			MaxAttempts: 3, MaxAge: time.Minute}},
		start: policyStart, now: policyStart, policy: newPolicy(), receiver: newReceiver(), deadElem: map[int]bool{},
		kafka: &kafka{parkedFirst: map[int64]time.Time{}},
	}
	s.elements = []*element{{index: 0, event: "ev0", endpoint: "ep", entity: "e", created: policyStart}}
	return s
}

// anAttempt is an attempt of element 0 by gen 1 that breaks no rule.
func anAttempt() attemptSeen {
	return attemptSeen{gen: 1, elem: 0, endpoint: "ep", http: true, inFlight: 1, limit: 1, loaded: true,
		config: endpoint.Endpoint{ID: "ep", Status: endpoint.StatusActive, MaxConcurrency: 1}, exists: true}
}

// flagged returns the violations of the rule ("rule 8:").
func flagged(s *Sim, rule string) []string {
	var out []string
	for _, v := range s.violations {
		if strings.HasPrefix(v, rule) {
			out = append(out, v)
		}
	}
	return out
}

func expectFlags(t *testing.T, s *Sim, rule string, want int) {
	t.Helper()
	if got := flagged(s, rule); len(got) != want {
		t.Fatalf("%s flagged %d times, want %d: %v (all: %v)", rule, len(got), want, got, s.violations)
	}
}

// fail makes the owner of gen hear a 503 for element 0 now.
func (s *Sim) fail(gen int, retryAfter time.Duration) {
	s.attemptHeard(gen, 0, 0, deliver.Result{Err: &deliver.StatusError{Code: http.StatusServiceUnavailable}, RetryAfter: retryAfter})
}

func TestRule8AttemptsPerOwnerUpToMaxAttempts(t *testing.T) {
	s := policySim()
	for range 3 {
		s.attemptStarting(anAttempt())
	}
	expectFlags(t, s, "rule 8:", 0)
	s.attemptStarting(anAttempt())
	expectFlags(t, s, "rule 8:", 1)
}

func TestRule8ANewOwnerStartsFromTheRecordsCount(t *testing.T) {
	s := policySim()
	for range 3 {
		s.attemptStarting(anAttempt())
	}
	// A crash lost the count: the next owner reads the record's 0 and may
	// make three more; one that read 2 (a parked copy's) may make one.
	next := anAttempt()
	next.gen = 2
	for range 3 {
		s.attemptStarting(next)
	}
	expectFlags(t, s, "rule 8:", 0)
	copied := anAttempt()
	copied.gen, copied.recordCount = 3, 2
	s.attemptStarting(copied)
	expectFlags(t, s, "rule 8:", 0)
	s.attemptStarting(copied)
	expectFlags(t, s, "rule 8:", 1)
}

func TestRetryFloor(t *testing.T) {
	p := policySim().p.retry
	for _, c := range []struct {
		n          int
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, 500 * time.Millisecond}, // half of the base
		{3, 0, 2 * time.Second},        // half of 4 s
		{9, 0, 4 * time.Second},        // half of the 8 s cap
		{1, 3 * time.Second, 3 * time.Second},
		{1, time.Hour, 8 * time.Second}, // Retry-After capped at Max
	} {
		if got := retryFloor(p, c.n, c.retryAfter); got != c.want {
			t.Errorf("retryFloor(%d, %v) = %v, want %v", c.n, c.retryAfter, got, c.want)
		}
	}
}

func TestRule9ARetryWaitsForItsBackoff(t *testing.T) {
	s := policySim()
	s.attemptStarting(anAttempt())
	s.fail(1, 0)
	s.now = s.now.Add(500 * time.Millisecond)
	s.attemptStarting(anAttempt()) // exactly the floor after attempt 1
	expectFlags(t, s, "rule 9:", 0)
	s.fail(1, 0)
	s.now = s.now.Add(999 * time.Millisecond) // attempt 2's floor is 1 s
	s.attemptStarting(anAttempt())
	expectFlags(t, s, "rule 9:", 1)
}

func TestRule9RetryAfterRaisesTheFloorAndANewOwnerMayRetryAtOnce(t *testing.T) {
	s := policySim()
	s.attemptStarting(anAttempt())
	s.fail(1, 5*time.Second)
	s.now = s.now.Add(time.Second)
	next := anAttempt()
	next.gen = 2 // a new owner knows nothing of gen 1's failure
	s.attemptStarting(next)
	expectFlags(t, s, "rule 9:", 0)
	s.attemptStarting(anAttempt()) // gen 1 again, 1 s after a Retry-After of 5 s
	expectFlags(t, s, "rule 9:", 1)
}

func TestRule10NothingStartsPastMaxAge(t *testing.T) {
	s := policySim()
	s.now = s.now.Add(time.Minute - time.Millisecond)
	s.attemptStarting(anAttempt())
	expectFlags(t, s, "rule 10:", 0)
	s.now = s.now.Add(time.Millisecond)
	next := anAttempt()
	next.gen = 2
	s.attemptStarting(next)
	expectFlags(t, s, "rule 10:", 1)
}

func TestRule11InFlightWithinTheLimit(t *testing.T) {
	s := policySim()
	a := anAttempt()
	a.inFlight, a.limit = 2, 2
	s.attemptStarting(a)
	expectFlags(t, s, "rule 11:", 0)
	a.gen, a.inFlight = 2, 3
	s.attemptStarting(a)
	expectFlags(t, s, "rule 11:", 1)
}

func TestLimitAllowedKeepsALoweredLimitUntilTheOwnerMaintains(t *testing.T) {
	s := policySim()
	s.noteLimit("ep", 4)
	s.now = s.now.Add(10 * time.Second)
	s.noteLimit("ep", 2)
	if got := s.limitAllowed("ep", policyStart.Add(9*time.Second)); got != 4 {
		t.Fatalf("an owner that last maintained before the change may apply 4, got %d", got)
	}
	if got := s.limitAllowed("ep", policyStart.Add(11*time.Second)); got != 2 {
		t.Fatalf("an owner that maintained after the change has 2, got %d", got)
	}
}

func TestRule12NothingWhileTheBreakerIsOpenButProbes(t *testing.T) {
	s := policySim()
	a := anAttempt()
	a.breaker = breaker.Breaker{State: breaker.Probing}
	s.attemptStarting(a)
	a.http, a.breaker = false, breaker.Breaker{State: breaker.Open} // a feed has no breaker
	s.attemptStarting(a)
	expectFlags(t, s, "rule 12:", 0)
	a.http = true
	s.attemptStarting(a)
	expectFlags(t, s, "rule 12:", 1)
	a.breaker, a.inFlight = breaker.Breaker{State: breaker.Probing}, 2 // a second probe, limit 1
	s.attemptStarting(a)
	expectFlags(t, s, "rule 12:", 2)
}

func TestRule12NoProbeBeforeThePauseEndsNorBeforeTheBreakerIsLoaded(t *testing.T) {
	s := policySim()
	a := anAttempt()
	a.breaker = breaker.Breaker{State: breaker.Probing, PausedUntil: policyStart}
	s.attemptStarting(a) // the pause ended now
	expectFlags(t, s, "rule 12:", 0)
	a.breaker.PausedUntil = policyStart.Add(time.Millisecond)
	s.attemptStarting(a)
	expectFlags(t, s, "rule 12:", 1)
	a.breaker, a.loaded = breaker.Breaker{}, false
	s.attemptStarting(a)
	expectFlags(t, s, "rule 12:", 2)
}

func TestRule12NothingToAPausedDisabledOrDeletedEndpoint(t *testing.T) {
	s := policySim()
	a := anAttempt()
	a.config.Paused = true
	s.attemptStarting(a)
	expectFlags(t, s, "rule 12:", 1)
	a.config.Paused, a.config.Status = false, endpoint.StatusDisabled
	s.attemptStarting(a)
	expectFlags(t, s, "rule 12:", 2)
	a.exists = false
	s.attemptStarting(a)
	expectFlags(t, s, "rule 12:", 3)
}

func TestRule13DuplicatesOnlyWhereAFaultTouched(t *testing.T) {
	s := policySim()
	s.receiver.delivered[0] = 1
	s.checkDuplicates()
	expectFlags(t, s, "rule 13:", 0)
	s.receiver.delivered[0] = 2
	s.checkDuplicates()
	expectFlags(t, s, "rule 13:", 1)
	s.violations = nil
	s.policy.touched[0] = true // a crash before the commit: the replay may send it again
	s.checkDuplicates()
	expectFlags(t, s, "rule 13:", 0)
}

func TestRule13DeadAndDeliveredOnlyWhereAFaultTouched(t *testing.T) {
	s := policySim()
	s.receiver.delivered[0], s.deadElem[0] = 1, true
	s.checkDuplicates()
	expectFlags(t, s, "rule 13:", 1)
	s.violations = nil
	s.policy.touched[0] = true
	s.checkDuplicates()
	expectFlags(t, s, "rule 13:", 0)
}

func TestRule9ANewerStateOfTheEntityWaitsTooUnlessTheFailedOneDied(t *testing.T) {
	s := policySim()
	s.elements = append(s.elements, &element{index: 1, event: "ev1", endpoint: "ep", entity: "e", created: policyStart})
	s.attemptStarting(anAttempt())
	s.fail(1, 0)
	newer := anAttempt()
	newer.elem = 1
	s.now = s.now.Add(100 * time.Millisecond)
	s.attemptStarting(newer) // it replaced element 0, so it inherits the retry time
	expectFlags(t, s, "rule 9:", 1)
	s.deadElem[0] = true // element 0 died instead: its entity is free
	s.attemptStarting(newer)
	expectFlags(t, s, "rule 9:", 1)
}

func TestRule9ANewerStateThatReplacedTheParkedCopyMayStartAtOnce(t *testing.T) {
	s := policySim()
	s.elements = append(s.elements, &element{index: 1, offset: 1, event: "ev1", endpoint: "ep", entity: "e", created: policyStart})
	s.kafka.parkedFirst[0] = policyStart // element 0's lane parked while it was in flight
	s.now = s.now.Add(time.Millisecond)
	s.attemptStarting(anAttempt())
	s.fail(1, 0)
	newer := anAttempt()
	newer.elem = 1
	s.attemptStarting(newer)
	expectFlags(t, s, "rule 9:", 0)
	s.attemptStarting(anAttempt()) // element 0's own retry still waits
	expectFlags(t, s, "rule 9:", 1)
	s.kafka.parkedFirst[0] = s.now // parked only now, after the failure: its retry time goes with it
	s.attemptStarting(newer)
	expectFlags(t, s, "rule 9:", 2)
}

func TestRule14ALapsedMemberRoutesNothing(t *testing.T) {
	s := policySim()
	books := partition.Footprint{Tracked: 3, Tasks: 2, QueuedAppends: 1}
	s.checkFenced(1, books, books)
	expectFlags(t, s, "rule 14:", 0)
	parked := books
	parked.Tracked, parked.QueuedAppends = 5, 3
	s.checkFenced(1, books, parked)
	expectFlags(t, s, "rule 14:", 1)
}
