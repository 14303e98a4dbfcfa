package partition

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
)

// Parking moves the backlog of a lane that cannot keep up out of memory and
// off the deliveries watermark: its tasks are appended, in order, to
// partition p of the parked topic (p = the deliveries partition, so the same
// owner holds both) and their deliveries offsets are marked done once the
// append is acknowledged. The owner reads the parked partition back at the
// endpoint's own pace, holding at most ParkedWindow loaded deliveries per
// parked lane.
//
// Each parked lane reads the partition at its own cursor, so a small backlog
// never waits behind a huge one; the parked partition's commit is the lowest
// offset any parked lane still needs.

// SrcHeader carries the deliveries offset a parked record came from, so a
// restarted owner can tell which replayed deliveries are already parked.
const SrcHeader = "laneway-src"

// parking is the parked state of an owner.
type parking struct {
	parked    map[string]*parkedLane
	parkedEnd int64 // next offset of the parked partition
	appends   outbox[*Append]
	appendSeq uint64
	reads     int // parked reads out
}

func (p *parking) init() {
	p.parked = map[string]*parkedLane{}
}

// parkedLane is the parked state of one endpoint.
type parkedLane struct {
	id        string
	cursor    int64 // next parked offset to read for this endpoint
	last      int64 // highest parked offset known to hold one of its records
	appending int   // appends queued or out, not yet acknowledged
	backlog   int   // records appended and not yet read back
	inLane    int   // read back (staged or in the lane), not finished
	reading   bool  // a read is out
	// loadedSeq counts the records of the endpoint read back so far.
	loadedSeq int64
	// staged are records read back that may not start yet: a record starts
	// only once the next lookahead records of its endpoint are read back
	// too (or nothing more is known), and coalescing only ever replaces a
	// record within that distance. So a replay after a crash, which reads
	// the same records in the same order, supersedes every state the
	// previous owner superseded before it can start.
	staged []*Task
	// stagedLast is each entity's last staged task, for coalescing.
	stagedLast map[string]*Task
	// unfinished are the parked offsets read back and not yet finished
	// (a dead letter not yet acknowledged included): at most the window.
	unfinished map[int64]int32 // offset → the record's size
	// unfinishedBytes and stagedBytes are the sizes of unfinished and of
	// staged records: the window's bytes are what is unfinished and not
	// staged.
	unfinishedBytes, stagedBytes int64
	// copies are in-flight deliveries that were also appended when the lane
	// parked, so that after a crash the parked log alone has the entity's
	// whole order; keyed by the original's deliveries offset.
	copies map[int64]*copyState
	// oldestBacklog is when the oldest record not yet read back was created.
	oldestBacklog time.Time
}

// copyState is what became of the original of a parked copy.
type copyState struct {
	// done: the original finished (delivered or dead); the copy is skipped.
	done bool
	// handedOver: the original failed and left the lane; the copy carries
	// the delivery on, with the original's attempts and retry time.
	handedOver bool
	attempts   int
	notBefore  time.Time
	lastError  string
	task       *Task // the copy, once read back into the lane
}

func newParkedLane(id string, cursor int64) *parkedLane {
	return &parkedLane{
		id: id, cursor: cursor, last: -1, unfinished: map[int64]int32{}, stagedLast: map[string]*Task{},
		copies: map[int64]*copyState{},
	}
}

// drained reports whether every parked record of the endpoint is finished.
func (pl *parkedLane) drained() bool {
	return pl.appending == 0 && pl.inLane == 0 && len(pl.unfinished) == 0 && pl.readToEnd()
}

// readToEnd reports whether every record of the endpoint known to be in the
// parked log has been read back.
func (pl *parkedLane) readToEnd() bool {
	return !pl.reading && pl.appending == 0 && pl.cursor > pl.last
}

// lowestUnfinished is the parked offset below which this lane needs nothing.
func (pl *parkedLane) lowestUnfinished() int64 {
	low := pl.cursor
	for o := range pl.unfinished {
		low = min(low, o)
	}
	return low
}

func (pl *parkedLane) done(offset int64) {
	if size, ok := pl.unfinished[offset]; ok {
		pl.unfinishedBytes -= int64(size)
		delete(pl.unfinished, offset)
	}
}

// hold counts a parked record read back and not yet finished.
func (pl *parkedLane) hold(offset int64, size int32) {
	pl.unfinished[offset] = size
	pl.unfinishedBytes += int64(size)
}

// windowBytes is the bytes the window holds: unfinished, not staged.
func (pl *parkedLane) windowBytes() int64 { return max(0, pl.unfinishedBytes-pl.stagedBytes) }

// windowFull reports whether the lane may load no more records (dead
// letters not yet acknowledged count). Beyond it, up to twice the window,
// only records past the maximum age are taken, to die unread.
func (o *Owner) windowFull(pl *parkedLane, times int) bool {
	return len(pl.unfinished) >= times*o.cfg.ParkedWindow || pl.windowBytes() >= int64(times)*o.cfg.ParkedWindowBytes
}

