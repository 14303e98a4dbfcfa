package partition

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
)

// A new owner resumes at the committed watermarks and replays what the
// previous owner had finished above them. A replay may repeat a delivery
// (the same webhook-id) but must never deliver, under an id the receiver
// has not seen, a revision after a newer one of its entity was delivered.
// What the new owner learns at assignment, and the rules that use it, live
// here; docs/architecture.md (Replays) explains them.

// replay is what an owner knows of its predecessor's work.
type replay struct {
	discovered   bool  // the assignment scan has read the parked partition to its end
	scanCursor   int64 // where the assignment scan reads next
	scanReading  bool  // a scan read is out
	scanStart    int64 // where the scan began (the log start if retention passed the commit)
	assigned     ParkedProgress
	deliveriesAt int64        // the deliveries commit at assignment
	early        []earlyBatch // deliveries fetched before the scan finished

	// The replay hold: after assignment no attempt starts until the
	// records up to replayEnd are routed (or holdUntil passes), so that a
	// state the previous owner superseded is superseded again instead of
	// starting before its successor arrives.
	holding   bool
	replayEnd int64
	holdUntil time.Time

	alreadyParked map[int64]struct{} // deliveries offsets found in the parked log at assignment
	// parkedUpTo is, per (endpoint, entity), the highest deliveries offset
	// at or above the commit found in the parked log at assignment, parked
	// or ended by an end marker: a replayed delivery of that entity below it
	// that is not parked itself was finished before (parking takes every
	// unfinished delivery, in each entity's order, and an entity's delivery
	// starts only once the one before it finished), so it is not delivered
	// again.
	parkedUpTo map[entityKey]int64
	// endedSrc are the deliveries offsets whose delivery an end marker at
	// or above the parked commit says ended: neither replayed from the
	// deliveries partition nor read back from the parked one (a parked copy
	// of a delivery that died in flight included).
	endedSrc map[int64]struct{}
	// markers are the end markers (in log order) whose delivery a replay of
	// the deliveries partition could still meet: the parked commit stays at
	// or below the first, so the next owner's scan finds it.
	markers []marker
}

type earlyBatch struct {
	records       []Incoming
	highWatermark int64
}

func (r *replay) init() {
	r.alreadyParked = map[int64]struct{}{}
	r.parkedUpTo = map[entityKey]int64{}
	r.endedSrc = map[int64]struct{}{}
}

// EndHeader marks an end marker: a record of the parked partition that
// carries no delivery but says that one ended as a dead letter. Its value
// is the parked offset of the delivery that ended, -1 for one that was
// never parked (SrcHeader then names its deliveries offset).
const EndHeader = "laneway-end"

type entityKey struct{ endpoint, entity string }

// marker is an end marker in the parked log: at its offset, for the
// delivery at deliveries offset src.
type marker struct{ at, src int64 }

// finishedBeforeParking reports whether a replayed delivery that is not in
// the parked log was finished before its endpoint parked (see parkedUpTo).
func (r *replay) finishedBeforeParking(d *event.Delivery, offset int64) bool {
	upTo, ok := r.parkedUpTo[entityKey{d.EndpointID, d.Entity}]
	return ok && offset < upTo
}

// appendEndMarker queues the end marker of a task that ended as a dead
// letter; ended runs once it is in Kafka.
func (o *Owner) appendEndMarker(endpointID string, t *Task, ended func()) {
	w := t.Payload.(*Work)
	src, parkedAt := t.Offset, int64(-1)
	if w.parked {
		src, parkedAt = w.src, t.Offset
	}
	// The value is the entity: a replay skips the entity's earlier
	// deliveries too, which ended before this one started.
	rec := &kgo.Record{
		Topic: o.cfg.ParkedTopic, Partition: o.cfg.Partition, Key: []byte(endpointID), Value: []byte(t.Entity),
		Headers: []kgo.RecordHeader{
			{Key: SrcHeader, Value: []byte(strconv.FormatInt(src, 10))},
			{Key: EndHeader, Value: []byte(strconv.FormatInt(parkedAt, 10))},
		},
	}
	o.appendSeq++
	o.appends.push(&Append{Record: rec, src: -1, seq: o.appendSeq, marker: true, ended: ended})
}

// endMarker returns the parked offset an end marker names, and whether r
// is one.
func endMarker(r *kgo.Record) (parkedAt int64, ok bool) {
	return headerInt(r, EndHeader)
}

// Assignment is where an owner starts: the commits it found.
type Assignment struct {
	// Parked is the committed parked progress.
	Parked ParkedProgress
	// DeliveriesCommitted is the deliveries partition's committed offset.
	DeliveriesCommitted int64
	// ReplayEnd is one past the deliveries partition's last record at
	// assignment: the replay range ends there.
	ReplayEnd int64
	// Generation is the consumer-group generation the partition was
	// assigned in (epoch.go: an owner does not take over from a later one).
	Generation int64
}

// Assign begins ownership: before any delivery of the partition is
// dispatched, the parked partition is read from its committed offset to
// its end, to find the endpoints that still have a parked backlog (they
// stay parked, so new deliveries queue behind it; an endpoint's records
// below its own committed progress are finished and skipped) and the
// deliveries offsets at or above the deliveries commit that are parked
// already (replays of those are not appended twice). Deliveries dispatched
// meanwhile wait; Backpressured is true until it is done. Then no attempt
// starts until the deliveries up to ReplayEnd are routed, or ReplayHold has
// passed.
func (o *Owner) Assign(a Assignment) {
	o.holding, o.replayEnd = a.ReplayEnd > a.DeliveriesCommitted && !mutated("replay-hold-off"), a.ReplayEnd
	o.assigned = a.Parked
	start := a.Parked.Commit
	o.parkedEnd, o.scanStart = start, start
	o.scanCursor, o.deliveriesAt = start, a.DeliveriesCommitted
	o.epochs.init(a.Parked.Takeover-1, a.Generation)
	o.scanRead()
}

