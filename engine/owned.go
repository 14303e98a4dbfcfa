package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/endpoint"
	"github.com/laneway/laneway/event"
	"github.com/laneway/laneway/partition"
	"github.com/laneway/laneway/signing"
)

// ownedPartition is one deliveries partition while this instance owns it:
// its offset tracker and the lanes of the endpoints keyed to it. Its mutex
// guards everything below it; HTTP attempts and Kafka produces run outside
// the lock.
type ownedPartition struct {
	s  *DeliveryStage
	id int32

	mu            sync.Mutex
	tracker       *partition.Tracker // nil until the first record arrives
	highWatermark int64
	lastCommitted int64
	lanes         map[string]*laneState
	waiting       map[*laneState]struct{} // lanes with a head waiting on a retry delay
	stopped       bool
	inFlight      int
	drained       chan struct{} // closed once stopped with nothing in flight
}

// laneState is a lane plus what delivering to its endpoint needs.
type laneState struct {
	id        string
	lane      *Lane
	signer    *signing.Signer
	secrets   []string // the secrets signer was built from
	disabling bool     // a disable is already being written
}

func newOwnedPartition(s *DeliveryStage, id int32) *ownedPartition {
	return &ownedPartition{
		s: s, id: id, lastCommitted: -1,
		lanes: map[string]*laneState{}, waiting: map[*laneState]struct{}{},
		drained: make(chan struct{}),
	}
}

// deadWrite is a dead letter to produce once the partition lock is released.
type deadWrite struct {
	offset int64
	letter event.DeadLetter
}

// dispatch hands freshly fetched records to their lanes.
func (op *ownedPartition) dispatch(fp kgo.FetchPartition) {
	now := op.s.cfg.Now()
	var dead []deadWrite
	op.mu.Lock()
	if op.stopped {
		op.mu.Unlock()
		return
	}
	op.highWatermark = fp.HighWatermark
	for _, r := range fp.Records {
		if op.tracker == nil {
			op.tracker = partition.NewTracker(r.Offset)
		}
		op.tracker.Add(r.Offset, now)
		if dw, ok := op.routeLocked(r, now); !ok {
			dead = append(dead, dw)
		}
	}
	op.mu.Unlock()
	for _, dw := range dead {
		op.writeDeadLetter(dw)
	}
}

// routeLocked pushes a record to its lane, or returns the dead letter it
// becomes when it cannot be delivered at all.
func (op *ownedPartition) routeLocked(r *kgo.Record, now time.Time) (deadWrite, bool) {
	d, err := event.ParseDelivery(r.Value)
	if err != nil {
		return deadWrite{r.Offset, event.DeadLetter{
			ID: fmt.Sprintf("%s-%d-%d", r.Topic, r.Partition, r.Offset), Reason: event.ReasonInvalidDelivery,
			Detail: err.Error(), DeadAt: now.UTC(), EndpointID: string(r.Key), Raw: r.Value,
			Source: fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset),
		}}, false
	}
	ep, ok := op.s.cfg.Endpoints.Get(d.EndpointID)
	if reason, detail, undeliverable := undeliverableReason(ep, ok); undeliverable {
		return deadWrite{r.Offset, deadLetterOf(&d, reason, detail, now)}, false
	}
	ls := op.laneLocked(d.EndpointID, ep.MaxConcurrency)
	t := &Task{
		Offset: r.Offset, Partition: r.Partition, Entity: d.Entity, Revision: d.Revision,
		Coalesce: d.Coalesce, NotBefore: d.NotBefore, EnqueuedAt: now, Attempts: d.Attempts, Payload: &d,
	}
	superseded := ls.lane.Push(t)
	for _, old := range superseded {
		op.tracker.Done(old.Offset)
	}
	op.s.cfg.Metrics.supersededN(len(superseded))
	op.pumpLocked(ls, now)
	return deadWrite{}, true
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
		ls = &laneState{id: id, lane: NewLane(id, maxConcurrency)}
		op.lanes[id] = ls
	}
	return ls
}

