package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/kafka/offsets"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/signing"
)

// runner sends one batch endpoint's feed while this instance owns the
// endpoint's deliveries partition.
type runner struct {
	m     *Manager
	id    string
	topic string
	part  int32 // the endpoint's deliveries partition
	kr    *kread.Reader

	cancel   context.CancelFunc
	done     chan struct{}
	stopping chan struct{} // closed by stopSoon: end after the batch in flight
	stopOnce sync.Once
}

// stopSoon asks the runner to end once its batch in flight has its
// outcome, without canceling that batch.
func (r *runner) stopSoon() { r.stopOnce.Do(func() { close(r.stopping) }) }

// stopped reports whether stopSoon was called.
func (r *runner) stopped() bool {
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

func (r *runner) run(ctx context.Context) {
	defer close(r.done)
	core, ok := r.begin(ctx)
	for ok && ctx.Err() == nil && !r.stopped() {
		ok = r.step(ctx, core)
	}
}

// begin reads the committed cursor and loads the endpoint's breaker,
// retrying until both are read or the runner is stopped.
func (r *runner) begin(ctx context.Context) (*Core, bool) {
	warmCtx, cancel := context.WithTimeout(ctx, 5*time.Second) // Redis holds no truth: never wait long on it
	err := r.m.cfg.Breakers.Warm(warmCtx, []string{r.id})
	cancel()
	if err != nil {
		r.m.log.Warn("batch: breaker state not loaded; starting closed", "endpoint", r.id, "err", err)
	}
	for attempt := 1; ; attempt++ {
		from, err := r.cursor(ctx)
		if err == nil {
			// A committed position marks the topic as this Laneway's, for
			// the orphan scan (Manager.orphans).
			err = r.commit(ctx, from)
		}
		if err == nil {
			r.m.log.Info("batch runner started", "endpoint", r.id, "partition", r.part, "cursor", from)
			return NewCore(from, r.m.cfg.Retry, r.m.cfg.Rand), true
		}
		r.m.log.Warn("batch: reading the cursor failed; retrying", "endpoint", r.id, "err", err)
		if !r.sleep(ctx, backoff(attempt)) {
			return nil, false
		}
	}
}

// cursor is the committed position, or the feed's start.
func (r *runner) cursor(ctx context.Context) (int64, error) {
	at, _, err := offsets.CommittedOrStart(ctx, kadm.NewClient(r.m.cfg.Client), r.m.cfg.Group, r.topic, 0)
	return at, err
}

// step does one thing: drain, wait, read or send. It returns false when
// the runner is done.
func (r *runner) step(ctx context.Context, core *Core) bool {
	ep, exists := r.m.cfg.Endpoints.Get(r.id)
	if !exists || ep.Status != endpoint.StatusActive {
		return r.drain(ctx, core, exists)
	}
	if !ep.Batched() {
		return r.sleep(ctx, r.m.cfg.Recheck)
	}
	limits := limitsOf(ep)
	caughtUp, err := r.fill(ctx, core, limits, ep.Thin())
	if err != nil {
		r.m.log.Warn("batch: reading the feed failed; retrying", "endpoint", r.id, "err", err)
		return r.sleep(ctx, time.Second)
	}
	now := r.m.cfg.Now()
	if res := core.Expire(now); len(res.Dead) > 0 {
		return r.apply(ctx, core, res, "")
	}
	if ep.Paused {
		return r.sleep(ctx, r.m.cfg.Recheck) // only max_age acts on a paused endpoint
	}
	if d := r.m.cfg.Breakers.Allow(r.id, now, 1, 0); !d.Allowed {
		return r.sleep(ctx, max(d.Wait, 100*time.Millisecond))
	}
	batch, wake := core.Next(now, limits, caughtUp)
	if batch == nil {
		return r.await(ctx, core, wake, caughtUp)
	}
	return r.deliver(ctx, core, ep, batch)
}

func limitsOf(ep endpoint.Endpoint) Limits {
	n, b, w := ep.Batch.Sizes()
	return Limits{MaxEvents: n, MaxBytes: b, MaxWait: w}
}

// fill reads the feed while the core has room, and reports whether it
// read to the end.
func (r *runner) fill(ctx context.Context, core *Core, l Limits, thin bool) (bool, error) {
	for core.WantsMore(l) {
		from := core.ReadFrom()
		res, err := r.kr.Read(ctx, 0, from, int32(min(l.MaxBytes*2, 8<<20)))
		switch {
		case errors.Is(err, kread.ErrOffsetOutOfRange):
			return false, r.skipExpired(ctx, core, from)
		case err != nil:
			return false, err
		}
		evs, err := r.events(ctx, res.Records, thin)
		if err != nil {
			return false, err
		}
		core.Add(evs, res.Next)
		if res.Next >= res.HighWatermark {
			return true, nil
		}
	}
	return false, nil
}

// skipExpired moves past events the feed's retention deleted before they
// were sent. checkRetention in the app makes the retention exceed max_age,
// so it takes an operator shortening a feed's retention by hand; it is
// logged as the loss it is.
func (r *runner) skipExpired(ctx context.Context, core *Core, from int64) error {
	starts, err := kadm.NewClient(r.m.cfg.Client).ListStartOffsets(ctx, r.topic)
	if err != nil {
		return err
	}
	s, ok := starts.Lookup(r.topic, 0)
	if !ok || s.Err != nil || s.Offset <= from {
		return fmt.Errorf("offset %d is out of the feed's range", from)
	}
	r.m.log.Error("batch: events of the feed expired before they were sent", "endpoint", r.id, "from", from, "to", s.Offset)
	core.Add(nil, s.Offset)
	return nil
}

// events turns feed records into batch events. A record that is not a
// delivery (the feed is Laneway's own, so only a tampered one) becomes a
// dead letter at once.
func (r *runner) events(ctx context.Context, recs []*kgo.Record, thin bool) ([]Event, error) {
	out := make([]Event, 0, len(recs))
	for _, rec := range recs {
		d, err := event.ParseDelivery(rec.Value)
		var body []byte
		if err == nil {
			body, err = d.Render(thin)
		}
		if err != nil {
			if werr := r.writeInvalid(ctx, rec, err); werr != nil {
				return nil, werr
			}
			continue
		}
		seq := d.Sequence
		if seq == 0 {
			seq = rec.Offset + 1
		}
		d.Sequence = seq
		item := append(strconv.AppendInt([]byte(`{"sequence":`), seq, 10), ',')
		out = append(out, Event{Offset: rec.Offset, Sequence: seq, AppendedAt: rec.Timestamp, Delivery: &d, Item: append(item, body[1:]...)})
	}
	return out, nil
}

func (r *runner) writeInvalid(ctx context.Context, rec *kgo.Record, cause error) error {
	dl := event.UnreadableRecord(event.ReasonInvalidDelivery, r.topic, 0, rec.Offset, rec.Value, r.id, cause, r.m.cfg.Now())
	return r.m.cfg.DeadLetters.Write(ctx, []event.DeadLetter{dl})
}

// await waits for more of the feed (when read to its end), wake, or the
// next look at the endpoint's config, whichever is first.
func (r *runner) await(ctx context.Context, core *Core, wake time.Time, caughtUp bool) bool {
	d := r.m.cfg.Recheck
	if !wake.IsZero() {
		d = min(d, max(wake.Sub(r.m.cfg.Now()), time.Millisecond))
	}
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	go func() {
		select {
		case <-r.stopping:
			cancel()
		case <-wctx.Done():
		}
	}()
	if caughtUp {
		r.m.cfg.Watcher.Wait(wctx, r.topic, core.ReadFrom())
	} else {
		<-wctx.Done()
	}
	return ctx.Err() == nil
}

// deliver sends a batch and acts on its outcome.
func (r *runner) deliver(ctx context.Context, core *Core, ep endpoint.Endpoint, batch []Event) bool {
	res := r.send(ctx, ep, batch)
	outcome := deliver.Classify(res.Err)
	if outcome == deliver.Canceled || ctx.Err() != nil {
		core.Done(deliver.Canceled, 0, r.m.cfg.Now())
		return false
	}
	now := r.m.cfg.Now()
	if outcome == deliver.Delivered || outcome == deliver.Retry {
		state := r.m.cfg.Breakers.Record(r.id, outcome == deliver.Delivered, now)
		if state.FailingFor(now) >= r.m.cfg.DisableAfter {
			r.disable(ctx, fmt.Sprintf("endpoint failing since %s", state.FailingSince.UTC().Format(time.RFC3339)))
		}
	}
	r.m.metrics.batch(outcome.String(), len(batch), res.Duration)
	if res.Err != nil {
		r.m.log.Info("batch attempt failed", "endpoint", r.id, "events", len(batch), "first_sequence", batch[0].Sequence,
			"outcome", outcome.String(), "err", res.Err)
	}
	lastErr := ""
	if res.Err != nil {
		lastErr = res.Err.Error()
	}
	return r.apply(ctx, core, core.Done(outcome, res.RetryAfter, now), lastErr)
}

// send signs and POSTs one batch. Its webhook-id names the batch's first
// and last sequence: stable across the batch's retries, and new for each
// half of a split one.
func (r *runner) send(ctx context.Context, ep endpoint.Endpoint, batch []Event) deliver.Result {
	signer, err := signing.NewSigner(ep.SigningSecrets(r.m.cfg.Now()))
	if err != nil {
		return deliver.Result{Err: &deliver.RequestError{Reason: "endpoint secrets: " + err.Error()}}
	}
	size := bodyOverhead + len(batch)
	for _, e := range batch {
		size += len(e.Item)
	}
	body := make([]byte, 0, size)
	body = append(body, `{"batch":[`...)
	for i, e := range batch {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, e.Item...)
	}
	body = append(body, "]}"...)
	id := fmt.Sprintf("batch_%s_%d_%d", r.id, batch[0].Sequence, batch[len(batch)-1].Sequence)
	return r.m.cfg.Sender.Send(ctx, deliver.Request{URL: ep.URL, MsgID: id, Timestamp: r.m.cfg.Now(), Body: body, Signer: signer})
}

