package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/endpoint"
	"github.com/laneway/laneway/event"
	"github.com/laneway/laneway/partition"
	"github.com/laneway/laneway/signing"
)

// ownedPartition is one deliveries partition (and the parked partition of
// the same number) while this instance owns it: the offset tracker, the
// lanes of the endpoints keyed to it and their parked state. Its mutex
// guards everything below it; HTTP attempts, Kafka produces and parked
// reads run outside the lock.
type ownedPartition struct {
	s      *DeliveryStage
	id     int32
	client *kgo.Client // the group client: dead letters and parked appends

	mu            sync.Mutex
	tracker       *partition.Tracker // nil until the first record arrives
	highWatermark int64
	lastCommitted int64
	lanes         map[string]*laneState
	waiting       map[*laneState]struct{} // lanes with a head waiting on a retry delay
	stopped       bool
	inFlight      int
	drained       chan struct{} // closed once stopped with nothing in flight

	stats            map[string]*endpointStats // for health snapshots
	parked           map[string]*parkedLane
	parkedEnd        int64              // next offset of the parked partition
	lastParkedCommit int64              // parked offset last committed
	alreadyParked    map[int64]struct{} // deliveries offsets found in the parked log at assignment
	appends          []parkedAppend     // waiting for appendLoop, in order
	appendWake       chan struct{}
	parkedWake       chan struct{}
	stopCh           chan struct{}  // closed by stop
	parkedWorkers    sync.WaitGroup // appendLoop and readLoop
}

// laneState is a lane plus what delivering to its endpoint needs.
type laneState struct {
	id        string
	lane      *Lane
	running   map[*Task]struct{} // in flight, so parking can copy them
	signer    *signing.Signer
	secrets   []string // the secrets signer was built from
	disabling bool     // a disable is already being written
	// breakerLoaded is false until the breaker state a previous owner left
	// in Redis is loaded: the lane starts nothing before, or a new owner
	// would send a burst into an endpoint whose breaker is open.
	breakerLoaded bool
	// pausedUntil is when the endpoint's open breaker lets probes out.
	pausedUntil time.Time
}

// work is a task's payload: the delivery and where its record lives.
type work struct {
	d      *event.Delivery
	parked bool   // Task.Offset is a parked offset, not a deliveries one
	src    int64  // for parked work: the deliveries offset it came from
	body   []byte // the rendered payload, kept across retries
}

func newOwnedPartition(s *DeliveryStage, id int32, client *kgo.Client) *ownedPartition {
	return &ownedPartition{
		s: s, id: id, client: client, lastCommitted: -1,
		lanes: map[string]*laneState{}, waiting: map[*laneState]struct{}{},
		drained: make(chan struct{}),
		parked:  map[string]*parkedLane{}, alreadyParked: map[int64]struct{}{}, stats: map[string]*endpointStats{},
		appendWake: make(chan struct{}, 1), parkedWake: make(chan struct{}, 1), stopCh: make(chan struct{}),
	}
}

// startParkedWorkers runs the partition's parked append and read loops
// until stop.
func (op *ownedPartition) startParkedWorkers() {
	op.parkedWorkers.Add(2)
	go op.appendLoop()
	go op.readLoop()
}

// deadWrite is a dead letter to produce once the partition lock is
// released; done runs under the lock once it is safely in Kafka.
type deadWrite struct {
	letter event.DeadLetter
	done   func()
}

