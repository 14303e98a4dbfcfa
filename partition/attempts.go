package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
)

var (
	breakerZero breaker.Breaker
	breakerOpen = breaker.Open
)

// DeadLetterConcurrency is the lane limit while an undeliverable
// endpoint's backlog turns into dead letters.
const DeadLetterConcurrency = 256

// farFuture makes every retry delay due.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// pump starts every task the lane allows now. Tasks that need no HTTP
// request (an undeliverable endpoint's, a parked copy whose original
// finished) end here and free their entity, so it loops until nothing more
// can start.
func (o *Owner) pump(ls *laneState, now time.Time) {
	if o.holding {
		return // endHold pumps every lane
	}
	for !o.stopped {
		ended := o.startReady(ls, now)
		if ended == 0 {
			break
		}
	}
	if _, ok := ls.lane.NextWakeup(); ok && !o.stopped {
		o.waiting[ls] = struct{}{}
	}
	o.dropIfIdle(ls)
}

// startReady starts what the lane allows and returns how many tasks it
// ended without an attempt.
func (o *Owner) startReady(ls *laneState, now time.Time) (ended int) {
	ep, ok := o.cfg.Endpoints.Get(ls.id)
	deliverable := ok && ep.Status == endpoint.StatusActive
	if mutated("disabled-endpoint-sends") {
		deliverable = ok
	}
	if !deliverable || mutated("dead-letter-concurrency-always") {
		// Its backlog only becomes dead letters: no request goes out, so
		// the endpoint's limit need not slow that down.
		ls.lane.SetMaxConcurrency(DeadLetterConcurrency)
		ls.dying = true
	} else if ls.dying {
		// Re-enabled: without this the lane kept the dead-letter limit
		// until the next Maintain and sent up to 256 requests at once to
		// an endpoint of max_concurrency 1 (rule 11, seeds 6293 and 19987).
		ls.lane.SetMaxConcurrency(ep.MaxConcurrency)
		ls.dying = false
	}
	if deliverable && ((ep.Paused && !mutated("paused-endpoint-sends")) || !ls.breakerLoaded) {
		// A paused endpoint starts nothing; Maintain pumps it again on
		// resume. An unloaded breaker: BreakerWarmed pumps it.
		return 0
	}
	if deliverable && !o.cfg.Lease.Allows(now) && !mutated("lease-not-checked") {
		// Fenced: the group may give the partition away before an attempt
		// started now would end (lease.go). Tick tries again, and a
		// renewed lease lets it start.
		o.slotWaiting[ls] = struct{}{}
		return 0
	}
	due := now
	if !deliverable {
		// Disabled or deleted: every task, retry delays and breaker
		// notwithstanding, goes straight to its dead letter, one per entity
		// at a time so the dead topic keeps order.
		due = farFuture
	}
	for ls.lane.Pending() > 0 && (!deliverable || o.breakerAllows(ls, now)) {
		slot, free := o.takeSlot(ls, deliverable)
		if !free {
			break
		}
		t := ls.lane.Next(due)
		if t == nil {
			o.giveSlot(ls.id, slot)
			break
		}
		w := t.Payload.(*Work)
		switch {
		case o.skipFinishedCopy(ls, t, w):
			ended++
		case !deliverable:
			reason, detail, _ := undeliverableReason(ep, ok)
			o.endDead(ls, t, reason, detail, now)
			ended++
		case o.expired(w.Delivery, now) && !mutated("max-age-not-checked-at-start"):
			// max_age applies whatever the path: a delivery parked or
			// retried past it dies without another attempt.
			o.endDead(ls, t, event.ReasonMaxAge, w.Delivery.LastError, now)
			ended++
		case mutated("max-age-from-enqueue") && o.expiredAt(t.EnqueuedAt, now):
			// The planted bug: max_age from when this owner enqueued it.
			o.endDead(ls, t, event.ReasonMaxAge, w.Delivery.LastError, now)
			ended++
		default:
			o.inFlight++
			ls.running[t] = struct{}{}
			o.cfg.Effects.Send(&Attempt{Delivery: w.Delivery, Endpoint: ep, Now: now, task: t, lane: ls, slot: slot})
			continue
		}
		o.giveSlot(ls.id, slot)
	}
	return ended
}

