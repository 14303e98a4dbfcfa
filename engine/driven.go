package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/partition"
	"github.com/laneway/laneway/signing"
)

// driven is one owned partition: its partition.Owner and what the stage
// does for it. Every call into the owner goes through do, under mu; the
// effects the owner asked for meanwhile are recorded and carried out after
// the lock is released, so that no Kafka or HTTP call (and no completion
// that calls back in) ever runs under it.
type driven struct {
	s  *DeliveryStage
	id int32
	// member is the group member id the partition was assigned under: a
	// revoke under another one is a loss (see releaseRevoked).
	member string
	// producer is the group client the assignment callback was given. The
	// owner produces from its first step (its takeover record), and the
	// client calls onAssigned as soon as it joins, which may be before
	// NewDeliveryStage has stored it in the stage.
	producer *kgo.Client

	mu    sync.Mutex
	owner *partition.Owner
	fx    recorder
	// produces are the appends and dead letters the owner asked for, in
	// the order it asked (guarded by mu); handing them to the producer is
	// serialised by handing, so that two goroutines carrying out effects
	// never reorder them (the producer keeps the order it is given).
	produces []func()
	handing  sync.Mutex
	idle     chan struct{} // closed once the owner is stopped and idle
	// paused mirrors whether fetching the partition is paused.
	paused bool

	attemptCtx    context.Context // canceled when a revoke gives up waiting
	cancelAttempt context.CancelFunc
	attempts      sync.WaitGroup
}

