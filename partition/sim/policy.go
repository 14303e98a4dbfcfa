package sim

import (
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/partition"
)

// The delivery policy's rules (issue #26). Rules 1–7 say nothing about
// how often, how soon, how late or how many at once attempts go out, so a
// planted bug that retried too soon or too often ran green while the
// traces showed it. Checked as each attempt starts (instance.Send) and at
// the end of the run:
//
//  8. attempts: one owner (generation) makes at most MaxAttempts attempts
//     of an element, counting from the Attempts its delivery record
//     carried when that owner first sent it. A crash, revoke or loss
//     loses the count of the attempts made since the record was written
//     (the deliveries log keeps the published count; a parked copy the
//     count at copy time), so the next owner starts again from the
//     record's count: across owners an element may get up to MaxAttempts
//     per owner that sent it, never more within one;
//  9. backoff: within one owner, the gap between the owner hearing a
//     retryable failure of attempt n of an element and the next attempt of
//     its (endpoint, entity) is at least the least delay the policy allows
//     (retryFloor): a newer state that replaced the waiting one inherits
//     its retry time (Lane.Push), so a receiver that keeps rejecting an
//     entity is not sent its updates at the rate they are published. The
//     failed element's own end (a dead letter) frees the entity. One
//     exception, narrowed to it: a failed element that has a parked copy
//     (its lane parked while it was in flight) hands over to the copy, and
//     when a newer state read back had already replaced the copy (which
//     had landed before the failure), that state carries the entity on at
//     once, without the retry time (seed 305 of the first 20,000). A new owner
//     does not know when the previous one's last attempt failed (the
//     NotBefore of a delivery that failed after it was written is lost
//     with the owner), so it may retry at once: only a change of owner
//     shortens a backoff;
//  10. max_age: no attempt starts MaxAge or more after the delivery's
//     CreatedAt (the element's publish time, or its redrive's);
//  11. concurrency: the attempts of one endpoint in flight from one owner
//     never pass the max_concurrency in force (limitAllowed: a lowered
//     limit lets the attempts already out finish, and no new one starts
//     while in flight reaches the new limit, once the owner applied it; an
//     owner applies config on its Maintain, so a change since its last
//     Maintain may be unseen, and one that reached it configLag late
//     from when it was made). Undeliverable endpoints' lanes run at
//     DeadLetterConcurrency but send nothing, so they never meet this
//     rule. Across owners, only the lost partition's window (rule 2's
//     allowance) lets two owners' attempts overlap, so the rule is kept
//     per owner;
//  12. breaker and status: no attempt of an HTTP endpoint starts while
//     the breaker the owner keeps for it (the instance's cache over
//     "Redis") is open or its pause has not ended, nor before the owner
//     loaded that breaker from "Redis" (a new owner would otherwise send a
//     burst into an endpoint the previous one paused); after the pause,
//     at most max_concurrency probes are in flight. No attempt starts to an endpoint that is paused,
//     disabled or deleted in the config the owner can know (it reads the
//     store as it starts each attempt; the store reaches it configLag
//     late in a share of the seeds);
//  13. duplicates: an element delivered twice, or both dead-lettered and
//     delivered, only where a fault touched it (touched): a redrive
//     publishes a new element, so it never explains one element's two
//     ends;
//  14. fence: a member whose lease lapsed (it may have lost the
//     partition) takes nothing it fetches into its books: a Dispatch then
//     tracks no offset and queues no task, parked append or dead letter.
//     Epochs make such a member's late parked appends stale for the next
//     owner, so without this rule a member that parked beside the next
//     owner went unseen (the mutant dispatch-lease-not-checked).

// policy is what the rules 8–13 keep between attempts.
type policy struct {
	// firstCount is the Attempts the record carried when the owner first
	// sent the element, sent the attempts the owner made since.
	firstCount, sent map[genElem]int
	// failed is the last retryable failure each owner heard per stream.
	failed map[genStream]heardFailure
	// limits is each endpoint's max_concurrency history.
	limits map[string][]limitAt
	// touched are the elements a fault may have made an owner redo.
	touched map[int]bool
}

type genElem struct{ gen, elem int }

type genStream struct {
	gen int
	key streamKey
}

// heardFailure is a retryable failure as the owner heard it.
type heardFailure struct {
	elem       int
	at         time.Time
	attempt    int // the attempt's number: the record's count, plus the owner's
	retryAfter time.Duration
}

type limitAt struct {
	at    time.Time
	limit int
}