// dispatch hands freshly fetched records to their lanes. Records are decoded
// before the partition lock is taken, so attempts finishing meanwhile are
// not kept waiting on JSON work.
func (op *ownedPartition) dispatch(fp kgo.FetchPartition) {
	now := op.s.cfg.Now()
	decoded := make([]decodedRecord, len(fp.Records))
	for i, r := range fp.Records {
		d, err := event.ParseDelivery(r.Value)
		decoded[i] = decodedRecord{d: &d, err: err} // one allocation each: a slow task must not pin the batch
	}
	var dead []deadWrite
	op.mu.Lock()
	if op.stopped {
		op.mu.Unlock()
		return
	}
	op.highWatermark = fp.HighWatermark
	// The whole fetch is routed before any lane starts work, so that a
	// state update is replaced by a newer revision of the same entity in
	// the same fetch instead of starting first. That matters most on a
	// replay after a crash or a lost partition: the backlog since the
	// watermark arrives at once, and a revision that was superseded before
	// the crash must not be delivered after its successors.
	touched := map[*laneState]struct{}{}
	for i, r := range fp.Records {
		if op.tracker == nil {
			op.tracker = partition.NewTracker(r.Offset)
		}
		op.tracker.Add(r.Offset, now)
		ls, dw, ok := op.routeLocked(r, &decoded[i], now)
		if !ok {
			dead = append(dead, dw)
		} else if ls != nil {
			touched[ls] = struct{}{}
		}
	}
	for ls := range touched {
		if op.lanes[ls.id] == ls && op.parked[ls.id] == nil {
			op.pumpLocked(ls, now)
		}
	}
	op.mu.Unlock()
	for _, dw := range dead {
		op.writeDeadLetter(dw)
	}
}

// decodedRecord is a deliveries record's value, decoded.
type decodedRecord struct {
	d   *event.Delivery
	err error
}

// routeLocked sends a record to its lane, or to the parked log when the
// endpoint is parked, or returns the dead letter it becomes when it cannot
// be delivered at all.
func (op *ownedPartition) routeLocked(r *kgo.Record, dec *decodedRecord, now time.Time) (*laneState, deadWrite, bool) {
	offset := r.Offset
	finish := func() { op.tracker.Done(offset) }
	if _, ok := op.alreadyParked[offset]; ok {
		delete(op.alreadyParked, offset) // replayed after a restart: already in the parked log
		finish()
		return nil, deadWrite{}, true
	}
	if dec.err != nil {
		dl := event.DeadLetter{
			ID: fmt.Sprintf("%s-%d-%d", r.Topic, r.Partition, r.Offset), Reason: event.ReasonInvalidDelivery,
			Detail: dec.err.Error(), DeadAt: now.UTC(), EndpointID: string(r.Key),
			Source: fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset),
		}
		dl.SetRaw(r.Value)
		return nil, deadWrite{dl, finish}, false
	}
	d := dec.d
	ep, ok := op.s.cfg.Endpoints.Get(d.EndpointID)
	if reason, detail, undeliverable := undeliverableReason(ep, ok); undeliverable && !op.holdsWorkLocked(d.EndpointID) {
		return nil, deadWrite{deadLetterOf(d, reason, detail, now), finish}, false
	}
	// An undeliverable endpoint that still holds work takes the lane's
	// path below: its earlier deliveries die first, so the dead topic keeps
	// each entity's order for redrive.
	if pl, ok := op.parked[d.EndpointID]; ok {
		op.enqueueAppendLocked(pl, d, offset)
		return nil, deadWrite{}, true
	}
	ls := op.laneLocked(d.EndpointID, ep.MaxConcurrency)
	t := &Task{
		Offset: offset, Partition: r.Partition, Entity: d.Entity, Revision: d.Revision,
		Coalesce: d.Coalesce, NotBefore: d.NotBefore, EnqueuedAt: now, Attempts: d.Attempts,
		Payload: &work{d: d},
	}
	for _, old := range ls.lane.Push(t) {
		op.supersededLocked(old)
	}
	if ls.lane.Pending() > op.s.cfg.LaneBuffer {
		op.parkLocked(ls, "lane_buffer")
		return nil, deadWrite{}, true
	}
	return ls, deadWrite{}, true // dispatch pumps it once the whole fetch is routed
}