// pumpLocked starts every task the lane allows now.
func (op *ownedPartition) pumpLocked(ls *laneState, now time.Time) {
	if op.stopped {
		return
	}
	for t := ls.lane.Next(now); t != nil; t = ls.lane.Next(now) {
		op.inFlight++
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
	d := t.Payload.(*event.Delivery)
	now := op.s.cfg.Now()
	ep, ok := op.s.cfg.Endpoints.Get(d.EndpointID)
	if reason, detail, undeliverable := undeliverableReason(ep, ok); undeliverable {
		op.endDead(ls, t, reason, detail)
		return
	}
	req, err := op.request(ls, d, ep, now)
	if err != nil {
		op.endDead(ls, t, event.ReasonInvalidDelivery, err.Error())
		return
	}
	res := op.s.cfg.Sender.Send(op.s.attemptCtx, req)
	d.Attempts++
	t.Attempts = d.Attempts
	outcome := deliver.Classify(res.Err)
	op.s.cfg.Metrics.attempt(outcome.String(), res.Duration.Seconds())
	op.logAttempt(d, res, outcome)
	if res.Err != nil {
		d.LastError = res.Err.Error()
	}
	op.settle(ls, t, ep, res, outcome)
}

func (op *ownedPartition) settle(ls *laneState, t *Task, ep endpoint.Endpoint, res deliver.Result, outcome deliver.Outcome) {
	d := t.Payload.(*event.Delivery)
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
func (op *ownedPartition) request(ls *laneState, d *event.Delivery, ep endpoint.Endpoint, now time.Time) (deliver.Request, error) {
	body, err := d.Body()
	if err != nil {
		return deliver.Request{}, err
	}
	secrets := ep.SigningSecrets(now)
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
	return deliver.Request{URL: ep.URL, MsgID: d.EventID, Timestamp: now, Body: body, Signer: signer}, nil
}

// finish ends a delivered task: its offset is done and the entity's next
// task may start.
func (op *ownedPartition) finish(ls *laneState, t *Task) {
	op.mu.Lock()
	defer op.mu.Unlock()
	ls.lane.Finish(t)
	op.tracker.Done(t.Offset)
	op.afterAttemptLocked(ls)
}

func (op *ownedPartition) retry(ls *laneState, t *Task, notBefore time.Time) {
	op.mu.Lock()
	defer op.mu.Unlock()
	ls.lane.Retry(t, notBefore)
	op.afterAttemptLocked(ls)
}

// endDead frees the entity at once (a dead delivery is finished for ordering)
// and marks the offset done only when the dead letter is safely in Kafka.
func (op *ownedPartition) endDead(ls *laneState, t *Task, reason, detail string) {
	d := t.Payload.(*event.Delivery)
	op.writeDeadLetter(deadWrite{t.Offset, deadLetterOf(d, reason, detail, op.s.cfg.Now())})
	op.mu.Lock()
	defer op.mu.Unlock()
	ls.lane.Finish(t)
	op.afterAttemptLocked(ls)
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
	if ls.lane.Idle() {
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
	rec := &kgo.Record{Topic: op.s.cfg.Topics.Dead, Key: []byte(dw.letter.EndpointID), Value: value}
	op.s.background.Add(1)
	op.s.client.Produce(context.Background(), rec, func(_ *kgo.Record, err error) {
		defer op.s.background.Done()
		if err != nil {
			// The offset stays unfinished, so the watermark holds and the
			// delivery is read again after a restart: nothing is lost.
			op.s.cfg.Logger.Error("dead letter write failed", "partition", op.id, "offset", dw.offset, "err", err)
			return
		}
		op.s.cfg.Metrics.dead(dw.letter.Reason)
		op.mu.Lock()
		op.tracker.Done(dw.offset)
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
	}()
}

// wake restarts lanes whose retry delay has passed.
func (op *ownedPartition) wake(now time.Time) {
	op.mu.Lock()
	defer op.mu.Unlock()
	for ls := range op.waiting {
		at, ok := ls.lane.NextWakeup()
		if !ok {
			delete(op.waiting, ls)
			continue
		}
		if !at.After(now) {
			delete(op.waiting, ls)
			op.pumpLocked(ls, now)
		}
	}
}

// refreshLimits applies live max_concurrency changes to lanes with work
// waiting, so a raised limit takes effect without waiting for a completion.
func (op *ownedPartition) refreshLimits(now time.Time) {
	op.mu.Lock()
	defer op.mu.Unlock()
	for _, ls := range op.lanes {
		ep, ok := op.s.cfg.Endpoints.Get(ls.id)
		if !ok {
			continue
		}
		ls.lane.SetMaxConcurrency(ep.MaxConcurrency)
		if ls.lane.Pending() > 0 {
			op.pumpLocked(ls, now)
		}
	}
}

// stop drops every unstarted task (the next owner reads them again) and
// stops new attempts.
func (op *ownedPartition) stop() {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.stopped = true
	for _, ls := range op.lanes {
		ls.lane.DrainUnstarted()
	}
	clear(op.waiting)
	if op.inFlight == 0 {
		close(op.drained)
	}
}

func (op *ownedPartition) awaitIdle(deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-op.drained:
		return true
	case <-timer.C:
		return false
	}
}

// uncommittedWatermark returns the watermark if it moved since the last commit.
func (op *ownedPartition) uncommittedWatermark() (int64, bool) {
	op.mu.Lock()
	defer op.mu.Unlock()
	if op.tracker == nil {
		return 0, false
	}
	w := op.tracker.Watermark()
	return w, w != op.lastCommitted
}

func (op *ownedPartition) committed(offset int64) {
	op.mu.Lock()
	op.lastCommitted = offset
	op.mu.Unlock()
}
