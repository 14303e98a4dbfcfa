package partition

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/endpoint"
	"github.com/laneway/laneway/event"
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
	parked           map[string]*parkedLane
	parkedEnd        int64              // next offset of the parked partition
	lastParkedCommit int64              // parked offset last committed
	alreadyParked    map[int64]struct{} // deliveries offsets found in the parked log at assignment
	appends          outbox[*Append]
	appendSeq        uint64
	reads            int // parked reads out

	discovered   bool         // the assignment scan has read the parked partition to its end
	scanCursor   int64        // where the assignment scan reads next
	scanReading  bool         // a scan read is out
	deliveriesAt int64        // the deliveries commit at assignment
	early        []earlyBatch // deliveries fetched before the scan finished
}

type earlyBatch struct {
	records       []Incoming
	highWatermark int64
}

func (p *parking) init() {
	p.parked = map[string]*parkedLane{}
	p.alreadyParked = map[int64]struct{}{}
}

// parkedLane is the parked state of one endpoint.
type parkedLane struct {
	id        string
	cursor    int64 // next parked offset to read for this endpoint
	last      int64 // highest parked offset known to hold one of its records
	appending int   // appends queued or out, not yet acknowledged
	backlog   int   // records appended and not yet read back
	inLane    int   // read back, in the lane, not finished
	reading   bool  // a read is out
	// unfinished are the parked offsets read back and not yet finished
	// (a dead letter not yet acknowledged included): at most the window.
	unfinished map[int64]struct{}
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
		id: id, cursor: cursor, last: -1, unfinished: map[int64]struct{}{},
		copies: map[int64]*copyState{},
	}
}

// drained reports whether every parked record of the endpoint is finished.
func (pl *parkedLane) drained() bool {
	return pl.appending == 0 && pl.inLane == 0 && len(pl.unfinished) == 0 && !pl.reading && pl.cursor > pl.last
}

// lowestUnfinished is the parked offset below which this lane needs nothing.
func (pl *parkedLane) lowestUnfinished() int64 {
	low := pl.cursor
	for o := range pl.unfinished {
		low = min(low, o)
	}
	return low
}