// holdsWorkLocked reports whether the endpoint has a lane or a parked
// backlog in this partition.
func (op *ownedPartition) holdsWorkLocked(id string) bool {
	_, laned := op.lanes[id]
	_, parked := op.parked[id]
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

func (op *ownedPartition) laneLocked(id string, maxConcurrency int) *laneState {
	ls, ok := op.lanes[id]
	if !ok {
		ls = &laneState{id: id, lane: NewLane(id, maxConcurrency), running: map[*Task]struct{}{}}
		op.lanes[id] = ls
		b := op.s.cfg.Breakers
		ls.breakerLoaded = b == nil || b.Loaded(id)
		if !ls.breakerLoaded {
			op.warmBreaker(ls)
		}
	}
	return ls
}

// warmBreaker loads, in the background, the breaker state a previous owner
// left in Redis, then lets the lane start. If Redis cannot answer (within
// 5 s) the endpoint starts closed, which is also what a Redis flush gives:
// Redis holds no truth.
func (op *ownedPartition) warmBreaker(ls *laneState) {
	op.s.background.Add(1)
	go func() {
		defer op.s.background.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := op.s.cfg.Breakers.Warm(ctx, []string{ls.id}); err != nil {
			op.s.cfg.Logger.Warn("breaker state not loaded; starting closed", "endpoint", ls.id, "err", err)
		}
		op.mu.Lock()
		defer op.mu.Unlock()
		ls.breakerLoaded = true
		if op.lanes[ls.id] == ls {
			op.pumpLocked(ls, op.s.cfg.Now())
		}
	}()
}

func (op *ownedPartition) endpointIDs() []string {
	op.mu.Lock()
	defer op.mu.Unlock()
	ids := make([]string, 0, len(op.lanes))
	for id := range op.lanes {
		ids = append(ids, id)
	}
	return ids
}

// breakerAllowsLocked asks the endpoint's breaker whether one more attempt
// may start; an open breaker makes the lane wait until its pause ends.
func (op *ownedPartition) breakerAllowsLocked(ls *laneState, now time.Time) bool {
	b := op.s.cfg.Breakers
	if b == nil {
		return true
	}
	d := b.Allow(ls.id, now, ls.lane.MaxConcurrency(), ls.lane.InFlight())
	if !d.Allowed && d.Wait > 0 {
		ls.pausedUntil = now.Add(d.Wait)
		op.waiting[ls] = struct{}{}
	}
	return d.Allowed
}

func (op *ownedPartition) maxConcurrencyOf(id string) int {
	ep, ok := op.s.cfg.Endpoints.Get(id)
	if !ok {
		return endpoint.DefaultMaxConcurrency
	}
	return ep.MaxConcurrency
}

// pumpLocked starts every task the lane allows now.
func (op *ownedPartition) pumpLocked(ls *laneState, now time.Time) {
	if op.stopped {
		return
	}
	ep, ok := op.s.cfg.Endpoints.Get(ls.id)
	deliverable := ok && ep.Status == endpoint.StatusActive
	if deliverable && (ep.Paused || !ls.breakerLoaded) {
		// A paused endpoint starts nothing; maintain pumps it again on
		// resume. An unloaded breaker: warmBreaker pumps once it is loaded.
		return
	}
	due := now
	if !deliverable {
		// Disabled or deleted: every task, retry delays and breaker
		// notwithstanding, goes straight to its dead letter (attempt sends
		// nothing), one per entity at a time so the dead topic keeps order.
		due = farFuture
	}
	for ls.lane.Pending() > 0 && (!deliverable || op.breakerAllowsLocked(ls, now)) {
		t := ls.lane.Next(due)
		if t == nil {
			break
		}
		op.inFlight++
		ls.running[t] = struct{}{}
		op.s.background.Add(1)
		go op.attempt(ls, t)
	}
	if _, ok := ls.lane.NextWakeup(); ok {
		op.waiting[ls] = struct{}{}
	}
}

// attempt makes one HTTP delivery attempt and acts on its outcome.
func (op *ownedPartition) attempt(ls *laneState, t *Task) {
	defer op.s.background.Done()
	w := t.Payload.(*work)
	d := w.d
	if op.skipFinishedCopy(ls, t, w) {
		return
	}
	now := op.s.cfg.Now()
	ep, ok := op.s.cfg.Endpoints.Get(d.EndpointID)
	if reason, detail, undeliverable := undeliverableReason(ep, ok); undeliverable {
		op.endDead(ls, t, reason, detail)
		return
	}
	req, err := op.request(ls, w, ep, now)
	if err != nil {
		op.endDead(ls, t, event.ReasonInvalidDelivery, err.Error())
		return
	}
	res := op.s.cfg.Sender.Send(op.s.attemptCtx, req)
	op.recordAttempt(t, res)
	outcome := deliver.Classify(res.Err)
	op.s.cfg.Metrics.attempt(outcome.String(), res.Duration.Seconds())
	op.logAttempt(d, res, outcome)
	op.settle(ls, t, ep, res, outcome)
}

// recordAttempt counts the attempt on the delivery under the lock: parking
// may encode the same delivery concurrently (as a copy of an in-flight one).
func (op *ownedPartition) recordAttempt(t *Task, res deliver.Result) {
	op.mu.Lock()
	defer op.mu.Unlock()
	d := t.Payload.(*work).d
	d.Attempts++
	t.Attempts = d.Attempts
	if res.Err != nil {
		d.LastError = res.Err.Error()
		st := op.statsLocked(d.EndpointID)
		st.lastError, st.lastErrorAt = d.LastError, op.s.cfg.Now()
	}
}

// skipFinishedCopy ends a parked copy of an in-flight delivery whose
// original has since finished, without sending it again.
func (op *ownedPartition) skipFinishedCopy(ls *laneState, t *Task, w *work) bool {
	if !w.parked {
		return false
	}
	op.mu.Lock()
	defer op.mu.Unlock()
	pl := op.parked[ls.id]
	if pl == nil || !pl.copies[w.src] {
		return false
	}
	delete(pl.copies, w.src)
	ls.lane.Finish(t)
	op.releaseLocked(ls, t)
	op.offsetDoneLocked(ls, t)
	op.afterAttemptLocked(ls)
	return true
}

func (op *ownedPartition) settle(ls *laneState, t *Task, ep endpoint.Endpoint, res deliver.Result, outcome deliver.Outcome) {
	d := t.Payload.(*work).d
	if op.recordHealth(ls, ep, outcome) {
		op.endDead(ls, t, event.ReasonEndpointDisabled, "endpoint failing for longer than the disable threshold")
		return
	}
	switch outcome {
	case deliver.Delivered:
		op.s.cfg.Metrics.ended("delivered")
		op.finish(ls, t)
	case deliver.Gone:
		op.disable(ls, ep, "endpoint answered 410 Gone")
		op.endDead(ls, t, event.ReasonGone, d.LastError)
	case deliver.Dead:
		op.endDead(ls, t, event.ReasonTooLarge, d.LastError)
	default:
		now := op.s.cfg.Now()
		if reason, dead := op.s.cfg.Retry.Exhausted(d.Attempts, d.CreatedAt, now); dead {
			op.endDead(ls, t, reason, d.LastError)
			return
		}
		delay := op.s.cfg.Retry.Delay(d.Attempts, res.RetryAfter, op.s.cfg.Rand)
		op.retry(ls, t, now.Add(delay))
	}
}

// recordHealth feeds the outcome to the endpoint's breaker and disables an
// endpoint that has failed for DisableAfter without one success; it reports
// whether it did. 413 says nothing about the endpoint's health and 410
// disables it by itself, so neither counts.
func (op *ownedPartition) recordHealth(ls *laneState, ep endpoint.Endpoint, outcome deliver.Outcome) bool {
	b := op.s.cfg.Breakers
	if b == nil || (outcome != deliver.Delivered && outcome != deliver.Retry) {
		return false
	}
	now := op.s.cfg.Now()
	state := b.Record(ls.id, outcome == deliver.Delivered, now)
	if state.FailingFor(now) < op.s.cfg.DisableAfter {
		return false
	}
	op.disable(ls, ep, fmt.Sprintf("endpoint failing since %s", state.FailingSince.UTC().Format(time.RFC3339)))
	return true
}

func (op *ownedPartition) logAttempt(d *event.Delivery, res deliver.Result, outcome deliver.Outcome) {
	log := op.s.cfg.Logger
	attrs := []any{
		"endpoint", d.EndpointID, "event", d.EventID, "entity", d.Entity, "revision", d.Revision,
		"attempt", d.Attempts, "status", res.StatusCode, "outcome", outcome.String(),
		"duration_ms", res.Duration.Milliseconds(),
	}
	if res.Err != nil {
		log.Info("delivery attempt failed", append(attrs, "err", res.Err.Error())...)
		return
	}
	log.Debug("delivery attempt", attrs...)
}

// request builds the signed request, reusing the lane's signer while the
// endpoint's secrets stay the same.
func (op *ownedPartition) request(ls *laneState, w *work, ep endpoint.Endpoint, now time.Time) (deliver.Request, error) {
	d := w.d
	if w.body == nil { // only this task's attempt touches it: one attempt in flight per task
		body, err := d.Body()
		if err != nil {
			return deliver.Request{}, err
		}
		w.body = body
	}
	secrets := ep.SigningSecrets(now)
	var err error
	op.mu.Lock()
	signer := ls.signer
	if signer == nil || !slices.Equal(ls.secrets, secrets) {
		signer, err = signing.NewSigner(secrets)
		if err == nil {
			ls.signer, ls.secrets = signer, secrets
		}
	}
	op.mu.Unlock()
	if err != nil {
		return deliver.Request{}, fmt.Errorf("endpoint secrets: %w", err)
	}
	return deliver.Request{URL: ep.URL, MsgID: d.EventID, Timestamp: now, Body: w.body, Signer: signer}, nil
}

// finish ends a delivered task: its offset is done and the entity's next
// task may start.
func (op *ownedPartition) finish(ls *laneState, t *Task) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.noteOutcomeLocked(ls.id, kindDelivered, op.s.cfg.Now())
	ls.lane.Finish(t)
	op.releaseLocked(ls, t)
	op.offsetDoneLocked(ls, t)
	op.afterAttemptLocked(ls)
}

