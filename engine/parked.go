package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/endpoint"
	"github.com/laneway/laneway/event"
	"github.com/laneway/laneway/internal/kread"
	"github.com/laneway/laneway/partition"
)

// Parking moves the backlog of a lane that cannot keep up out of memory and
// off the deliveries watermark: its tasks are appended, in order, to
// partition p of the parked topic (p = the deliveries partition, so the same
// instance owns both) and their deliveries offsets are marked done. The
// owner reads the parked partition back at the endpoint's own pace, holding
// at most ParkedWindow loaded deliveries per parked lane.
//
// Each parked lane reads the partition at its own cursor, so a small backlog
// never waits behind a huge one; the parked partition's commit (under a
// group that has no members) is the lowest offset any parked lane still needs.

// srcHeader carries the deliveries offset a parked record came from, so a
// restarted owner can tell which replayed deliveries are already parked.
const srcHeader = "laneway-src"

// parkedLane is the parked state of one endpoint in one partition.
type parkedLane struct {
	id        string
	cursor    int64 // next parked offset to read for this endpoint
	last      int64 // highest parked offset known to hold one of its records
	appending int   // appends sent and not yet acknowledged
	backlog   int   // records appended and not yet read back
	inLane    int   // read back, in the lane, not finished
	loaded    *partition.Tracker
	// latest is the newest coalescable revision appended per entity: an
	// older state record read back later is superseded, not delivered.
	latest map[string]int64
	// copies are in-flight deliveries that were also appended when the lane
	// parked, so that after a crash the parked log alone has the entity's
	// whole order. true once the original finished: the copy is skipped.
	copies map[int64]bool
	// oldestBacklog is when the oldest record not yet read back was created.
	oldestBacklog time.Time
}

func newParkedLane(id string, cursor int64) *parkedLane {
	return &parkedLane{
		id: id, cursor: cursor, last: -1, loaded: partition.NewTracker(cursor),
		latest: map[string]int64{}, copies: map[int64]bool{},
	}
}

// drained reports whether every parked record of the endpoint is finished.
func (pl *parkedLane) drained() bool {
	return pl.appending == 0 && pl.inLane == 0 && pl.cursor > pl.last
}

// lowestUnfinished is the parked offset below which this lane needs nothing.
func (pl *parkedLane) lowestUnfinished() int64 {
	if pl.loaded.Outstanding() > 0 {
		return pl.loaded.Watermark()
	}
	return pl.cursor
}

func (pl *parkedLane) noteCoalesce(d *event.Delivery) {
	if d.Coalesce && d.Revision > pl.latest[d.Entity] {
		pl.latest[d.Entity] = d.Revision
	}
}

func (pl *parkedLane) noteBacklog(createdAt time.Time) {
	if pl.backlog == 0 || createdAt.Before(pl.oldestBacklog) {
		pl.oldestBacklog = createdAt
	}
	pl.backlog++
}

// parkedAppend is a record waiting for the appender, in parking order.
type parkedAppend struct {
	lane   *parkedLane
	src    int64 // the deliveries offset the append finishes
	record *kgo.Record
}

// parkLocked moves the lane's unfinished work to the parked topic: copies
// of in-flight deliveries first (their originals keep running), then every
// unstarted task in per-entity order.
func (op *ownedPartition) parkLocked(ls *laneState, why string) {
	if _, ok := op.parked[ls.id]; ok {
		return
	}
	pl := newParkedLane(ls.id, op.parkedEnd)
	op.parked[ls.id] = pl
	op.statsLocked(ls.id).parkedReason = why
	for t := range ls.running {
		w := t.Payload.(*work)
		if w.parked {
			continue // already in the parked log
		}
		pl.copies[t.Offset] = false
		// Once the copy is in Kafka it carries the delivery, so its ack
		// finishes the deliveries offset even while the original retries.
		op.enqueueAppendLocked(pl, w.d, t.Offset)
	}
	// A lane that is not parked holds no parked tasks, so everything it
	// drains came from the deliveries partition.
	drained := interleaveEntities(ls.lane.DrainUnstarted())
	for _, t := range drained {
		w := t.Payload.(*work)
		w.d.Attempts, w.d.NotBefore = t.Attempts, t.NotBefore
		op.enqueueAppendLocked(pl, w.d, t.Offset)
	}
	delete(op.waiting, ls)
	op.s.cfg.Logger.Info("lane parked", "endpoint", ls.id, "partition", op.id, "reason", why,
		"moved", len(drained), "in_flight", len(ls.running))
	op.s.cfg.Metrics.parked(why)
}