func newPolicy() policy {
	return policy{firstCount: map[genElem]int{}, sent: map[genElem]int{}, failed: map[genStream]heardFailure{},
		limits: map[string][]limitAt{}, touched: map[int]bool{}}
}

// attemptSeen is one attempt as it starts, what rules 8–12 judge.
type attemptSeen struct {
	gen, elem   int
	endpoint    string
	http        bool // an HTTP endpoint (pull and batch feeds have no breaker)
	recordCount int  // the Attempts its delivery carried
	inFlight    int  // the endpoint's attempts in flight from this owner, this one included
	limit       int  // the highest max_concurrency the owner may apply now (limitAllowed)
	breaker     breaker.Breaker
	loaded      bool              // the owner loaded the breaker from "Redis" (or reset it)
	config      endpoint.Endpoint // the endpoint's config now
	exists      bool              // the endpoint exists
}

// attemptStarting checks rules 8–12 for an attempt starting now.
func (s *Sim) attemptStarting(a attemptSeen) {
	k := genElem{a.gen, a.elem}
	if _, ok := s.policy.sent[k]; !ok {
		s.policy.firstCount[k] = a.recordCount
	}
	s.policy.sent[k]++
	n := s.policy.firstCount[k] + s.policy.sent[k]
	e := s.elements[a.elem]
	if n > s.p.retry.MaxAttempts {
		s.violate("rule 8: attempt %d of element %d (gen %d), beyond max_attempts %d", n, a.elem, a.gen, s.p.retry.MaxAttempts)
	}
	if f, ok := s.policy.failed[genStream{a.gen, streamKey{e.endpoint, e.entity}}]; ok && s.retryBinds(f, a.elem) {
		if floor := retryFloor(s.p.retry, f.attempt, f.retryAfter); s.now.Sub(f.at) < floor {
			s.violate("rule 9: element %d retried %v after attempt %d failed (gen %d), sooner than the backoff's %v",
				a.elem, s.now.Sub(f.at), f.attempt, a.gen, floor)
		}
	}
	if age := s.now.Sub(e.created); age >= s.p.retry.MaxAge {
		s.violate("rule 10: attempt of element %d (gen %d) at age %v, past max_age %v", a.elem, a.gen, age, s.p.retry.MaxAge)
	}
	if a.inFlight > a.limit {
		s.violate("rule 11: %d attempts of %s in flight from gen %d, above its max_concurrency %d", a.inFlight, a.endpoint, a.gen, a.limit)
	}
	s.checkBreaker(a)
	s.checkStatus(a)
}

// checkStatus is rule 12's second half: nothing to an endpoint that may
// not receive.
func (s *Sim) checkStatus(a attemptSeen) {
	switch {
	case !a.exists:
		s.violate("rule 12: an attempt of element %d to %s, which was deleted", a.elem, a.endpoint)
	case a.config.Status != endpoint.StatusActive:
		s.violate("rule 12: an attempt of element %d to %s, which is %s", a.elem, a.endpoint, a.config.Status)
	case a.config.Paused:
		s.violate("rule 12: an attempt of element %d to %s, which is paused", a.elem, a.endpoint)
	}
}

// checkBreaker is rule 12. Allow has already moved an open breaker whose
// pause ended to probing, so an open one here means the owner did not ask.
func (s *Sim) checkBreaker(a attemptSeen) {
	if !a.http {
		return
	}
	if !a.loaded {
		s.violate("rule 12: an attempt of element %d to %s before the owner loaded its breaker from Redis", a.elem, a.endpoint)
	}
	if a.breaker.State != breaker.Closed && a.breaker.State != "" && s.now.Before(a.breaker.PausedUntil) {
		s.violate("rule 12: an attempt of element %d to %s during its breaker's pause (until %.3fs)",
			a.elem, a.endpoint, a.breaker.PausedUntil.Sub(s.start).Seconds())
		return
	}
	switch a.breaker.State {
	case breaker.Open:
		s.violate("rule 12: an attempt of element %d to %s while its breaker is open (until %.3fs)",
			a.elem, a.endpoint, a.breaker.PausedUntil.Sub(s.start).Seconds())
	case breaker.Probing:
		if a.inFlight > a.limit {
			s.violate("rule 12: %d probes of %s in flight, above its max_concurrency %d", a.inFlight, a.endpoint, a.limit)
		}
	}
}