func newDriven(s *DeliveryStage, p int32, producer *kgo.Client) (*driven, error) {
	d := &driven{s: s, id: p, producer: producer, idle: make(chan struct{})}
	d.attemptCtx, d.cancelAttempt = context.WithCancel(s.ctx)
	owner, err := partition.NewOwner(partition.Config{
		Partition: p, ParkedTopic: s.cfg.Topics.Parked, DeadTopic: s.cfg.Topics.Dead,
		Endpoints: s.cfg.Endpoints, Effects: &d.fx, Clock: clockFunc(s.cfg.Now), Breakers: s.breakersFor(p),
		Rand: s.cfg.Rand, Retry: s.cfg.Retry, DisableAfter: s.cfg.DisableAfter, ParkAfter: s.cfg.ParkAfter,
		LaneBuffer: s.cfg.LaneBuffer, ParkedWindow: s.cfg.ParkedWindow, InstanceID: s.cfg.InstanceID,
		LaneBytes: s.cfg.LaneBytes, ParkedWindowBytes: s.cfg.ParkedWindowBytes, Slots: s.slots, Lease: s.lease,
		Metrics: s.cfg.Metrics.forOwner(p, s.cfg.OnEvent), Logger: s.cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	d.owner = owner
	return d, nil
}

type clockFunc func() time.Time

func (f clockFunc) Now() time.Time { return f() }

// do runs fn on the owner, then carries out the effects it asked for.
func (d *driven) do(fn func(o *partition.Owner)) {
	d.mu.Lock()
	fn(d.owner)
	fx := d.fx.take()
	d.queueProduces(fx)
	if d.owner.Stopped() && d.owner.Idle() {
		select {
		case <-d.idle:
		default:
			close(d.idle)
		}
	}
	d.mu.Unlock()
	d.carryOut(fx)
}

// dispatch decodes fetched records outside the lock and hands them over.
func (d *driven) dispatch(fp kgo.FetchPartition) {
	in := make([]partition.Incoming, len(fp.Records))
	for i, r := range fp.Records {
		dl, err := event.ParseDelivery(r.Value)
		in[i] = partition.Incoming{Record: r, Err: err}
		if err == nil {
			in[i].Delivery = &dl // one allocation each: a slow task must not pin the batch
		}
	}
	d.do(func(o *partition.Owner) { o.Dispatch(in, fp.HighWatermark) })
}

// recorder is the owner's Effects: it records what was asked, for do to
// carry out once the lock is released.
type recorder struct {
	sends    []*partition.Attempt
	appends  []*partition.Append
	reads    []*partition.Read
	deads    []*partition.DeadWrite
	disables []disableReq
	warms    []string
	healths  []string
}

type disableReq struct{ id, reason string }

var _ partition.Effects = (*recorder)(nil)

func (r *recorder) Send(a *partition.Attempt)        { r.sends = append(r.sends, a) }
func (r *recorder) Append(a *partition.Append)       { r.appends = append(r.appends, a) }
func (r *recorder) Read(rd *partition.Read)          { r.reads = append(r.reads, rd) }
func (r *recorder) WriteDead(w *partition.DeadWrite) { r.deads = append(r.deads, w) }
func (r *recorder) Disable(id, reason string) {
	r.disables = append(r.disables, disableReq{id, reason})
}
func (r *recorder) WarmBreaker(id string) { r.warms = append(r.warms, id) }
func (r *recorder) LoadHealth(id string)  { r.healths = append(r.healths, id) }

// take returns what was recorded and starts afresh.
func (r *recorder) take() recorder {
	out := *r
	*r = recorder{}
	return out
}

// carryOut starts the recorded effects. Produces go out in the order the
// owner asked for them (the producer keeps that order per partition).
func (d *driven) carryOut(fx recorder) {
	for _, a := range fx.sends {
		d.attempts.Add(1)
		d.s.background.Add(1)
		d.s.workers.run(func() { d.attempt(a) })
	}
	d.handProduces()
	for _, rd := range fx.reads {
		d.background(func() { d.read(rd) })
	}
	for _, q := range fx.disables {
		d.background(func() { d.disable(q) })
	}
	for _, id := range fx.warms {
		d.background(func() { d.warm(id) })
	}
	for _, id := range fx.healths {
		d.background(func() { d.loadHealth(id) })
	}
}

func (d *driven) background(fn func()) {
	d.s.background.Add(1)
	go func() {
		defer d.s.background.Done()
		fn()
	}()
}

// queueProduces queues, under mu, the produces fx asked for in its order.
func (d *driven) queueProduces(fx recorder) {
	for _, a := range fx.appends {
		d.produces = append(d.produces, func() {
			d.produce(a.Record, func(r *kgo.Record, err error) {
				noteProduceFailure(d.s.cfg.Logger, d.s.cfg.Metrics, produceParked, r, err)
				d.do(func(o *partition.Owner) { o.Appended(a, r.Offset, err) })
			})
		})
	}
	for _, w := range fx.deads {
		d.produces = append(d.produces, func() { d.writeDead(w) })
	}
}

// handProduces hands the queued produces to the producer, in order. Only
// one goroutine hands at a time; one that finds another at it leaves its
// produces to it (they were queued before it tried, and the hander looks
// again after it stops). A promise the producer calls at once comes back
// here on the same goroutine and leaves its produces to the loop too.
func (d *driven) handProduces() {
	for d.handing.TryLock() {
		for {
			d.mu.Lock()
			batch := d.produces
			d.produces = nil
			d.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, produce := range batch {
				produce()
			}
		}
		d.handing.Unlock()
		d.mu.Lock()
		more := len(d.produces) > 0
		d.mu.Unlock()
		if !more {
			return
		}
	}
}

// produce hands one record to the group client; the promise runs once.
func (d *driven) produce(rec *kgo.Record, promise func(*kgo.Record, error)) {
	d.s.background.Add(1)
	d.producer.Produce(d.s.ctx, rec, func(r *kgo.Record, err error) {
		defer d.s.background.Done()
		promise(r, err)
	})
}

func (d *driven) writeDead(w *partition.DeadWrite) {
	value, err := json.Marshal(&w.Letter)
	if err != nil { // a DeadLetter always encodes; kept as a guard
		d.do(func(o *partition.Owner) { o.DeadWritten(w, err) })
		return
	}
	// Stamped with the death time, so that searching the dead topic by
	// time (offsets by timestamp) matches dead_at. The dead topic Laneway
	// creates takes the broker's append time instead (topics.Ensure), a
	// moment after dead_at, and never refuses a fast clock's stamp.
	rec := &kgo.Record{Topic: d.s.cfg.Topics.Dead, Key: []byte(w.Letter.EndpointID), Value: value, Timestamp: w.Letter.DeadAt}
	d.produce(rec, func(r *kgo.Record, err error) {
		noteProduceFailure(d.s.cfg.Logger, d.s.cfg.Metrics, produceDead, r, err)
		d.do(func(o *partition.Owner) { o.DeadWritten(w, err) })
	})
}

// parkedFetchBytes bounds one read of the parked partition.
const parkedFetchBytes = 256 << 10

func (d *driven) read(rd *partition.Read) {
	ctx, cancel := context.WithTimeout(d.s.ctx, 10*time.Second)
	defer cancel()
	res, err := d.s.parkedReader.Read(ctx, d.id, rd.From, parkedFetchBytes)
	out := partition.ReadResult{Records: res.Records, End: res.HighWatermark, LogStart: res.LogStartOffset, Next: res.Next}
	if errors.Is(err, kread.ErrOffsetOutOfRange) {
		out.OutOfRange, err = true, nil
	}
	d.do(func(o *partition.Owner) { o.ReadDone(rd, out, err) })
}

func (d *driven) disable(q disableReq) {
	ctx, cancel := context.WithTimeout(d.s.ctx, 30*time.Second)
	defer cancel()
	ep, changed, err := d.s.cfg.Endpoints.Disable(ctx, q.id, q.reason, d.s.cfg.Now().UTC())
	if errors.Is(err, endpoint.ErrNotFound) {
		err = nil // deleted meanwhile: its deliveries die as endpoint_deleted
	} else if err == nil && changed && d.s.cfg.Notifier != nil {
		d.s.cfg.Notifier.EndpointDisabled(ep, q.reason)
	}
	d.do(func(o *partition.Owner) { o.DisableDone(q.id, err) })
}

// warm loads the breaker a previous owner left in Redis. A Redis that
// cannot answer within 5 s leaves it closed, which is also what a Redis
// flush gives: Redis holds no truth.
func (d *driven) warm(id string) {
	ctx, cancel := context.WithTimeout(d.s.ctx, 5*time.Second)
	defer cancel()
	if err := d.s.cfg.Breakers.Warm(ctx, []string{id}); err != nil {
		d.s.cfg.Logger.Warn("breaker state not loaded; starting closed", "endpoint", id, "err", err)
	}
	d.do(func(o *partition.Owner) { o.BreakerWarmed(id) })
}

func (d *driven) loadHealth(id string) {
	if d.s.cfg.LoadHealth == nil {
		return
	}
	ctx, cancel := context.WithTimeout(d.s.ctx, 5*time.Second)
	defer cancel()
	snap, ok, err := d.s.cfg.LoadHealth(ctx, id)
	if err != nil || !ok {
		return
	}
	d.do(func(o *partition.Owner) { o.HealthLoaded(id, snap) })
}

// attempt makes one HTTP attempt and hands its result back.
func (d *driven) attempt(a *partition.Attempt) {
	defer d.s.background.Done()
	defer d.attempts.Done()
	var res partition.AttemptResult
	body, err := d.body(a)
	switch {
	case d.s.lease.Remaining(d.s.cfg.Now()) < d.s.cfg.AttemptTimeout:
		// The owner allowed it, but it waited for a worker until the lease
		// no longer covers it: it is made again once the lease is renewed.
		d.s.cfg.Metrics.attemptWithheld()
		res.Result = deliver.Result{Err: &deliver.CanceledError{Cause: errLeaseLapsed}}
	case err != nil:
		res.Invalid = err
	case a.Endpoint.Pull():
		res.Result = d.appendToFeed(a, body)
	case a.Endpoint.Batched():
		// The batch runner renders each event itself and needs the whole
		// delivery (its age, and its dead letter's content).
		var rec []byte
		if rec, err = event.MarshalDelivery(a.Delivery); err != nil {
			res.Invalid = err
		} else {
			res.Result = d.appendToFeed(a, rec)
		}
	default:
		var req deliver.Request
		if req, err = d.request(a, body); err != nil {
			res.Invalid = err
		} else {
			res.Result = d.s.cfg.Sender.Send(d.attemptCtx, req)
		}
	}
	d.do(func(o *partition.Owner) { o.AttemptDone(a, res) })
}

// body renders the delivery's body once per delivery (again only if the
// endpoint's payload setting changed).
func (d *driven) body(a *partition.Attempt) ([]byte, error) {
	w := a.Work()
	if thin := a.Endpoint.Thin(); w.Body == nil || w.BodyThin != thin {
		body, err := a.Delivery.Render(thin)
		if err != nil {
			return nil, err
		}
		w.Body, w.BodyThin = body, thin
	}
	return w.Body, nil
}

// request builds the signed request.
func (d *driven) request(a *partition.Attempt, body []byte) (deliver.Request, error) {
	signer, err := d.s.signers.get(a.Endpoint.ID, a.Endpoint.SigningSecrets(a.Now))
	if err != nil {
		return deliver.Request{}, fmt.Errorf("endpoint secrets: %w", err)
	}
	return deliver.Request{URL: a.Endpoint.URL, MsgID: a.Delivery.EventID, Timestamp: a.Now, Body: body, Signer: signer}, nil
}

// appendToFeed is a pull endpoint's attempt: the append to its feed,
// keyed by entity.
func (d *driven) appendToFeed(a *partition.Attempt, body []byte) deliver.Result {
	if d.s.cfg.Feed == nil {
		return deliver.Result{Err: &deliver.FeedError{Err: errors.New("this instance has no feed writer")}}
	}
	start := d.s.cfg.Now()
	topic := d.s.cfg.Topics.Feed(a.Endpoint.ID)
	if a.Endpoint.Batched() {
		topic = d.s.cfg.Topics.BatchFeed(a.Endpoint.ID)
	}
	// An append has no HTTP timeout: the lease bounds it, so that franz-go
	// issues no retry of it once the next owner may be appending.
	ctx, cancel := context.WithDeadlineCause(d.attemptCtx, d.s.lease.Until(), errLeaseLapsed)
	defer cancel()
	err := d.s.cfg.Feed.Append(ctx, topic, a.Delivery.Entity, body)
	res := deliver.Result{Duration: d.s.cfg.Now().Sub(start)}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		res.Err = &deliver.CanceledError{Cause: context.Cause(ctx)}
	default:
		res.Err = &deliver.FeedError{Err: err}
	}
	return res
}

// awaitIdle waits until the stopped owner has nothing out or deadline (a
// deadline already past: a lost partition's). Attempts still running then
// are canceled: they end as Canceled, counted nowhere, and the next owner
// makes them again.
func (d *driven) awaitIdle(deadline time.Time) {
	select {
	case <-d.idle:
		return
	default:
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-d.idle:
		return
	case <-timer.C:
	}
	d.s.cfg.Logger.Warn("attempts or produces still out at the release deadline; canceling attempts", "partition", d.id)
	d.cancelAttempt()
	// A canceled HTTP attempt returns at once; a feed append once no
	// request carrying it is still out (franz-go cannot take back what a
	// broker may have written), so that none lands after the next owner's.
	d.attempts.Wait()
}

// pauseFetch pauses fetching the partition (at assignment, until the
// owner has read its parked partition).
func (d *driven) pauseFetch(cl *kgo.Client) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cl.PauseFetchPartitions(map[string][]int32{d.s.cfg.Topics.Deliveries: {d.id}})
	d.paused = true
}

