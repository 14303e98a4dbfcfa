package main

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/testkit/benchrecv"
	"github.com/laneway/laneway/internal/testkit/poll"
)

// newProducer is a producer as an application publishing events would
// configure it: acks from all in-sync replicas, a short linger for batching.
// Compression is off so that the CPU measured is Laneway's, not snappy's.
func newProducer(brokers []string, topic string, linger time.Duration) (*kgo.Client, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(linger),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
	)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	return cl, nil
}

// warmup delivers one event per tenant and waits for all of them, so that
// group joins and first connections happen before the clock starts.
func warmup(ctx context.Context, cl *kgo.Client, recv *benchrecv.Receiver, sched schedule, reg prometheus.Gatherer) (time.Duration, error) {
	start := time.Now()
	recs := make([]*kgo.Record, 0, sched.tenants)
	for t := range sched.tenants {
		recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "warmup:%d", t), Value: sched.warmupValue(t, time.Now())})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return 0, fmt.Errorf("warmup publish: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	want := int64(sched.warmupDeliveries())
	if err := waitUntil(ctx, func() bool { return recv.Unmatched() >= want }); err != nil {
		c := readCounters(reg)
		return 0, fmt.Errorf("warmup: %d of %d deliveries arrived (laneway fanned out %.0f, made %.0f attempts, %.0f failed): %w",
			recv.Unmatched(), want, c.FannedOut, c.Attempts, c.FailedAttempts, err)
	}
	// The receiver counts a delivery before Laneway records its attempt:
	// let the metrics catch up so the measured phase starts from settled
	// counters (a few extra attempts otherwise leak into it).
	settled := func() bool { return readCounters(reg).Attempts >= float64(want) }
	settleCtx, cancelSettle := context.WithTimeout(ctx, 5*time.Second)
	defer cancelSettle()
	_ = waitUntil(settleCtx, settled) // best effort: the counters are informational
	return time.Since(start), nil
}

// published is what publish did.
type published struct {
	start, end time.Time
	at         []int64 // per event: occurred_at in Unix nanoseconds
	acked      atomic.Int64
}

// publish produces every event of the schedule, paced to rate events/s if
// rate > 0, and returns once all are acknowledged. Each event's occurred_at
// is its publish time, so receipt time − occurred_at is the latency.
func publish(ctx context.Context, cl *kgo.Client, sched schedule, rate float64, p *published) error {
	var mu sync.Mutex
	var produceErr error
	done := func(_ *kgo.Record, err error) {
		if err == nil {
			p.acked.Add(1)
			return
		}
		mu.Lock()
		produceErr = cmp.Or(produceErr, err)
		mu.Unlock()
	}
	p.start = time.Now()
	for seq := range sched.events {
		if err := pace(ctx, p.start, seq, rate); err != nil {
			return err
		}
		now := time.Now()
		p.at[seq] = now.UnixNano()
		cl.Produce(ctx, &kgo.Record{Key: sched.entityKey(seq), Value: sched.eventValue(seq, now)}, done)
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("publish: %w", err)
	}
	p.end = time.Now()
	mu.Lock()
	defer mu.Unlock()
	if produceErr != nil {
		return fmt.Errorf("publish: %w", produceErr)
	}
	return nil
}

// pace sleeps until event seq is due at rate events/s.
func pace(ctx context.Context, start time.Time, seq int, rate float64) error {
	if rate <= 0 || !timing.Sleep(ctx, time.Until(start.Add(time.Duration(float64(seq)/rate*float64(time.Second))))) {
		return ctx.Err()
	}
	return nil
}

// waitUntil polls cond until it holds or ctx ends. Polling is precise enough:
// the receiver timestamps every delivery itself, so the poll interval does
// not enter any figure.
func waitUntil(ctx context.Context, cond func() bool) error {
	return poll.Until(ctx, 5*time.Millisecond, cond)
}