// apply writes the dead letters an outcome made, disables the endpoint on
// a 410, then commits the cursor: the cursor never passes an event whose
// dead letter is not in Kafka.
func (r *runner) apply(ctx context.Context, core *Core, res Result, lastErr string) bool {
	if len(res.Dead) > 0 {
		letters := make([]event.DeadLetter, len(res.Dead))
		now := r.m.cfg.Now().UTC()
		for i, e := range res.Dead {
			d := *e.Delivery
			d.Attempts += res.Attempts
			if lastErr != "" {
				d.LastError = lastErr
			}
			letters[i] = event.DeadLetter{ID: d.EventID + ":" + d.EndpointID, Reason: res.Reason, Detail: lastErr,
				DeadAt: now, EndpointID: r.id, Delivery: &d}
		}
		if !r.retryUntil(ctx, "writing dead letters", func() error { return r.m.cfg.DeadLetters.Write(ctx, letters) }) {
			return false
		}
		if r.m.cfg.OnDead != nil {
			r.m.cfg.OnDead(res.Reason, len(letters))
		}
	}
	if res.Disable {
		r.disable(ctx, "endpoint answered 410 Gone")
	}
	if len(res.Delivered)+len(res.Dead) == 0 {
		return true
	}
	return r.retryUntil(ctx, "committing the cursor", func() error { return r.commit(ctx, core.Cursor()) })
}