// takeSlot takes one of the instance's attempt slots for a lane that
// would send (slot reports whether one was taken), and reports false when
// the lane must wait for one: Tick tries it again.
func (o *Owner) takeSlot(ls *laneState, sends bool) (slot, ok bool) {
	if !sends || o.cfg.Slots == nil || ls.lane.InFlight() >= ls.lane.MaxConcurrency() || mutated("slot-cap-ignored") {
		return false, true // the lane's own limit stops it first
	}
	if !o.cfg.Slots.Acquire(ls.id) {
		o.slotWaiting[ls] = struct{}{}
		return false, false
	}
	delete(o.slotWaiting, ls)
	return true, true
}

func (o *Owner) giveSlot(id string, slot bool) {
	if slot {
		o.cfg.Slots.Release(id)
	}
}

// retrySlots pumps the lanes that found no free slot, in a fixed order.
func (o *Owner) retrySlots(now time.Time) {
	if len(o.slotWaiting) == 0 {
		return
	}
	waiting := make([]*laneState, 0, len(o.slotWaiting))
	for ls := range o.slotWaiting {
		waiting = append(waiting, ls)
	}
	slices.SortFunc(waiting, func(a, b *laneState) int { return strings.Compare(a.id, b.id) })
	for _, ls := range waiting {
		delete(o.slotWaiting, ls)
		if o.lanes[ls.id] == ls {
			o.pump(ls, now)
		}
	}
}

// expirePaused dead-letters the entity heads of a paused endpoint's lane
// that are past the retry policy's maximum age: max_age applies whatever
// the endpoint's state, so a long pause never leaves deliveries to the
// parked topic's retention. Nothing else starts.
func (o *Owner) expirePaused(ls *laneState, now time.Time) {
	limit := ls.lane.MaxConcurrency()
	ls.lane.SetMaxConcurrency(ls.lane.InFlight() + ls.lane.Pending()) // look at every head
	var keep []*Task
	for range ls.lane.Pending() {
		t := ls.lane.Next(farFuture)
		if t == nil {
			break
		}
		if d := t.Payload.(*Work).Delivery; o.expired(d, now) {
			o.endDead(ls, t, event.ReasonMaxAge, d.LastError, now)
			continue
		}
		keep = append(keep, t)
	}
	for _, t := range keep {
		ls.lane.Retry(t, t.NotBefore) // back to waiting, as it was
	}
	ls.lane.SetMaxConcurrency(limit)
}

// expired reports whether the delivery is past the retry policy's maximum age.
func (o *Owner) expired(d *event.Delivery, now time.Time) bool {
	if mutated("max-age-from-enqueue") {
		return false
	}
	if mutated("max-age-wrong-clock") {
		return o.expiredAt(d.CreatedAt, now.Add(-o.cfg.Retry.MaxAge/2))
	}
	return o.expiredAt(d.CreatedAt, now)
}

// expiredAt reports whether something created at createdAt is past the
// retry policy's maximum age.
func (o *Owner) expiredAt(createdAt time.Time, now time.Time) bool {
	reason, dead := o.cfg.Retry.Exhausted(0, createdAt, now)
	return dead && reason == event.ReasonMaxAge
}

// breakerAllows asks the endpoint's breaker whether one more attempt may
// start; an open breaker makes the lane wait until its pause ends.
func (o *Owner) breakerAllows(ls *laneState, now time.Time) bool {
	b := o.cfg.Breakers
	if b == nil || o.appendsOnly(ls.id) {
		return true
	}
	at := now
	if mutated("breaker-probes-early") {
		at = now.Add(time.Second)
	}
	d := b.Allow(ls.id, at, ls.lane.MaxConcurrency(), ls.lane.InFlight())
	if mutated("breaker-wait-ignored") && d.Wait > 0 {
		return true
	}
	if !d.Allowed && d.Wait > 0 {
		ls.pausedUntil = now.Add(d.Wait)
		o.waiting[ls] = struct{}{}
	}
	return d.Allowed
}