// interleaveEntities reorders tasks (grouped by entity, each group in
// order) so that entities take turns, keeping each entity's own order. The
// parked log is read back in windows; grouped by entity, a window would
// hold a handful of entities and the lane could not use its concurrency
// (one delivery in flight per entity).
func interleaveEntities(tasks []*Task) []*Task {
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

// enqueueAppendLocked queues d for the appender; the append's
// acknowledgement finishes the deliveries offset src.
func (op *ownedPartition) enqueueAppendLocked(pl *parkedLane, d *event.Delivery, src int64) {
	value, err := json.Marshal(d)
	if err != nil {
		op.s.cfg.Logger.Error("cannot encode parked delivery", "err", err)
		return
	}
	rec := &kgo.Record{
		Topic: op.s.cfg.Topics.Parked, Partition: op.id, Key: []byte(pl.id), Value: value,
		Headers: []kgo.RecordHeader{{Key: srcHeader, Value: []byte(strconv.FormatInt(src, 10))}},
	}
	pl.appending++
	pl.noteBacklog(d.CreatedAt)
	pl.noteCoalesce(d)
	op.appends = append(op.appends, parkedAppend{lane: pl, src: src, record: rec})
	select {
	case op.appendWake <- struct{}{}:
	default:
	}
}

func (op *ownedPartition) signalParked() {
	select {
	case op.parkedWake <- struct{}{}:
	default:
	}
}

// appendLoop produces queued appends in order. Only this goroutine
// produces to the parked partition, so records keep their parking order.
func (op *ownedPartition) appendLoop() {
	defer op.parkedWorkers.Done()
	for {
		op.flushAppends()
		select {
		case <-op.appendWake:
		case <-op.stopCh:
			op.flushAppends() // appends queued before the stop still go out
			return
		}
	}
}

// readLoop reads parked records back into lanes that have room. It runs
// apart from appendLoop so that a burst of appends (which can block on the
// producer's buffer) never stalls the drain of parked lanes.
func (op *ownedPartition) readLoop() {
	defer op.parkedWorkers.Done()
	ticker := time.NewTicker(op.s.cfg.CommitInterval)
	defer ticker.Stop()
	for {
		op.readBack()
		select {
		case <-op.parkedWake:
		case <-ticker.C:
		case <-op.stopCh:
			return
		}
	}
}

func (op *ownedPartition) isStopped() bool {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.stopped
}

// flushAppends hands queued appends to the producer.
func (op *ownedPartition) flushAppends() {
	op.mu.Lock()
	queued := op.appends
	op.appends = nil
	op.mu.Unlock()
	for _, a := range queued {
		op.client.Produce(context.Background(), a.record, func(r *kgo.Record, err error) {
			op.appended(a, r, err)
		})
	}
}

func (op *ownedPartition) appended(a parkedAppend, r *kgo.Record, err error) {
	op.mu.Lock()
	defer op.mu.Unlock()
	a.lane.appending--
	if err != nil {
		// The deliveries offset stays unfinished: the watermark holds and
		// the delivery is read again after a restart, so nothing is lost.
		op.s.cfg.Logger.Error("parking a delivery failed", "partition", op.id, "endpoint", a.lane.id, "err", err)
		return
	}
	a.lane.last = max(a.lane.last, r.Offset)
	op.parkedEnd = max(op.parkedEnd, r.Offset+1)
	if op.tracker != nil {
		op.tracker.Done(a.src)
	}
	op.signalParked()
}

// parkedFetchBytes bounds one read of the parked partition.
const parkedFetchBytes = 256 << 10

// readBack refills every parked lane that has room and more to read.
func (op *ownedPartition) readBack() {
	for _, pl := range op.lanesToRefill() {
		op.refill(pl)
	}
}

func (op *ownedPartition) lanesToRefill() []*parkedLane {
	op.mu.Lock()
	defer op.mu.Unlock()
	var out []*parkedLane
	for _, pl := range op.parked {
		if op.stopped {
			return nil
		}
		ep, _ := op.s.cfg.Endpoints.Get(pl.id)
		if ep.Paused && ep.Status == endpoint.StatusActive {
			continue // paused: the backlog waits in Kafka (a disabled one drains to dead letters)
		}
		if pl.inLane <= op.s.cfg.ParkedWindow/2 && pl.cursor <= pl.last {
			out = append(out, pl)
		} else if pl.drained() {
			op.unparkLocked(pl)
		}
	}
	return out
}

// refill reads the lane's next records from its cursor until its window is
// full or the batch ends.
func (op *ownedPartition) refill(pl *parkedLane) {
	op.mu.Lock()
	cursor := pl.cursor
	op.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := op.s.parkedReader.Read(ctx, op.id, cursor, parkedFetchBytes)
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.stopped || op.parked[pl.id] != pl || pl.cursor != cursor {
		return // revoked, unparked or rewound while we read
	}
	switch {
	case errors.Is(err, kread.ErrOffsetOutOfRange):
		op.s.cfg.Logger.Error("parked records expired before delivery (retention)", "partition", op.id,
			"endpoint", pl.id, "from", cursor, "to", res.LogStartOffset)
		pl.cursor = max(pl.cursor, res.LogStartOffset)
		return
	case err != nil:
		op.s.cfg.Logger.Warn("reading parked records failed; will retry", "partition", op.id, "err", err)
		return
	}
	ls := op.laneLocked(pl.id, op.maxConcurrencyOf(pl.id))
	for _, r := range res.Records {
		if pl.inLane >= op.s.cfg.ParkedWindow {
			break
		}
		pl.cursor = r.Offset + 1
		if string(r.Key) == pl.id {
			op.loadLocked(pl, ls, r)
		}
	}
	if len(res.Records) == 0 && res.HighWatermark > pl.cursor {
		// Nobody writes the parked topic transactionally and it is not
		// compacted, so this should not happen; skipping ahead could lose
		// deliveries, so the read is retried instead.
		op.s.cfg.Logger.Warn("parked read returned nothing below the high watermark; will retry",
			"partition", op.id, "endpoint", pl.id, "cursor", pl.cursor, "high_watermark", res.HighWatermark)
	}
	op.s.cfg.Logger.Debug("parked refill", "endpoint", pl.id, "from", cursor, "read", len(res.Records),
		"cursor", pl.cursor, "last", pl.last, "in_lane", pl.inLane, "pending", ls.lane.Pending(), "in_flight", ls.lane.InFlight())
	op.pumpLocked(ls, op.s.cfg.Now())
	if pl.drained() {
		op.unparkLocked(pl)
	}
}

// loadLocked turns one parked record into a lane task, unless it is
// superseded or a copy whose original already finished.
func (op *ownedPartition) loadLocked(pl *parkedLane, ls *laneState, r *kgo.Record) {
	pl.backlog = max(0, pl.backlog-1)
	pl.loaded.Add(r.Offset, op.s.cfg.Now())
	d, err := event.ParseDelivery(r.Value)
	if err != nil {
		pl.loaded.Done(r.Offset)
		op.s.cfg.Logger.Error("unreadable parked record skipped", "partition", op.id, "offset", r.Offset, "err", err)
		return
	}
	src := srcOffset(r)
	if finished, isCopy := pl.copies[src]; isCopy && finished {
		delete(pl.copies, src)
		pl.loaded.Done(r.Offset)
		return
	}
	if d.Coalesce && d.Revision < pl.latest[d.Entity] {
		pl.loaded.Done(r.Offset)
		op.s.cfg.Metrics.supersededN(1)
		return
	}
	t := &Task{
		Offset: r.Offset, Partition: op.id, Entity: d.Entity, Revision: d.Revision, Coalesce: d.Coalesce,
		NotBefore: d.NotBefore, EnqueuedAt: d.CreatedAt, Attempts: d.Attempts,
		Payload: &work{d: &d, parked: true, src: src},
	}
	pl.inLane++
	for _, old := range ls.lane.Push(t) {
		op.supersededLocked(old)
	}
}

func srcOffset(r *kgo.Record) int64 {
	for _, h := range r.Headers {
		if h.Key == srcHeader {
			if v, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				return v
			}
		}
	}
	return -1
}