func (op *ownedPartition) retry(ls *laneState, t *Task, notBefore time.Time) {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.noteOutcomeLocked(ls.id, kindFailed, op.s.cfg.Now())
	ls.lane.Retry(t, notBefore)
	delete(ls.running, t)
	op.afterAttemptLocked(ls)
}

// endDead frees the entity at once (a dead delivery is finished for ordering)
// and marks the offset done only when the dead letter is safely in Kafka.
func (op *ownedPartition) endDead(ls *laneState, t *Task, reason, detail string) {
	d := t.Payload.(*work).d
	op.writeDeadLetter(deadWrite{deadLetterOf(d, reason, detail, op.s.cfg.Now()), func() { op.offsetDoneLocked(ls, t) }})
	op.mu.Lock()
	defer op.mu.Unlock()
	op.noteOutcomeLocked(ls.id, kindDead, op.s.cfg.Now())
	ls.lane.Finish(t)
	op.releaseLocked(ls, t)
	op.afterAttemptLocked(ls)
}

// releaseLocked does the bookkeeping of a task leaving its lane: a parked
// window slot frees, and a parked copy of a direct original may be skipped.
func (op *ownedPartition) releaseLocked(ls *laneState, t *Task) {
	delete(ls.running, t)
	w := t.Payload.(*work)
	pl := op.parked[ls.id]
	switch {
	case pl == nil:
	case w.parked:
		pl.inLane--
		op.signalParked()
	default:
		if _, isCopied := pl.copies[t.Offset]; isCopied {
			pl.copies[t.Offset] = true
		}
	}
}