// disable marks the endpoint disabled, resets its breaker for the day it
// is enabled again, and tells the operator, as the delivery stage does.
// The runner then drains its backlog into dead letters (endpoint_disabled).
func (r *runner) disable(ctx context.Context, reason string) {
	ep, changed, err := r.m.cfg.Endpoints.Disable(ctx, r.id, reason, r.m.cfg.Now())
	if err != nil {
		r.m.log.Error("batch: disabling the endpoint failed", "endpoint", r.id, "reason", reason, "err", err)
		return
	}
	r.m.cfg.Breakers.Reset(r.id)
	if changed {
		r.m.log.Warn("batch endpoint disabled", "endpoint", r.id, "reason", reason)
		if r.m.cfg.Notifier != nil {
			r.m.cfg.Notifier.EndpointDisabled(ep, reason)
		}
	}
}

// commit stores the cursor in the batch group.
func (r *runner) commit(ctx context.Context, at int64) error {
	return offsets.Commit(ctx, kadm.NewClient(r.m.cfg.Client), r.m.cfg.Group, r.topic, 0, at)
}

// drain ends what the feed holds as dead letters once the endpoint is
// disabled or deleted (the owner sends it nothing new then); a deleted
// endpoint's feed and cursor are removed once drained.
func (r *runner) drain(ctx context.Context, core *Core, exists bool) bool {
	reason := event.ReasonEndpointDisabled
	if !exists {
		reason = event.ReasonEndpointDeleted
	}
	caughtUp, err := r.fill(ctx, core, Limits{MaxEvents: endpoint.DefaultBatchMaxEvents, MaxBytes: endpoint.DefaultBatchMaxBytes}, false)
	if err != nil {
		if !exists && errors.Is(err, kerr.UnknownTopicOrPartition) {
			return false // removed already
		}
		return r.sleep(ctx, time.Second)
	}
	if len(core.Pending()) > 0 {
		return r.apply(ctx, core, core.Drain(reason), "")
	}
	if caughtUp && !exists {
		r.m.removeFeed(ctx, r.id, r.topic)
		return false
	}
	return r.sleep(ctx, r.m.cfg.Recheck)
}

// retryUntil runs fn until it succeeds or the runner is stopped.
func (r *runner) retryUntil(ctx context.Context, what string, fn func() error) bool {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return true
		}
		r.m.log.Warn("batch: "+what+" failed; retrying", "endpoint", r.id, "err", err)
		if !r.sleep(ctx, backoff(attempt)) {
			return false
		}
	}
}

// sleep waits d, and reports false when the runner is to end first.
func (r *runner) sleep(ctx context.Context, d time.Duration) bool {
	return timing.SleepOr(ctx, r.stopping, d)
}

func backoff(attempt int) time.Duration {
	return min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)
}
