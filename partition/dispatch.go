package partition

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
)

// Incoming is one deliveries record, decoded by the driver (outside its
// lock, so attempts finishing meanwhile do not wait on JSON work).
type Incoming struct {
	Record   *kgo.Record
	Delivery *event.Delivery // nil when Err is set
	Err      error           // the value is not a valid delivery
}

// Dispatch hands freshly fetched records of the partition to their lanes.
//
// The whole batch is routed before any lane starts work, so that a state
// update is replaced by a newer revision of the same entity in the same
// batch instead of starting first. That matters most on a replay after a
// crash or a lost partition: the backlog since the watermark arrives at
// once, and a revision that was superseded before the crash must not be
// delivered after its successors.
func (o *Owner) Dispatch(records []Incoming, highWatermark int64) {
	if o.stopped || !o.discovered || (!o.cfg.Lease.Held(o.now()) && !mutated("dispatch-lease-not-checked")) {
		// Before the scan, or while the lease lapsed (a member that may
		// have lost the partition parks nothing beside the next owner),
		// the records wait; Backpressured stops the fetching meanwhile.
		if !o.stopped {
			o.early = append(o.early, earlyBatch{records, highWatermark})
		}
		return
	}
	now := o.now()
	o.highWatermark = highWatermark
	var touched []*laneState // in first-touch order: the owner is deterministic
	seen := map[*laneState]bool{}
	for i := range records {
		in := &records[i]
		if o.tracker == nil {
			o.tracker = NewTracker(in.Record.Offset)
		}
		if !o.tracker.Add(in.Record.Offset, now) {
			continue // below what this owner already tracks: a duplicate fetch
		}
		if ls := o.route(in, now); ls != nil && !seen[ls] {
			seen[ls] = true
			touched = append(touched, ls)
		}
	}
	if o.holding && o.tracker != nil && (o.tracker.next >= o.replayEnd || o.tracker.Outstanding() >= o.cfg.ReplayHoldRecords) {
		o.endHold(now) // routed to the end, or as much as the hold may keep
		return
	}
	for _, ls := range touched {
		if o.lanes[ls.id] == ls && o.parked[ls.id] == nil {
			o.pump(ls, now)
		}
	}
	o.flushOutboxes(now)
}

// route sends a record to its lane, to the parked log when the endpoint is
// parked, or to its dead letter when it cannot be delivered at all. It
// returns the lane to pump, if any.
func (o *Owner) route(in *Incoming, now time.Time) *laneState {
	r := in.Record
	offset := r.Offset
	if _, ok := o.alreadyParked[offset]; ok {
		delete(o.alreadyParked, offset) // replayed after a restart: already in the parked log
		o.tracker.Done(offset)
		return nil
	}
	if in.Err != nil {
		dl := event.UnreadableRecord(event.ReasonInvalidDelivery, r.Topic, r.Partition, r.Offset, r.Value, string(r.Key), in.Err, now)
		o.writeDead(dl, func() { o.trackerDone(offset) })
		return nil
	}
	d := in.Delivery
	if o.finishedBeforeParking(d, offset) && !mutated("replay-ignores-parked-up-to") {
		o.tracker.Done(offset)
		return nil
	}
	ep, ok := o.cfg.Endpoints.Get(d.EndpointID)
	if reason, detail, undeliverable := undeliverableReason(ep, ok); undeliverable && !o.holdsWork(d.EndpointID) {
		o.writeDead(deadLetterOf(d, reason, detail, now), func() { o.trackerDone(offset) })
		o.noteOutcome(d.EndpointID, kindDead, now)
		return nil
	}
	// An undeliverable endpoint that still holds work takes the lane's
	// path below: its earlier deliveries die first, so the dead topic keeps
	// each entity's order for redrive.
	if pl, ok := o.parked[d.EndpointID]; ok && !o.holding {
		o.enqueueAppend(pl, d, offset)
		return nil
	}
	ls := o.lane(d.EndpointID, ep.MaxConcurrency)
	t := &Task{
		Offset: offset, Partition: r.Partition, Size: sizeOf(r.Value), Entity: d.Entity, Revision: d.Revision,
		Coalesce: d.Coalesce, NotBefore: d.NotBefore, EnqueuedAt: now, Attempts: d.Attempts,
		Payload: &Work{Delivery: d, src: -1},
	}
	for _, old := range ls.lane.Push(t) {
		o.superseded(ls, old)
	}
	if why := o.overBuffer(ls); why != "" && !o.holding {
		o.park(ls, why)
		return nil
	}
	return ls
}

// overBuffer names the buffer limit a lane passed, or "".
func (o *Owner) overBuffer(ls *laneState) string {
	switch {
	case ls.lane.Pending() > o.cfg.LaneBuffer:
		return "lane_buffer"
	case ls.lane.Bytes() > o.cfg.LaneBytes && ls.lane.Pending() > 0:
		return "lane_bytes"
	}
	return ""
}

// sizeOf is a record value's size as a Task counts it.
func sizeOf(value []byte) int32 { return int32(min(len(value), math.MaxInt32)) }

func (o *Owner) trackerDone(offset int64) {
	if o.tracker != nil {
		o.tracker.Done(offset)
	}
}

// holdsWork reports whether the endpoint has a lane or a parked backlog.
func (o *Owner) holdsWork(id string) bool {
	_, laned := o.lanes[id]
	_, parked := o.parked[id]
	return laned || parked
}

// undeliverableReason says why deliveries to ep must end as dead letters.
func undeliverableReason(ep endpoint.Endpoint, exists bool) (reason, detail string, undeliverable bool) {
	switch {
	case !exists:
		return event.ReasonEndpointDeleted, "the endpoint no longer exists", true
	case ep.Status != endpoint.StatusActive:
		return event.ReasonEndpointDisabled, ep.DisabledReason, true
	}
	return "", "", false
}

func deadLetterOf(d *event.Delivery, reason, detail string, now time.Time) event.DeadLetter {
	return event.DeadLetter{
		ID: d.EventID + ":" + d.EndpointID, Reason: reason, Detail: detail, DeadAt: now.UTC(),
		EndpointID: d.EndpointID, Delivery: d,
	}
}