// appendsOnly reports whether the endpoint's attempts are appends to its
// feed (pull and batch endpoints). Their outcomes say how Kafka is, not
// how the endpoint is: they neither feed nor wait for its breaker, which
// a batch endpoint's runner keeps from its POSTs, and a failing receiver
// never stops its feed from taking the backlog.
func (o *Owner) appendsOnly(id string) bool {
	ep, ok := o.cfg.Endpoints.Get(id)
	return ok && ep.Ordered()
}

// dropIfIdle forgets a lane that holds nothing and is not parked.
func (o *Owner) dropIfIdle(ls *laneState) {
	if ls.lane.Idle() && o.parked[ls.id] == nil && o.lanes[ls.id] == ls {
		delete(o.lanes, ls.id)
		delete(o.waiting, ls)
	}
}

// AttemptDone acts on an attempt's outcome.
func (o *Owner) AttemptDone(a *Attempt, res AttemptResult) {
	ls, t := a.lane, a.task
	o.inFlight--
	if !mutated("slot-not-released") {
		o.giveSlot(ls.id, a.slot)
	}
	delete(ls.running, t)
	now := o.now()
	if res.Invalid != nil {
		o.endDead(ls, t, event.ReasonInvalidDelivery, res.Invalid.Error(), now)
		o.afterAttempt(ls, now)
		return
	}
	outcome := deliver.Classify(res.Err)
	o.cfg.Metrics.Attempt(ls.id, outcome.String(), res.Duration.Seconds())
	if outcome == deliver.Canceled {
		// Abandoned at shutdown: not an attempt, nothing about the
		// endpoint. The task stays unfinished for the next owner.
		ls.lane.Retry(t, now)
		o.afterAttempt(ls, now)
		return
	}
	o.recordAttempt(ls, t, res, now)
	o.logAttempt(t, res, outcome)
	o.settle(ls, t, res, outcome, now)
	o.afterAttempt(ls, now)
}

func (o *Owner) afterAttempt(ls *laneState, now time.Time) {
	if !o.stopped {
		o.pump(ls, now)
		o.refillOf(ls.id, now)
		o.flushOutboxes(now)
	}
}

// recordAttempt counts the attempt on the delivery.
func (o *Owner) recordAttempt(ls *laneState, t *Task, res AttemptResult, now time.Time) {
	d := t.Payload.(*Work).Delivery
	if !mutated("attempt-not-counted") {
		d.Attempts++
	}
	t.Attempts = d.Attempts
	if res.Err != nil {
		d.LastError = res.Err.Error()
		st := o.statsOf(ls.id)
		st.lastError, st.lastErrorAt = d.LastError, now
	}
}

// settle acts on an attempt's classified outcome.
func (o *Owner) settle(ls *laneState, t *Task, res AttemptResult, outcome deliver.Outcome, now time.Time) {
	d := t.Payload.(*Work).Delivery
	o.recordHealth(ls, outcome, now)
	switch outcome {
	case deliver.Delivered:
		if mutated("timeout-counted-delivered") && res.Duration >= time.Second {
			o.retry(ls, t, now.Add(o.cfg.Retry.Delay(d.Attempts, 0, o.cfg.Rand)))
			return
		}
		o.cfg.Metrics.Ended("delivered")
		o.noteOutcome(ls.id, kindDelivered, now)
		o.finishTask(ls, t)
	case deliver.Gone:
		o.disable(ls.id, "endpoint answered 410 Gone")
		o.endDead(ls, t, event.ReasonGone, d.LastError, now)
	case deliver.Dead:
		if mutated("too-large-delivered-again") {
			o.retry(ls, t, now.Add(o.cfg.Retry.Delay(d.Attempts, 0, o.cfg.Rand)))
			return
		}
		o.endDead(ls, t, deadReason(res.Err), d.LastError, now)
	default:
		attempts := d.Attempts
		if mutated("max-attempts-off-by-one") {
			attempts--
		}
		if reason, dead := o.cfg.Retry.Exhausted(attempts, d.CreatedAt, now); dead {
			o.endDead(ls, t, reason, d.LastError, now)
			return
		}
		delay := o.cfg.Retry.Delay(d.Attempts, res.RetryAfter, o.cfg.Rand)
		if mutated("backoff-not-applied") {
			delay = 0
		}
		if mutated("backoff-attempt-off-by-one") {
			delay = o.cfg.Retry.Delay(d.Attempts-1, res.RetryAfter, o.cfg.Rand)
		}
		if mutated("retry-after-ignored") {
			delay = o.cfg.Retry.Delay(d.Attempts, 0, o.cfg.Rand)
		}
		o.noteOutcome(ls.id, kindFailed, now)
		o.retry(ls, t, now.Add(delay))
	}
}