// offsetDoneLocked marks the task's record finished in whichever log holds it.
func (op *ownedPartition) offsetDoneLocked(ls *laneState, t *Task) {
	w := t.Payload.(*work)
	if !w.parked {
		op.tracker.Done(t.Offset)
		return
	}
	if pl := op.parked[ls.id]; pl != nil {
		pl.loaded.Done(t.Offset)
	}
}

// supersededLocked finishes a pending task replaced by a newer revision.
func (op *ownedPartition) supersededLocked(t *Task) {
	ls := op.lanes[t.Payload.(*work).d.EndpointID]
	op.releaseLocked(ls, t)
	op.offsetDoneLocked(ls, t)
	op.noteOutcomeLocked(ls.id, kindSuperseded, op.s.cfg.Now())
	op.s.cfg.Metrics.supersededN(1)
}

func (op *ownedPartition) afterAttemptLocked(ls *laneState) {
	op.inFlight--
	if op.stopped {
		if op.inFlight == 0 {
			close(op.drained)
		}
		return
	}
	op.pumpLocked(ls, op.s.cfg.Now())
	if ls.lane.Idle() && op.parked[ls.id] == nil {
		delete(op.lanes, ls.id)
		delete(op.waiting, ls)
	}
}

func (op *ownedPartition) writeDeadLetter(dw deadWrite) {
	value, err := json.Marshal(&dw.letter)
	if err != nil {
		op.s.cfg.Logger.Error("cannot encode dead letter", "err", err)
		return
	}
	// Stamped with the death time, so that searching the dead topic by
	// time (offsets by timestamp) matches dead_at.
	rec := &kgo.Record{Topic: op.s.cfg.Topics.Dead, Key: []byte(dw.letter.EndpointID), Value: value, Timestamp: dw.letter.DeadAt}
	op.s.background.Add(1)
	op.client.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
		defer op.s.background.Done()
		if err != nil {
			// The offset stays unfinished, so the watermark holds and the
			// delivery is read again after a restart: nothing is lost.
			op.s.cfg.Logger.Error("dead letter write failed", "partition", op.id, "err", err)
			return
		}
		op.s.cfg.Metrics.dead(dw.letter.Reason)
		op.mu.Lock()
		dw.done()
		op.mu.Unlock()
	})
}