func (pl *parkedLane) done(offset int64) { delete(pl.unfinished, offset) }

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
		pl.copies[t.Offset] = &copyState{}
		o.enqueueAppend(pl, w.Delivery, t.Offset)
	}
	// A lane that is not parked holds no parked tasks, so everything it
	// drains came from the deliveries partition.
	drained := InterleaveEntities(ls.lane.DrainUnstarted())
	for _, t := range drained {
		d := t.Payload.(*Work).Delivery
		d.Attempts, d.NotBefore = t.Attempts, t.NotBefore
		o.enqueueAppend(pl, d, t.Offset)
	}
	delete(o.waiting, ls)
	o.log.Info("lane parked", "endpoint", ls.id, "reason", why, "moved", len(drained), "in_flight", len(ls.running))
	o.cfg.Metrics.Parked(why)
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
		o.log.Error("parking a delivery failed; will retry", "endpoint", a.lane.id, "err", err)
		return
	}
	a.lane.appending--
	a.lane.last = max(a.lane.last, offset)
	o.parkedEnd = max(o.parkedEnd, offset+1)
	if a.src >= 0 {
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

// skipFinishedCopy ends a parked copy whose original has since finished,
// without sending it again.
func (o *Owner) skipFinishedCopy(ls *laneState, t *Task, w *Work) bool {
	if !w.parked {
		return false
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
	if !cs.done {
		return false
	}
	ls.lane.Finish(t)
	o.release(ls, t)
	o.offsetDone(ls, t)
	return true
}

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
	if o.stopped || !o.discovered || o.parked[pl.id] != pl {
		return
	}
	switch {
	case pl.reading:
	case !o.mayRead(pl, now):
	case len(pl.unfinished) <= o.cfg.ParkedWindow/2 && pl.cursor <= pl.last:
		pl.reading = true
		o.reads++
		o.cfg.Effects.Read(&Read{From: pl.cursor, lane: pl})
	case pl.drained():
		o.unpark(pl)
	}
}

// mayRead reports whether a parked lane reads its backlog now: a paused
// endpoint's backlog waits in Kafka, except what is past the retry policy's
// maximum age, which is read to become dead letters (max_age applies
// whatever the endpoint's state, so nothing waits until retention deletes
// it).
func (o *Owner) mayRead(pl *parkedLane, now time.Time) bool {
	ep, ok := o.cfg.Endpoints.Get(pl.id)
	if !ok || ep.Status != endpoint.StatusActive || !ep.Paused {
		return true // a disabled or deleted endpoint's backlog drains to dead letters
	}
	_, expired := o.cfg.Retry.Exhausted(0, pl.oldestBacklog, now)
	return pl.backlog > 0 && expired
}

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
	now := o.now()
	if ls := o.lanes[pl.id]; ls != nil {
		o.pump(ls, now)
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
	for _, r := range res.Records {
		if len(pl.unfinished) >= o.cfg.ParkedWindow {
			return // the window counts dead letters not yet acknowledged too
		}
		pl.cursor = r.Offset + 1
		if string(r.Key) == pl.id {
			o.loadRecord(pl, ls, r)
		}
	}
	if len(res.Records) == 0 && res.Next > pl.cursor {
		pl.cursor = res.Next // only markers or aborted batches there
	}
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
func (o *Owner) loadRecord(pl *parkedLane, ls *laneState, r *kgo.Record) {
	pl.backlog = max(0, pl.backlog-1)
	d, err := event.ParseDelivery(r.Value)
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
	pl.unfinished[r.Offset] = struct{}{}
	t := &Task{
		Offset: r.Offset, Partition: o.cfg.Partition, Entity: d.Entity, Revision: d.Revision, Coalesce: d.Coalesce,
		NotBefore: d.NotBefore, EnqueuedAt: d.CreatedAt, Attempts: d.Attempts,
		Payload: &Work{Delivery: &d, parked: true, src: src},
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
	for _, old := range ls.lane.Push(t) {
		o.superseded(ls, old)
	}
}

// SrcOffset returns the deliveries offset a parked record came from, -1 if
// it names none.
func SrcOffset(r *kgo.Record) int64 {
	for _, h := range r.Headers {
		if h.Key == SrcHeader {
			if v, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				return v
			}
		}
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
	if ls := o.lanes[pl.id]; ls != nil {
		o.dropIfIdle(ls)
	}
}

// parkedCommitOffset is the parked offset below which nothing is needed.
func (o *Owner) parkedCommitOffset() int64 {
	low := o.parkedEnd
	for _, pl := range o.parked {
		low = min(low, pl.lowestUnfinished())
	}
	return low
}

// Assign begins ownership: before any delivery of the partition is
// dispatched, the parked partition is read from its committed offset
// (parkedStart) to its end, to find the endpoints that still have a parked
// backlog (they stay parked, so new deliveries queue behind it) and the
// deliveries offsets at or above deliveriesCommitted that are parked already
// (replays of those are not appended twice). Deliveries dispatched meanwhile
// wait; Backpressured is true until it is done.
func (o *Owner) Assign(parkedStart, deliveriesCommitted int64) {
	o.parkedEnd, o.lastParkedCommit = parkedStart, parkedStart
	o.scanCursor, o.deliveriesAt = parkedStart, deliveriesCommitted
	o.scanRead()
}

func (o *Owner) scanRead() {
	if o.stopped || o.discovered || o.scanReading {
		return
	}
	o.scanReading = true
	o.reads++
	o.cfg.Effects.Read(&Read{From: o.scanCursor})
}

func (o *Owner) scanDone(r *Read, res ReadResult, err error) {
	o.scanReading = false
	if o.stopped {
		return
	}
	switch {
	case res.OutOfRange:
		o.scanCursor = res.LogStart
		o.lastParkedCommit = -1 // the committed offset is gone: commit again
		o.scanRead()
		return
	case err != nil:
		o.log.Error("reading the parked partition failed; will retry", "err", err)
		return // Tick reads again
	}
	for _, rec := range res.Records {
		o.noteDiscovered(rec)
	}
	o.scanCursor = max(o.scanCursor, res.Next)
	o.parkedEnd = max(o.parkedEnd, o.scanCursor)
	if o.scanCursor < res.End && res.Next > r.From {
		o.scanRead()
		return
	}
	o.parkedEnd = max(o.parkedEnd, res.End)
	o.discovered = true
	o.log.Info("deliveries partition assigned", "parked_endpoints", len(o.parked))
	o.releaseEarly()
}

func (o *Owner) noteDiscovered(r *kgo.Record) {
	id := string(r.Key)
	pl, ok := o.parked[id]
	if !ok {
		pl = newParkedLane(id, r.Offset)
		o.parked[id] = pl
		o.statsOf(id).parkedReason = "parked"
	}
	pl.last = r.Offset
	var d event.Delivery
	if json.Unmarshal(r.Value, &d) == nil {
		pl.noteBacklog(d.CreatedAt)
	}
	if src := SrcOffset(r); src >= o.deliveriesAt {
		o.alreadyParked[src] = struct{}{}
	}
}

// releaseEarly dispatches the deliveries that arrived during the scan, or
// reads on if the scan's last read failed.
func (o *Owner) releaseEarly() {
	if !o.discovered {
		o.scanRead()
		return
	}
	early := o.early
	o.early = nil
	for _, b := range early {
		o.Dispatch(b.records, b.highWatermark)
	}
	o.refillParked()
}