// deadReason names why a Dead outcome ended its delivery: a message that
// cannot be sent (the fault of the delivery itself), or else the
// receiver's 413.
func deadReason(err error) string {
	if _, ok := errors.AsType[*deliver.MessageError](err); ok {
		return event.ReasonInvalidDelivery
	}
	return event.ReasonTooLarge
}

// recordHealth feeds the outcome to the endpoint's breaker and asks for the
// endpoint to be disabled once it has failed for DisableAfter without one
// success. The failed delivery itself retries as usual: it dies as
// endpoint_disabled only once the endpoint's config says so, so a disable
// that could not be written never misclassifies a delivery. A Dead outcome
// (413, or a message that cannot be sent) says nothing about the endpoint's
// health and 410 disables it by itself, so neither counts.
func (o *Owner) recordHealth(ls *laneState, outcome deliver.Outcome, now time.Time) {
	b := o.cfg.Breakers
	if b == nil || (outcome != deliver.Delivered && outcome != deliver.Retry) || o.appendsOnly(ls.id) {
		return
	}
	state := b.Record(ls.id, outcome == deliver.Delivered, now)
	if state.FailingFor(now) >= o.cfg.DisableAfter {
		o.disable(ls.id, fmt.Sprintf("endpoint failing since %s", state.FailingSince.UTC().Format(time.RFC3339)))
	}
}

// finishTask ends an in-flight task for good: its entity's next task may
// start; its offset is done unless a dead letter must land first.
func (o *Owner) finishTask(ls *laneState, t *Task) {
	ls.lane.Finish(t)
	o.release(ls, t)
	o.offsetDone(ls, t)
}

// retry returns the task to its lane to start again at notBefore, unless
// a parked copy of it now carries the delivery (see handOver).
func (o *Owner) retry(ls *laneState, t *Task, notBefore time.Time) {
	if !reintroduceCopyBug && o.handOver(ls, t, notBefore) {
		return
	}
	ls.lane.Retry(t, notBefore)
}

// endDead ends a task as a dead letter. Its entity stays blocked (the task
// keeps its slot) until the dead letter, and after it an end marker in the
// parked partition, are in Kafka: the marker tells an owner that replays
// this delivery after a crash that it ended, so the replay cannot deliver
// it after the entity's next delivery; it is written only once the dead
// letter landed, so a marker never hides a delivery that has none.
func (o *Owner) endDead(ls *laneState, t *Task, reason, detail string, now time.Time) {
	w := t.Payload.(*Work)
	o.noteOutcome(ls.id, kindDead, now)
	// Unfinished until both land: if the lane parks meanwhile, a copy goes
	// to the parked log like any delivery in flight.
	ls.running[t] = struct{}{}
	if mutated("dead-letter-finishes-early") {
		o.finishTask(ls, t)
	}
	o.writeDead(deadLetterOf(w.Delivery, reason, detail, now), func() {
		w.deadLanded = true
		o.appendEndMarker(ls.id, t, func() {
			ls.lane.Finish(t)
			o.release(ls, t)
			o.offsetDone(ls, t)
			if !o.stopped {
				o.pump(ls, o.now())
			}
		})
	})
}