func (o *Owner) scanRead() {
	if o.stopped || o.discovered || o.scanReading {
		return
	}
	if !o.cfg.Lease.Held(o.now()) {
		// A member that may have lost the partition does not read a later
		// owner's records into its own books; Tick reads once the lease
		// holds again.
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
	if !o.cfg.Lease.Held(o.now()) {
		return // answered while the lease lapsed (a frozen process): read again
	}
	switch {
	case res.OutOfRange:
		o.scanExpired(res.LogStart)
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
	o.checkOwnTakeover()
	switch {
	case o.epoch >= 0:
	case !o.takeoverOut: // at the end: take over (again)
		o.takeOver()
		return // tookOver reads on
	case o.takeoverAt >= 0: // in Kafka, not read yet (the read began before it landed)
		o.scanRead()
		return
	default:
		return // tookOver reads on
	}
	o.discovered = true
	o.holdUntil = o.now().Add(o.cfg.ReplayHold)
	o.log.Info("deliveries partition assigned", "parked_endpoints", len(o.parked), "stale_records", o.staleSkipped)
	o.releaseEarly()
}

// scanExpired moves the assignment scan past records that retention
// deleted before any owner read them back. Which endpoint each one was for
// is gone with it, so they are counted as offsets (as a lane's expired
// records are) and logged with the endpoints that still needed records
// there: nothing vanishes uncounted.
func (o *Owner) scanExpired(logStart int64) {
	if logStart > o.scanCursor {
		var needed []string
		for _, id := range sortedKeys(o.assigned.Endpoints) {
			if o.assigned.NeedsFrom(id) < logStart {
				needed = append(needed, id)
			}
		}
		o.log.Error("parked records expired before delivery (retention), found at assignment",
			"from", o.scanCursor, "to", logStart, "endpoints", needed,
			"unlisted_endpoints_affected", o.assigned.NeedsFrom("") < logStart)
		o.cfg.Metrics.ParkedExpired(int(logStart - o.scanCursor))
	}
	if logStart > o.scanCursor {
		o.base, o.valid = -1, nil // the takeover records there went with them
	}
	o.scanCursor, o.scanStart = logStart, logStart
}

func (o *Owner) noteDiscovered(r *kgo.Record) {
	if o.skipStale(r) {
		o.staleSkipped++
		return
	}
	if isTakeover(r) {
		o.noteTakeover(r)
		return
	}
	if _, ok := endMarker(r); ok {
		o.noteEnded(r)
		return
	}
	id := string(r.Key)
	var d event.Delivery
	parsed := json.Unmarshal(r.Value, &d) == nil
	if r.Offset >= o.assigned.NeedsFrom(id) { // below it, the endpoint finished it
		pl, ok := o.parked[id]
		if !ok {
			pl = newParkedLane(id, r.Offset)
			o.parked[id] = pl
			o.statsOf(id).parkedReason = "parked"
		}
		pl.last = r.Offset
		if parsed {
			pl.noteBacklog(d.CreatedAt)
		}
	}
	if src := SrcOffset(r); src >= o.deliveriesAt {
		o.alreadyParked[src] = struct{}{}
		k := entityKey{id, d.Entity}
		o.parkedUpTo[k] = max(o.parkedUpTo[k], src)
	}
}

// noteEnded takes an end marker found at assignment: its delivery is not
// replayed from the deliveries partition, nor read back from the parked one.
func (o *Owner) noteEnded(r *kgo.Record) {
	src := SrcOffset(r)
	o.endedSrc[src] = struct{}{}
	if src >= o.deliveriesAt {
		o.alreadyParked[src] = struct{}{}
		o.markers = append(o.markers, marker{at: r.Offset, src: src})
		k := entityKey{string(r.Key), string(r.Value)}
		o.parkedUpTo[k] = max(o.parkedUpTo[k], src)
	}
}

// releaseEarly dispatches the deliveries that arrived during the scan, or
// reads on if the scan's last read failed.
func (o *Owner) releaseEarly() {
	if !o.discovered {
		o.scanRead()
		return
	}
	if !o.cfg.Lease.Held(o.now()) {
		return
	}
	early := o.early
	o.early = nil
	for _, b := range early {
		o.Dispatch(b.records, b.highWatermark)
	}
	o.refillParked()
}

// endHold lets every lane start once the replay range is routed. The
// deliveries of parked endpoints were routed to their lanes meanwhile, so
// that they were coalesced as the previous owner's lane did; they now go to
// the parked log, behind its backlog.
func (o *Owner) endHold(now time.Time) {
	o.holding = false
	o.log.Info("replay range routed; deliveries start", "replay_end", o.replayEnd)
	for _, id := range sortedKeys(o.lanes) {
		ls := o.lanes[id]
		if pl := o.parked[id]; pl != nil {
			o.appendUnstarted(pl, ls)
			continue
		}
		if why := o.overBuffer(ls); why != "" {
			o.park(ls, why)
			continue
		}
		o.pump(ls, now)
	}
	o.refillParked()
	o.flushOutboxes(now)
}
