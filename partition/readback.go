package partition

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/coalesce"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
)

// Reading a parked lane back: when to read, what a read loads into the
// window, staging behind the lookahead, and records that die unread.

// refillParked reads back every parked lane that has room and more to
// read, and unparks the drained ones.
func (o *Owner) refillParked() {
	if o.stopped || !o.discovered {
		return
	}
	now := o.now()
	for _, id := range sortedKeys(o.parked) {
		o.refillLane(o.parked[id], now)
	}
}

// refillOf refills the endpoint's parked lane, if it has one.
func (o *Owner) refillOf(id string, now time.Time) {
	if pl := o.parked[id]; pl != nil {
		o.refillLane(pl, now)
	}
}

// refillLane reads back a parked lane if it has room and more to read, or
// unparks it once it is drained.
func (o *Owner) refillLane(pl *parkedLane, now time.Time) {
	if o.stopped || !o.discovered || o.holding || o.parked[pl.id] != pl {
		return
	}
	if ls := o.lanes[pl.id]; ls != nil {
		if o.promoteReady(pl, ls, pl.readToEnd()) {
			o.pump(ls, now)
		}
	}
	if pl.readToEnd() {
		// Nothing of the endpoint lies between: a caught-up lane follows
		// the end, so that retention never passes its cursor for nothing.
		pl.cursor = max(pl.cursor, o.parkedEnd)
	}
	switch {
	case pl.reading:
	case pl.cursor <= pl.last && o.wantsRead(pl, now):
		pl.reading = true
		o.reads++
		o.cfg.Effects.Read(&Read{From: pl.cursor, lane: pl})
	case pl.drained():
		o.unpark(pl)
	}
}

// wantsRead reports whether a parked lane should read now: it has room and
// its endpoint takes deliveries (a paused endpoint's backlog waits in
// Kafka; a disabled or deleted one's drains to dead letters), or its oldest
// unread record is past the retry policy's maximum age, which is read to
// become a dead letter whatever the window and the endpoint's state, so
// that nothing waits until retention deletes it.
func (o *Owner) wantsRead(pl *parkedLane, now time.Time) bool {
	ep, ok := o.cfg.Endpoints.Get(pl.id)
	paused := ok && ep.Status == endpoint.StatusActive && ep.Paused
	if !paused && o.hasRoom(pl) {
		return true
	}
	return pl.backlog > 0 && o.expiredAt(pl.oldestBacklog, now) && !o.windowFull(pl, 2)
}

// hasRoom reports whether a parked lane should read more: its window is at
// least half empty, so that one read loads many records. Staged records
// (at most the lookahead, a quarter of the window) never keep it from
// reading; deliveries that do not finish (retrying, in flight) can, and the
// lane's other entities then wait until they do: the window is bounded.
func (o *Owner) hasRoom(pl *parkedLane) bool {
	return o.cfg.ParkedWindow-len(pl.unfinished) >= o.cfg.ParkedWindow/2 && pl.windowBytes() <= o.cfg.ParkedWindowBytes/2
}

// lookahead is how many later records of its endpoint a parked record
// waits for before it may start.
func (o *Owner) lookahead() int64 { return int64(max(1, o.cfg.ParkedWindow/4)) }

// ReadDone takes a parked read's records.
func (o *Owner) ReadDone(r *Read, res ReadResult, err error) {
	o.reads--
	if r.lane == nil {
		o.scanDone(r, res, err)
		return
	}
	pl := r.lane
	pl.reading = false
	if o.stopped || o.parked[pl.id] != pl || pl.cursor != r.From {
		return
	}
	switch {
	case res.OutOfRange:
		o.parkedExpired(pl, res.LogStart)
	case err != nil:
		o.log.Warn("reading parked records failed; will retry", "endpoint", pl.id, "err", err)
		return
	default:
		o.load(pl, res)
	}
	o.log.Debug("parked read", "endpoint", pl.id, "from", r.From, "records", len(res.Records), "next", res.Next,
		"cursor", pl.cursor, "last", pl.last, "unfinished", len(pl.unfinished), "staged", len(pl.staged), "in_lane", pl.inLane)
	now := o.now()
	if ls := o.lanes[pl.id]; ls != nil {
		o.pump(ls, now)
		if ep, ok := o.cfg.Endpoints.Get(pl.id); ok && ep.Paused {
			o.promoteReady(pl, ls, pl.readToEnd())
			o.expirePaused(ls, now)
		}
	}
	o.refillLane(pl, now)
	o.flushOutboxes(now)
}