// writeDead queues a dead letter; done runs once it is in Kafka.
func (o *Owner) writeDead(letter event.DeadLetter, done func()) {
	o.deadSeq++
	o.dead.push(&DeadWrite{Letter: letter, done: done, seq: o.deadSeq})
}

// DeadWritten records a dead letter's produce outcome. A failed one is
// written again (in order) until it lands or the partition is given up.
func (o *Owner) DeadWritten(w *DeadWrite, err error) {
	if o.dead.done(w, err) {
		o.log.Error("dead letter write failed; will retry", "endpoint", w.Letter.EndpointID, "err", err)
		return
	}
	o.cfg.Metrics.Dead(w.Letter.Reason)
	w.done()
	if !o.stopped {
		now := o.now()
		o.refillOf(w.Letter.EndpointID, now)
		o.flushOutboxes(now)
	}
}

// superseded finishes a pending task replaced by a newer revision.
func (o *Owner) superseded(ls *laneState, t *Task) {
	o.release(ls, t)
	o.offsetDone(ls, t)
	o.noteOutcome(ls.id, kindSuperseded, o.now())
	o.cfg.Metrics.Superseded(1)
}

// offsetDone marks the task's record finished in whichever log holds it.
func (o *Owner) offsetDone(ls *laneState, t *Task) {
	w := t.Payload.(*Work)
	if !w.parked {
		o.trackerDone(t.Offset)
		return
	}
	if pl := o.parked[ls.id]; pl != nil {
		pl.done(t.Offset)
	}
}

// disable asks the store to disable the endpoint, once at a time.
func (o *Owner) disable(id, why string) {
	switch o.disabling[id] {
	case disableInFlight, disableConfirmed:
		return
	}
	o.disabling[id] = disableInFlight
	o.disableReasons[id] = why
	o.cfg.Effects.Disable(id, why)
}

// DisableDone records the outcome of a disable write. A failed one is
// tried again by Tick; meanwhile the endpoint's deliveries carry on as for
// an active endpoint.
func (o *Owner) DisableDone(id string, err error) {
	why := o.disableReasons[id]
	if err != nil {
		o.log.Error("could not disable endpoint; will retry", "endpoint", id, "err", err)
		o.disabling[id] = disableRetrying
		return
	}
	delete(o.disableReasons, id)
	o.disabling[id] = disableConfirmed
	o.log.Warn("endpoint disabled", "endpoint", id, "reason", why)
}

// disableRetryInterval spaces the retries of a disable write that fails.
const disableRetryInterval = 5 * time.Second

func (o *Owner) retryDisables(now time.Time) {
	if now.Before(o.disableRetryAt) {
		return
	}
	o.disableRetryAt = now.Add(disableRetryInterval)
	for _, id := range sortedKeys(o.disabling) {
		if o.disabling[id] == disableRetrying {
			o.disabling[id] = disableInFlight
			o.cfg.Effects.Disable(id, o.disableReasons[id])
		}
	}
}

func (o *Owner) logAttempt(t *Task, res AttemptResult, outcome deliver.Outcome) {
	if res.Err == nil && !o.log.Enabled(context.Background(), slog.LevelDebug) {
		return // a success is logged at debug only: build nothing for it
	}
	d := t.Payload.(*Work).Delivery
	attrs := []any{
		"endpoint", d.EndpointID, "event", d.EventID, "entity", d.Entity, "revision", d.Revision,
		"attempt", d.Attempts, "status", res.StatusCode, "outcome", outcome.String(),
		"duration_ms", res.Duration.Milliseconds(),
	}
	if res.Err != nil {
		o.log.Info("delivery attempt failed", append(attrs, "err", res.Err.Error())...)
		return
	}
	o.log.Debug("delivery attempt", attrs...)
}
