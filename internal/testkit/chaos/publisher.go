package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

// Event types the publisher uses: state events coalesce, facts never do.
const (
	TypeState = "order.updated"    // coalesce: true
	TypeFact  = "payment.captured" // coalesce: false
)

// Publisher publishes a steady stream of events straight to the events
// topic, as a producing application would (acks from all in-sync replicas,
// idempotent, keyed by entity), with increasing revisions per entity and a
// mix of state and fact events. Every publish is appended to the accepted
// log (NDJSON of ordercheck.Accepted) when Kafka acknowledges it, with its
// partition and offset, or with its error when it failed.
type Publisher struct {
	cl       *kgo.Client
	run      string
	entities int
	tenants  int
	rnd      *rand.Rand
	revs     []int64
	// statesOnly publishes state events only (no facts).
	statesOnly bool

	acked, failed atomic.Int64

	mu       sync.Mutex
	excluded map[int]bool // entities no longer published
	log      *lineLog
	accepted []ordercheck.Accepted
	lastAck  time.Time
}

// NewPublisher produces to topic on brokers; run prefixes the event ids.
// Entity n belongs to tenant "t<n mod tenants>".
func NewPublisher(brokers []string, topic, run string, entities, tenants int, seed uint64, logPath string) (*Publisher, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(5*time.Millisecond),
		// Records are retried without limit by default; a restarting broker
		// may also answer "unknown topic" for a moment: wait that out too.
		kgo.UnknownTopicRetries(-1),
	)
	if err != nil {
		return nil, err
	}
	log, err := createLineLog(logPath)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return &Publisher{
		cl: cl, run: run, entities: entities, tenants: tenants, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		revs: make([]int64, entities), log: log,
	}, nil
}

// StatesOnly makes every event from now on a state event (coalesce: true).
// Call it before Run.
func (p *Publisher) StatesOnly() { p.statesOnly = true }

// Exclude stops publishing the entities named (as in the events: "order:N"),
// so that their last revision stays the one already published.
func (p *Publisher) Exclude(entities ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.excluded == nil {
		p.excluded = map[int]bool{}
	}
	for _, e := range entities {
		var n int
		if _, err := fmt.Sscanf(e, "order:%d", &n); err == nil {
			p.excluded[n] = true
		}
	}
}

// Tenant of entity n.
func (p *Publisher) Tenant(n int) string { return fmt.Sprintf("t%d", n%p.tenants) }

// Run publishes rate events/s until stop is closed or ctx ends, then waits
// for every publish to be acknowledged (or to fail) and returns how many it
// started.
func (p *Publisher) Run(ctx context.Context, rate float64, stop <-chan struct{}) (int, error) {
	start := time.Now()
	n := 0
	for ; ; n++ {
		due := start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
		if wait := time.Until(due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-stop:
				t.Stop()
				return n, p.flush(ctx)
			case <-ctx.Done():
				t.Stop()
				return n, p.flush(ctx)
			}
		} else {
			select {
			case <-stop:
				return n, p.flush(ctx)
			case <-ctx.Done():
				return n, p.flush(ctx)
			default:
			}
		}
		p.publishOne(ctx, n)
	}
}

func (p *Publisher) flush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
	defer cancel()
	return p.cl.Flush(ctx)
}

func (p *Publisher) publishOne(ctx context.Context, n int) {
	e := p.rnd.IntN(p.entities)
	p.mu.Lock()
	for tries := 0; p.excluded[e] && tries < 100; tries++ {
		e = p.rnd.IntN(p.entities)
	}
	skip := p.excluded[e]
	p.mu.Unlock()
	if skip {
		return // (nearly) every entity is excluded
	}
	p.revs[e]++
	state := p.rnd.IntN(2) == 0 || p.statesOnly
	env := event.Envelope{
		ID: fmt.Sprintf("%s-%07d", p.run, n), Tenant: p.Tenant(e), Entity: fmt.Sprintf("order:%d", e),
		Revision: p.revs[e], Coalesce: state, Type: TypeFact, OccurredAt: time.Now().UTC(),
		Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)),
	}
	if state {
		env.Type = TypeState
	}
	value, _ := json.Marshal(&env)
	acc := ordercheck.Accepted{ID: env.ID, Tenant: env.Tenant, Type: env.Type, Entity: env.Entity, Revision: env.Revision, Coalesce: state,
		SentAt: time.Now()}
	// The context is not the caller's: records already handed to the client
	// must be acknowledged or fail on their own, not be cut off by a stop.
	p.cl.Produce(context.WithoutCancel(ctx), &kgo.Record{Key: []byte(env.Entity), Value: value}, func(r *kgo.Record, err error) {
		acc.Partition, acc.Offset, acc.AckedAt = r.Partition, r.Offset, time.Now()
		if err != nil {
			acc.Err = err.Error()
			p.failed.Add(1)
		} else {
			p.acked.Add(1)
		}
		line, _ := json.Marshal(acc)
		p.mu.Lock()
		p.accepted = append(p.accepted, acc)
		p.log.write(line)
		if err == nil {
			p.lastAck = acc.AckedAt
		}
		p.mu.Unlock()
	})
}

// Acked is the number of events Kafka accepted so far; Failed of publishes
// that failed.
func (p *Publisher) Acked() int64  { return p.acked.Load() }
func (p *Publisher) Failed() int64 { return p.failed.Load() }

// Accepted returns a copy of the accepted log so far.
func (p *Publisher) Accepted() []ordercheck.Accepted {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ordercheck.Accepted(nil), p.accepted...)
}

// Close closes the client and flushes the log.
func (p *Publisher) Close() error {
	p.cl.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.close()
}