func (pl *parkedLane) noteBacklog(createdAt time.Time) {
	if pl.backlog == 0 || createdAt.Before(pl.oldestBacklog) {
		pl.oldestBacklog = createdAt
	}
	pl.backlog++
}

// park moves the lane's unfinished work to the parked topic: copies of
// in-flight deliveries first (their originals keep running), then every
// unstarted task in per-entity order.
func (o *Owner) park(ls *laneState, why string) {
	if _, ok := o.parked[ls.id]; ok {
		return
	}
	pl := newParkedLane(ls.id, o.parkedEnd)
	o.parked[ls.id] = pl
	o.statsOf(ls.id).parkedReason = why
	running := make([]*Task, 0, len(ls.running))
	for t := range ls.running {
		running = append(running, t)
	}
	slices.SortFunc(running, func(a, b *Task) int { return cmp.Compare(a.Offset, b.Offset) })
	for _, t := range running {
		w := t.Payload.(*Work)
		if w.deadLanded {
			// Dead, its marker already queued: a copy would land after the
			// marker and be read back as live. Another marker goes there.
			o.appendEndMarker(ls.id, t, nil)
			continue
		}
		pl.copies[t.Offset] = &copyState{}
		o.enqueueAppend(pl, w.Delivery, t.Offset)
	}
	moved := o.appendUnstarted(pl, ls)
	delete(o.waiting, ls)
	o.log.Info("lane parked", "endpoint", ls.id, "reason", why, "moved", moved, "in_flight", len(ls.running))
	o.cfg.Metrics.Parked(ls.id, why)
}

// appendUnstarted moves the lane's unstarted tasks to the parked log, in
// per-entity order. A lane that is not parked holds no parked tasks, so
// everything it drains came from the deliveries partition.
func (o *Owner) appendUnstarted(pl *parkedLane, ls *laneState) int {
	drained := InterleaveEntities(ls.lane.DrainUnstarted())
	for _, t := range drained {
		d := t.Payload.(*Work).Delivery
		d.Attempts, d.NotBefore = t.Attempts, t.NotBefore
		if mutated("parked-attempts-reset") {
			d.Attempts = 0
		}
		if mutated("parked-notbefore-dropped") {
			d.NotBefore = time.Time{}
		}
		o.enqueueAppend(pl, d, t.Offset)
	}
	return len(drained)
}

// InterleaveEntities reorders tasks (grouped by entity, each group in
// order) so that entities take turns, keeping each entity's own order. The
// parked log is read back in windows; grouped by entity, a window would
// hold a handful of entities and the lane could not use its concurrency
// (one delivery in flight per entity).
func InterleaveEntities(tasks []*Task) []*Task {
	var groups [][]*Task
	index := map[string]int{}
	for _, t := range tasks {
		i, ok := index[t.Entity]
		if !ok {
			i = len(groups)
			index[t.Entity] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], t)
	}
	out := make([]*Task, 0, len(tasks))
	for round := 0; len(out) < len(tasks); round++ {
		for _, g := range groups {
			if round < len(g) {
				out = append(out, g[round])
			}
		}
	}
	return out
}

// enqueueAppend queues d for the parked partition; the append's
// acknowledgement finishes the deliveries offset src.
func (o *Owner) enqueueAppend(pl *parkedLane, d *event.Delivery, src int64) {
	value, err := json.Marshal(d)
	if err != nil { // a Delivery always encodes; kept as a guard
		o.log.Error("cannot encode parked delivery", "err", err)
		return
	}
	rec := &kgo.Record{
		Topic: o.cfg.ParkedTopic, Partition: o.cfg.Partition, Key: []byte(pl.id), Value: value,
		Headers: []kgo.RecordHeader{{Key: SrcHeader, Value: []byte(strconv.FormatInt(src, 10))}},
	}
	pl.appending++
	pl.noteBacklog(d.CreatedAt)
	o.appendSeq++
	o.appends.push(&Append{Record: rec, lane: pl, src: src, seq: o.appendSeq})
}

// Appended records a parked append's produce outcome. A failed append is
// produced again, in order, until it lands or the partition is given up.
func (o *Owner) Appended(a *Append, offset int64, err error) {
	if o.appends.done(a, err) {
		o.log.Error("appending to the parked partition failed; will retry", "key", string(a.Record.Key), "err", err)
		return
	}
	if a.takeover {
		o.tookOver(offset)
		return
	}
	o.parkedEnd = max(o.parkedEnd, offset+1)
	if a.marker {
		o.markers = append(o.markers, marker{at: offset, src: SrcOffset(a.Record)})
		if a.ended != nil {
			a.ended()
		}
		if !o.stopped {
			o.flushOutboxes(o.now())
		}
		return
	}
	a.lane.appending--
	a.lane.last = max(a.lane.last, offset)
	o.parkedEnd = max(o.parkedEnd, offset+1)
	if a.src >= 0 && !mutated("parked-offset-never-done") {
		o.trackerDone(a.src)
	}
	if !o.stopped {
		now := o.now()
		o.refillLane(a.lane, now)
		o.flushOutboxes(now)
	}
}