func (d *driven) resumeFetch(cl *kgo.Client) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.paused {
		cl.ResumeFetchPartitions(map[string][]int32{d.s.cfg.Topics.Deliveries: {d.id}})
		d.paused = false
	}
}

// syncFetchPause pauses or resumes fetching as the owner's backpressure says.
func (d *driven) syncFetchPause(cl *kgo.Client) {
	d.mu.Lock()
	defer d.mu.Unlock()
	want := d.owner.Backpressured() && !d.owner.Stopped()
	if want == d.paused {
		return
	}
	parts := map[string][]int32{d.s.cfg.Topics.Deliveries: {d.id}}
	if want {
		cl.PauseFetchPartitions(parts)
	} else {
		cl.ResumeFetchPartitions(parts)
	}
	d.paused = want
}

// signerCache keeps one signer per endpoint while its secrets stay the same.
type signerCache struct {
	mu sync.Mutex
	m  map[string]cachedSigner
}

type cachedSigner struct {
	secrets []string
	signer  *signing.Signer
}

func (c *signerCache) get(endpointID string, secrets []string) (*signing.Signer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cs, ok := c.m[endpointID]; ok && slices.Equal(cs.secrets, secrets) {
		return cs.signer, nil
	}
	signer, err := signing.NewSigner(secrets)
	if err != nil {
		return nil, err
	}
	if c.m == nil {
		c.m = map[string]cachedSigner{}
	}
	c.m[endpointID] = cachedSigner{secrets: secrets, signer: signer}
	return signer, nil
}
