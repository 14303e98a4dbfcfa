package partition

import (
	"slices"
	"strings"
	"time"

	"github.com/laneway/laneway/internal/model/endpoint"
)

// What time and live config changes do to the owner: Tick (retry delays,
// breaker pauses, the replay hold) and Maintain (config changes, parking).

// Tick does what time brings: lanes whose retry delay or breaker pause
// has passed start again, live config changes apply, lanes that cannot
// keep up park, parked lanes refill, failed produces are retried. The
// driver calls it often (every few milliseconds).
func (o *Owner) Tick() {
	if o.stopped {
		return
	}
	now := o.now()
	if o.holding && o.discovered && !now.Before(o.holdUntil) {
		o.endHold(now)
	}
	o.wake(now)
	o.retrySlots(now)
	o.retryDisables(now)
	o.flushOutboxes(now)
	o.refillParked()
	o.releaseEarly()
}

// Maintain applies live endpoint config changes (a raised max_concurrency
// starts waiting work without waiting for a completion) and parks every
// lane that cannot keep up. The driver calls it about once a second, before
// it commits.
func (o *Owner) Maintain() {
	if o.stopped {
		return
	}
	now := o.now()
	if !o.cfg.Lease.Held(now) {
		return // parks nothing while the next owner may be taking over
	}
	for _, id := range sortedKeys(o.lanes) {
		o.maintainLane(o.lanes[id], now)
	}
	o.refillParked()
	o.flushOutboxes(now)
}

func (o *Owner) maintainLane(ls *laneState, now time.Time) {
	ep, ok := o.cfg.Endpoints.Get(ls.id)
	if !ok || ep.Status != endpoint.StatusActive {
		if b := o.cfg.Breakers; b != nil && b.Get(ls.id) != (breakerZero) {
			b.Reset(ls.id) // re-enabled, it starts with a clean record
		}
		if ls.lane.Pending() > 0 {
			o.pump(ls, now) // dead-letters the lane's backlog
		}
		return
	}
	if ep.Status == endpoint.StatusActive && o.disabling[ls.id] == disableConfirmed {
		delete(o.disabling, ls.id) // re-enabled since
	}
	if !mutated("limit-change-ignored") {
		ls.lane.SetMaxConcurrency(ep.MaxConcurrency)
	}
	if ep.Paused {
		o.expirePaused(ls, now)
	}
	if o.parked[ls.id] == nil && !o.holding { // the replay hold keeps lanes whole
		if why := o.parkReason(ls, ep, now); why != "" {
			o.park(ls, why)
			return
		}
	}
	if ls.lane.Pending() > 0 {
		o.pump(ls, now)
	}
}

func (o *Owner) parkReason(ls *laneState, ep endpoint.Endpoint, now time.Time) string {
	switch {
	case ep.Paused:
		return "paused"
	case o.cfg.Breakers != nil && o.cfg.Breakers.Get(ls.id).State == breakerOpen:
		return "breaker"
	case ls.lane.Pending() == 0:
		return ""
	}
	if why := o.overBuffer(ls); why != "" {
		return why
	}
	if oldest, ok := ls.lane.OldestEnqueuedAt(); ok && now.Sub(oldest) > o.cfg.ParkAfter {
		return "park_after"
	}
	return ""
}

// wake restarts lanes whose retry delay or breaker pause has passed.
func (o *Owner) wake(now time.Time) {
	waiting := make([]*laneState, 0, len(o.waiting))
	for ls := range o.waiting {
		waiting = append(waiting, ls)
	}
	slices.SortFunc(waiting, func(a, b *laneState) int { return strings.Compare(a.id, b.id) })
	for _, ls := range waiting {
		if now.Before(ls.pausedUntil) {
			continue // the breaker is open
		}
		at, ok := ls.lane.NextWakeup()
		if !ls.pausedUntil.IsZero() || (ok && !at.After(now)) {
			ls.pausedUntil = time.Time{}
			delete(o.waiting, ls)
			o.pump(ls, now)
		} else if !ok {
			delete(o.waiting, ls)
		}
	}
}