// release does the bookkeeping of a task leaving its lane: a parked window
// slot frees, and the parked copy of a finished original is to be skipped.
func (o *Owner) release(ls *laneState, t *Task) {
	delete(ls.running, t)
	w := t.Payload.(*Work)
	pl := o.parked[ls.id]
	if pl == nil {
		return
	}
	if !w.parked {
		if cs := pl.copies[t.Offset]; cs != nil {
			cs.done = true
		}
		return
	}
	pl.inLane--
	if cs := pl.copies[w.src]; cs != nil && cs.task == t {
		cs.task = nil // the copy itself left the lane (superseded)
		if !cs.handedOver {
			cs.done = true
		}
	}
}

// handOver ends an in-flight original that failed while a parked copy of
// it exists: the copy, placed before every later task of the entity in the
// parked log, carries the delivery on with the original's attempts and
// retry time. Keeping both would deliver it twice, or let coalescing replace
// one by the other and finish both.
func (o *Owner) handOver(ls *laneState, t *Task, notBefore time.Time) bool {
	w := t.Payload.(*Work)
	pl := o.parked[ls.id]
	if w.parked || pl == nil {
		return false
	}
	cs := pl.copies[t.Offset]
	if cs == nil {
		return false
	}
	cs.handedOver, cs.attempts, cs.notBefore, cs.lastError = true, t.Attempts, notBefore, w.Delivery.LastError
	if mutated("handover-attempts-lost") {
		cs.attempts = 0
	}
	if mutated("handover-notbefore-lost") {
		cs.notBefore = time.Time{}
	}
	switch {
	case cs.done: // the copy was superseded: the newer revision carries the entity on
		delete(pl.copies, t.Offset)
	case cs.task != nil:
		carryOver(cs.task, cs)
		delete(pl.copies, t.Offset)
	}
	// The copy is the entity's next task if it was read back already, so
	// it must carry the retry time before Finish schedules it.
	ls.lane.Finish(t)
	delete(ls.running, t)
	return true
}

// carryOver gives a copy the attempts and retry time of its original.
func carryOver(c *Task, cs *copyState) {
	d := c.Payload.(*Work).Delivery
	c.Attempts, c.NotBefore = cs.attempts, cs.notBefore
	d.Attempts, d.NotBefore, d.LastError = cs.attempts, cs.notBefore, cs.lastError
}

// skipFinishedCopy ends, without sending it again, a parked record whose
// delivery already ended: a copy whose original has since finished, or one
// an end marker names (it was read back all the same, to take part in
// coalescing as it did before).
func (o *Owner) skipFinishedCopy(ls *laneState, t *Task, w *Work) bool {
	if !w.parked {
		return false
	}
	if w.ended {
		ls.lane.Finish(t)
		o.release(ls, t)
		o.offsetDone(ls, t)
		return true
	}
	pl := o.parked[ls.id]
	if pl == nil {
		return false
	}
	cs := pl.copies[w.src]
	if cs == nil {
		return false
	}
	delete(pl.copies, w.src)
	if !cs.done || mutated("finished-copy-sent-again") {
		return false
	}
	ls.lane.Finish(t)
	o.release(ls, t)
	o.offsetDone(ls, t)
	return true
}

// SrcOffset returns the deliveries offset a parked record came from, -1 if
// it names none.
func SrcOffset(r *kgo.Record) int64 {
	if v, ok := headerInt(r, SrcHeader); ok {
		return v
	}
	return -1
}

// unpark returns an endpoint whose parked backlog is finished to direct
// delivery.
func (o *Owner) unpark(pl *parkedLane) {
	delete(o.parked, pl.id)
	if st := o.stats[pl.id]; st != nil {
		st.parkedReason = ""
	}
	o.log.Info("lane unparked", "endpoint", pl.id)
	o.cfg.Metrics.Unparked(pl.id)
	if ls := o.lanes[pl.id]; ls != nil {
		o.dropIfIdle(ls)
	}
}

// parkedCommitOffset is the parked offset below which nothing is needed:
// no parked lane's unfinished record, and no end marker whose delivery is
// at or above the deliveries commit (a replay from it must find the marker;
// a replay of the parked partition that reads a marked record reads the
// marker too, since markers follow what they mark).
func (o *Owner) parkedCommitOffset() int64 {
	low := o.parkedEnd
	for _, pl := range o.parked {
		low = min(low, pl.lowestUnfinished())
	}
	committed := o.deliveriesAt
	if o.lastCommitted >= 0 {
		committed = o.lastCommitted
	}
	keep := o.markers[:0]
	for _, m := range o.markers {
		if m.src >= committed && !mutated("parked-commit-forgets-markers") {
			keep = append(keep, m)
		}
	}
	o.markers = keep
	if len(o.markers) > 0 {
		low = min(low, o.markers[0].at)
	}
	return low
}