// disable marks the endpoint disabled in the config topic (once per lane).
func (op *ownedPartition) disable(ls *laneState, ep endpoint.Endpoint, why string) {
	op.mu.Lock()
	already := ls.disabling
	ls.disabling = true
	op.mu.Unlock()
	if already {
		return
	}
	ep.Status, ep.DisabledReason, ep.UpdatedAt = endpoint.StatusDisabled, why, op.s.cfg.Now().UTC()
	op.s.background.Add(1)
	go func() {
		defer op.s.background.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := op.s.cfg.Endpoints.Put(ctx, ep); err != nil {
			op.s.cfg.Logger.Error("could not disable endpoint", "endpoint", ep.ID, "err", err)
			return
		}
		op.s.cfg.Logger.Warn("endpoint disabled", "endpoint", ep.ID, "tenant", ep.Tenant, "reason", why)
		if n := op.s.cfg.Notifier; n != nil {
			n.EndpointDisabled(ep, why)
		}
	}()
}

// farFuture makes every retry delay due.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// wake restarts lanes whose retry delay has passed.
func (op *ownedPartition) wake(now time.Time) {
	op.mu.Lock()
	defer op.mu.Unlock()
	for ls := range op.waiting {
		if now.Before(ls.pausedUntil) {
			continue // the breaker is open
		}
		at, ok := ls.lane.NextWakeup()
		if !ls.pausedUntil.IsZero() || (ok && !at.After(now)) {
			ls.pausedUntil = time.Time{}
			delete(op.waiting, ls)
			op.pumpLocked(ls, now)
		} else if !ok {
			delete(op.waiting, ls)
		}
	}
}