// unparkLocked returns an endpoint whose parked backlog is finished to
// direct delivery.
func (op *ownedPartition) unparkLocked(pl *parkedLane) {
	delete(op.parked, pl.id)
	if st := op.stats[pl.id]; st != nil {
		st.parkedReason = ""
	}
	op.s.cfg.Logger.Info("lane unparked", "endpoint", pl.id, "partition", op.id)
}

// parkedCommitOffset is the parked offset below which nothing is needed.
func (op *ownedPartition) parkedCommitOffset() int64 {
	low := op.parkedEnd
	for _, pl := range op.parked {
		low = min(low, pl.lowestUnfinished())
	}
	return low
}

// discoverParked reads the parked partition from its committed offset to
// the end before any delivery of this partition is dispatched: it finds the
// endpoints that still have a parked backlog (they stay parked, so new
// deliveries queue behind it) and the deliveries offsets already parked
// (replays of those are not appended twice).
func (op *ownedPartition) discoverParked(ctx context.Context, start, deliveriesCommitted int64) error {
	op.parkedEnd, op.lastParkedCommit = start, start
	for cursor := start; ; {
		res, err := op.s.parkedReader.Read(ctx, op.id, cursor, 4*parkedFetchBytes)
		if errors.Is(err, kread.ErrOffsetOutOfRange) {
			cursor = res.LogStartOffset
			op.lastParkedCommit = -1
			continue
		}
		if err != nil {
			return err
		}
		for _, r := range res.Records {
			op.noteDiscovered(r, deliveriesCommitted)
			cursor = r.Offset + 1
		}
		op.parkedEnd = max(op.parkedEnd, cursor)
		if len(res.Records) == 0 || cursor >= res.HighWatermark {
			op.parkedEnd = max(op.parkedEnd, res.HighWatermark)
			return nil
		}
	}
}

func (op *ownedPartition) noteDiscovered(r *kgo.Record, deliveriesCommitted int64) {
	id := string(r.Key)
	pl, ok := op.parked[id]
	if !ok {
		pl = newParkedLane(id, r.Offset)
		op.parked[id] = pl
	}
	pl.last = r.Offset
	var d event.Delivery
	if json.Unmarshal(r.Value, &d) == nil {
		pl.noteCoalesce(&d)
		pl.noteBacklog(d.CreatedAt)
	}
	if src := srcOffset(r); src >= deliveriesCommitted {
		op.alreadyParked[src] = struct{}{}
	}
}

// committedOffset returns group's committed offset for topic/p, or the log
// start when it has none.
func committedOffset(ctx context.Context, adm *kadm.Client, group, topic string, p int32) (int64, error) {
	resp, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) { // a group that never committed
		return 0, err
	}
	if o, ok := resp.Lookup(topic, p); ok && o.Err == nil && o.At >= 0 {
		return o.At, nil
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	if o, ok := starts.Lookup(topic, p); ok && o.Err == nil {
		return o.Offset, nil
	}
	return 0, nil
}