// parkedExpired moves a lane past records that retention deleted before
// they were read back: they are lost, and counted and logged as such.
func (o *Owner) parkedExpired(pl *parkedLane, logStart int64) {
	if logStart <= pl.cursor {
		return
	}
	o.log.Error("parked records expired before delivery (retention)", "endpoint", pl.id,
		"from", pl.cursor, "to", logStart)
	o.cfg.Metrics.ParkedExpired(int(logStart - pl.cursor))
	pl.cursor = logStart
}

// load turns the lane's records of one read into lane tasks until its
// window is full.
func (o *Owner) load(pl *parkedLane, res ReadResult) {
	ls := o.lane(pl.id, o.maxConcurrencyOf(pl.id))
	now := o.now()
	for _, r := range res.Records {
		if _, marker := endMarker(r); marker || string(r.Key) != pl.id {
			pl.cursor = r.Offset + 1
			continue
		}
		if o.skipStale(r) {
			pl.cursor = r.Offset + 1
			continue
		}
		d, err := event.ParseDelivery(r.Value)
		full := o.windowFull(pl, 1)
		switch {
		case err == nil && full && o.expiredAt(d.CreatedAt, now) && !o.windowFull(pl, 2):
			o.dieUnread(pl, ls, r, &d, now)
		case full:
			if err == nil {
				pl.oldestBacklog = d.CreatedAt // the oldest unread, near enough
			}
			return
		default:
			o.loadRecord(pl, ls, r, &d, err)
			// Promoted record by record, so that coalescing never reaches
			// further than the lookahead, whatever the reads' sizes.
			o.promoteReady(pl, ls, false)
		}
		pl.cursor = r.Offset + 1
	}
	if len(res.Records) == 0 && res.Next > pl.cursor {
		pl.cursor = res.Next // only markers or aborted batches there
	}
}

// dieUnread dead-letters a parked record past the maximum age beyond the
// window (up to twice its size, dead letters not yet written included): when
// the window is full of deliveries that wait
// (a paused endpoint, a slow or failing one), the backlog behind it still
// ends as dead letters before retention deletes it. Its entity may still
// have earlier deliveries in the window: the dead topic then holds this one
// first, and a redrive replays it first.
//
// It still takes part in coalescing, as a placeholder staged in its place
// (never started): an owner that read it before it was too old staged it,
// and what that owner superseded with it (an older state read back after
// it, within the lookahead) must stay superseded for an owner that reads it
// too late; and its entity's staged record and the next one must not
// coalesce across it.
func (o *Owner) dieUnread(pl *parkedLane, ls *laneState, r *kgo.Record, d *event.Delivery, now time.Time) {
	pl.backlog = max(0, pl.backlog-1)
	pl.loadedSeq++
	src := SrcOffset(r)
	if cs := pl.copies[src]; cs != nil && cs.done {
		delete(pl.copies, src)
		return
	}
	o.stage(pl, ls, &Task{Offset: r.Offset, Partition: o.cfg.Partition, Entity: d.Entity, Revision: d.Revision, Coalesce: d.Coalesce,
		Payload: &Work{Delivery: d, parked: true, src: src, seq: pl.loadedSeq, unread: true}})
	if _, ended := o.endedSrc[src]; ended {
		return
	}
	pl.hold(r.Offset, sizeOf(r.Value))
	t := &Task{Offset: r.Offset, Partition: o.cfg.Partition, Entity: d.Entity, Revision: d.Revision,
		Payload: &Work{Delivery: d, parked: true, src: src}}
	o.noteOutcome(pl.id, kindDead, now)
	o.writeDead(deadLetterOf(d, event.ReasonMaxAge, d.LastError, now), func() {
		o.appendEndMarker(pl.id, t, func() { pl.done(t.Offset) })
	})
}

func (o *Owner) maxConcurrencyOf(id string) int {
	ep, ok := o.cfg.Endpoints.Get(id)
	if !ok {
		return endpoint.DefaultMaxConcurrency
	}
	return ep.MaxConcurrency
}