// maintain applies live config changes (a raised max_concurrency starts
// waiting work without waiting for a completion) and parks every lane that
// cannot keep up: its oldest pending delivery is older than ParkAfter, or
// its endpoint is paused.
func (op *ownedPartition) maintain(now time.Time) {
	op.mu.Lock()
	defer op.mu.Unlock()
	for _, ls := range op.lanes {
		ep, ok := op.s.cfg.Endpoints.Get(ls.id)
		if !ok || ep.Status != endpoint.StatusActive {
			if b := op.s.cfg.Breakers; b != nil && b.Get(ls.id) != (breaker.Breaker{}) {
				b.Reset(ls.id) // re-enabled, it starts with a clean record
			}
			if ls.lane.Pending() > 0 {
				op.pumpLocked(ls, now) // dead-letters the lane's backlog
			}
			continue
		}
		ls.lane.SetMaxConcurrency(ep.MaxConcurrency)
		if op.parked[ls.id] == nil {
			if why := op.parkReason(ls, ep, now); why != "" {
				op.parkLocked(ls, why)
				continue
			}
		}
		if ls.lane.Pending() > 0 {
			op.pumpLocked(ls, now)
		}
	}
}

func (op *ownedPartition) parkReason(ls *laneState, ep endpoint.Endpoint, now time.Time) string {
	switch {
	case ep.Paused:
		return "paused"
	case op.s.cfg.Breakers != nil && op.s.cfg.Breakers.Get(ls.id).State == breaker.Open:
		return "breaker"
	case ls.lane.Pending() == 0:
		return ""
	case ls.lane.Pending() > op.s.cfg.LaneBuffer:
		return "lane_buffer"
	}
	if oldest, ok := ls.lane.OldestEnqueuedAt(); ok && now.Sub(oldest) > op.s.cfg.ParkAfter {
		return "park_after"
	}
	return ""
}

// stop drops every unstarted task (the next owner reads them again) and
// stops new attempts and the parked worker.
func (op *ownedPartition) stop() {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.stopped = true
	for _, ls := range op.lanes {
		ls.lane.DrainUnstarted()
	}
	clear(op.waiting)
	close(op.stopCh)
	if op.inFlight == 0 {
		close(op.drained)
	}
}

// awaitIdle waits for in-flight attempts and the parked loops (appendLoop
// produces every queued append before it exits).
func (op *ownedPartition) awaitIdle(deadline time.Time) bool {
	workersDone := make(chan struct{})
	go func() {
		op.parkedWorkers.Wait()
		close(workersDone)
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for _, ch := range []chan struct{}{op.drained, workersDone} {
		select {
		case <-ch:
		case <-timer.C:
			return false
		}
	}
	return true
}

// uncommittedWatermarks returns the deliveries and parked offsets to commit
// if they moved since the last commit (-1 when unchanged).
func (op *ownedPartition) uncommittedWatermarks() (deliveries, parked int64) {
	op.mu.Lock()
	defer op.mu.Unlock()
	deliveries, parked = -1, -1
	if op.tracker != nil {
		if w := op.tracker.Watermark(); w != op.lastCommitted {
			deliveries = w
		}
	}
	if w := op.parkedCommitOffset(); w != op.lastParkedCommit {
		parked = w
	}
	return deliveries, parked
}

func (op *ownedPartition) committed(deliveries, parked int64) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if deliveries >= 0 {
		op.lastCommitted = deliveries
	}
	if parked >= 0 {
		op.lastParkedCommit = parked
	}
}