// retryBinds reports whether the failure f still holds back the attempt of
// elem (rule 9): its own retry, or a newer element's, unless the failed one
// died or handed over to a parked copy that a newer one may have replaced
// before the failure: a copy that had landed by then. A record parked
// after the failure carries its retry time, and so must what replaces it
// (the mutant staged-coalesce-drops-retry-time).
func (s *Sim) retryBinds(f heardFailure, elem int) bool {
	if f.elem == elem {
		return true
	}
	landed, ok := s.kafka.parkedFirst[s.elements[f.elem].offset]
	return !s.deadElem[f.elem] && !(ok && landed.Before(f.at))
}

// attemptHeard keeps a retryable failure the owner of gen heard now, for
// rule 9. attempt is the failed attempt's number (record count + 1 at send).
func (s *Sim) attemptHeard(gen, elem, attempt int, res deliver.Result) {
	e := s.elements[elem]
	k := genStream{gen, streamKey{e.endpoint, e.entity}}
	if deliver.Classify(res.Err) != deliver.Retry {
		delete(s.policy.failed, k)
		return
	}
	n := s.policy.firstCount[genElem{gen, elem}] + s.policy.sent[genElem{gen, elem}]
	s.policy.failed[k] = heardFailure{elem: elem, at: s.now, attempt: max(n, attempt), retryAfter: res.RetryAfter}
}

// retryFloor is the least delay RetryPolicy.Delay returns after attempt n
// failed: half of the backoff d = min(Max, Base·2^(n−1)) (the other half is
// random), at least Min, and at least a Retry-After the receiver gave,
// capped at Max.
func retryFloor(p deliver.RetryPolicy, n int, retryAfter time.Duration) time.Duration {
	d := min(p.Base, p.Max)
	for i := 1; i < n && d < p.Max; i++ {
		d = min(2*d, p.Max)
	}
	return max(d/2, p.Min, min(retryAfter, p.Max))
}

// noteLimit records an endpoint's max_concurrency from now on.
func (s *Sim) noteLimit(id string, limit int) {
	h := s.policy.limits[id]
	if len(h) > 0 && h[len(h)-1].limit == limit {
		return
	}
	s.policy.limits[id] = append(h, limitAt{s.now, limit})
}

// limitAllowed is the highest max_concurrency of the endpoint in force at
// any time since seenAt (the owner's last Maintain): what the owner may
// still apply.
func (s *Sim) limitAllowed(id string, seenAt time.Time) int {
	most := 0
	h := s.policy.limits[id]
	for i, l := range h {
		if i+1 < len(h) && !h[i+1].at.After(seenAt) {
			continue // replaced before seenAt
		}
		most = max(most, l.limit)
	}
	return most
}

// touchAtAssignment marks what a new owner may redo: every element at or
// above the deliveries commit, and every element whose parked record the
// committed parked progress still reads.
func (s *Sim) touchAtAssignment() {
	k := s.kafka
	for o := k.deliveriesCommit; o < int64(len(k.deliveries)); o++ {
		if e := s.byOffset[o]; e != nil {
			s.policy.touched[e.index] = true
		}
	}
	for o := range s.parkedSources(k.parkedProgress) {
		if e := s.byOffset[o]; e != nil {
			s.policy.touched[e.index] = true
		}
	}
}

// checkDuplicates is rule 13, at the end of the run.
func (s *Sim) checkDuplicates() {
	for _, e := range s.elements {
		if s.policy.touched[e.index] {
			continue
		}
		if n := s.receiver.delivered[e.index]; n > 1 {
			s.violate("rule 13: element %d (%s %s/%s rev %d) delivered %d times, no fault touched it",
				e.index, e.event, e.endpoint, e.entity, e.revision, n)
		}
		if s.deadElem[e.index] && s.receiver.delivered[e.index] > 0 {
			s.violate("rule 13: element %d (%s %s/%s rev %d) both delivered and dead-lettered, no fault touched it",
				e.index, e.event, e.endpoint, e.entity, e.revision)
		}
	}
}

// checkFenced is rule 14 for a Dispatch made while the lease had lapsed:
// the owner's books before and after it must be the same.
func (s *Sim) checkFenced(gen int, before, after partition.Footprint) {
	if before.Tracked != after.Tracked || before.Tasks != after.Tasks ||
		before.QueuedAppends != after.QueuedAppends || before.QueuedDeadLetters != after.QueuedDeadLetters {
		s.violate("rule 14: gen %d routed fetched records while its lease had lapsed (tracked %d→%d, tasks %d→%d, appends %d→%d, dead letters %d→%d)",
			gen, before.Tracked, after.Tracked, before.Tasks, after.Tasks, before.QueuedAppends, after.QueuedAppends,
			before.QueuedDeadLetters, after.QueuedDeadLetters)
	}
}