// loadRecord turns one parked record into a lane task, unless it is
// superseded, a copy whose original already finished, or past the retry
// policy's limits (then it dies at once, if its entity has nothing before
// it in the lane).
func (o *Owner) loadRecord(pl *parkedLane, ls *laneState, r *kgo.Record, dp *event.Delivery, err error) {
	pl.backlog = max(0, pl.backlog-1)
	// Every record of the endpoint counts, skipped or not, so that the
	// lookahead spans the same records for every owner that reads them.
	pl.loadedSeq++
	d := *dp
	if mutated("readback-attempts-reset") {
		d.Attempts = 0
	}
	if err != nil {
		o.log.Error("unreadable parked record skipped", "offset", r.Offset, "err", err)
		return
	}
	src := SrcOffset(r)
	cs := pl.copies[src]
	switch {
	case cs != nil && cs.done:
		delete(pl.copies, src)
		return
	}
	pl.hold(r.Offset, sizeOf(r.Value))
	_, ended := o.endedSrc[src]
	t := &Task{
		Offset: r.Offset, Partition: o.cfg.Partition, Size: sizeOf(r.Value), Entity: d.Entity, Revision: d.Revision, Coalesce: d.Coalesce,
		NotBefore: d.NotBefore, EnqueuedAt: d.CreatedAt, Attempts: d.Attempts,
		Payload: &Work{Delivery: &d, parked: true, src: src, ended: ended},
	}
	if cs != nil {
		if cs.handedOver {
			carryOver(t, cs)
			delete(pl.copies, src)
		} else {
			cs.task = t
		}
	}
	pl.inLane++
	t.Payload.(*Work).seq = pl.loadedSeq
	o.log.Debug("parked record read back", "endpoint", pl.id, "offset", r.Offset, "event", d.EventID,
		"entity", d.Entity, "revision", d.Revision, "src", src, "seq", pl.loadedSeq, "ended", ended, "copy", cs != nil)
	o.stage(pl, ls, t)
}

// stage queues a record read back until it may start, coalescing it with
// its entity's last staged record (the lane's rule, within the lookahead).
//
// A placeholder of a record that died unread (Work.unread) coalesces like
// the record it stands for, but is never superseded itself (it is not in
// the lane: its dead letter finishes it) and never starts.
func (o *Owner) stage(pl *parkedLane, ls *laneState, t *Task) {
	if prev := pl.stagedLast[t.Entity]; prev != nil {
		switch coalesce.Decide(coalesceVersion(prev), coalesceVersion(t)) {
		case coalesce.ReplacePending:
			if prev.NotBefore.After(t.NotBefore) && !mutated("staged-coalesce-drops-retry-time") {
				t.NotBefore = prev.NotBefore // as Lane.Push: a retry delay carries over
			}
			pw := prev.Payload.(*Work)
			pw.gone = true
			pl.stagedBytes -= int64(prev.Size) // it leaves the window's count now
			if !pw.unread {
				o.superseded(ls, prev)
			}
		case coalesce.DropIncoming:
			if !t.Payload.(*Work).unread {
				o.superseded(ls, t)
			}
			return
		}
	}
	pl.staged = append(pl.staged, t)
	pl.stagedBytes += int64(t.Size)
	pl.stagedLast[t.Entity] = t
}

// promoteReady moves the staged records that may start into the lane
// (those lookahead records behind the newest read back) or all of them if
// all is set, and reports whether it moved any.
func (o *Owner) promoteReady(pl *parkedLane, ls *laneState, all bool) (moved bool) {
	for len(pl.staged) > 0 {
		t := pl.staged[0]
		w := t.Payload.(*Work)
		if !w.gone && !all && w.seq+o.lookahead() > pl.loadedSeq {
			break
		}
		pl.staged[0] = nil
		if !w.gone {
			pl.stagedBytes -= int64(t.Size)
		}
		pl.staged = pl.staged[1:]
		if w.gone {
			continue
		}
		if pl.stagedLast[t.Entity] == t {
			delete(pl.stagedLast, t.Entity)
		}
		if w.unread {
			continue // a placeholder: its lookahead is over
		}
		if reintroduceCopyBug {
			for _, old := range ls.lane.Push(t) { // the old read-back: coalescing with the lane
				o.superseded(ls, old)
			}
		} else {
			ls.lane.Append(t)
		}
		moved = true
	}
	if len(pl.staged) == 0 {
		pl.staged = nil
	}
	return moved
}
