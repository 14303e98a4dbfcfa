package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kafkatxn"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// SubscriberIndex finds the endpoints an event goes to.
type SubscriberIndex interface {
	// Subscribers appends the ids of the active endpoints of tenant that
	// subscribe to eventType to dst and returns it.
	Subscribers(dst []string, tenant, eventType string) []string
}

// FanoutConfig configures the fan-out stage.
type FanoutConfig struct {
	// Brokers to connect to. Required.
	Brokers []string
	// Topics names the topics. Defaults as in topics.Config.
	Topics topics.Config
	// Group is the consumer group reading the events topic. Default
	// topics.GroupsFor(topics.DefaultPrefix).Fanout ("laneway-fanout").
	Group string
	// TransactionalID prefix; each instance appends its own suffix so that
	// two instances never fence each other. Default, whatever Group is:
	// topics.GroupsFor(topics.DefaultPrefix).Fanout ("laneway-fanout").
	TransactionalID string
	// InstanceID distinguishes this process. Default DefaultInstanceID():
	// the hostname.
	InstanceID string
	// Subscribers resolves subscriptions. Required.
	Subscribers SubscriberIndex
	// ClientOpts are extra franz-go options (metrics hooks, TLS, SASL).
	ClientOpts []kgo.Opt
	// TransactionV2 lets the fan-out use Kafka's transaction protocol
	// version 2 where the cluster has finalised it. Default false: version
	// 1, because version 2 lost deliveries after unclean broker restarts
	// (see package kafkatxn).
	TransactionV2 bool
	// RepairInterval is how often the fan-out looks for hanging
	// transactions of its own producer (see kafkatxn.Repair); one is closed
	// after it was seen on two checks in a row. Default 5s.
	RepairInterval time.Duration
	// SafetyChecks is told whether the transaction safety checks could run
	// (a gauge and one ERROR line per check that cannot). Default: one
	// that logs only.
	SafetyChecks *kafkatxn.Checks
	// Metrics receives fan-out counts; nil disables them.
	Metrics *Metrics
	// OnEvent, when set, is told of each committed transaction's
	// deliveries (EventFannedOut), synchronously: it must not block (see
	// Event). Default nil.
	OnEvent func(Event)
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Fanout is the first stage: it reads events and writes one delivery per
// subscribed endpoint to the deliveries topic, keyed by endpoint id, in a
// Kafka transaction together with the consumed offsets (exactly once).
type Fanout struct {
	cfg  FanoutConfig
	sess *kafkatxn.Session
}

// NewFanout builds the stage; Start runs it.
func NewFanout(cfg FanoutConfig) (*Fanout, error) {
	if cfg.Subscribers == nil {
		return nil, errors.New("fanout: Subscribers is required")
	}
	cfg.Topics = cfg.Topics.WithDefaults()
	group := topics.GroupsFor(topics.DefaultPrefix).Fanout
	cfg.Group = cmp.Or(cfg.Group, group)
	cfg.TransactionalID = cmp.Or(cfg.TransactionalID, group)
	cfg.InstanceID = cmp.Or(cfg.InstanceID, DefaultInstanceID())
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Now = timing.Clock(cfg.Now)
	cfg.RepairInterval = valutil.PositiveOr(cfg.RepairInterval, 5*time.Second)
	txnID := cfg.TransactionalID + "-" + cfg.InstanceID // = TransactionalID()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(20 * time.Second),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics.Events),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		// No linger: a poll's records are produced in one loop and batch
		// by themselves, and End waits for every one of them, so waiting
		// for more would only delay the commit.
		kgo.ProducerLinger(0),
	}, kafkatxn.Protocol(cfg.TransactionV2)...)
	opts = append(opts, cfg.ClientOpts...)
	sess, err := kafkatxn.NewSession(opts, kafkatxn.RepairConfig{
		TransactionalID: txnID, Group: cfg.Group,
		Outputs: []string{cfg.Topics.Deliveries, cfg.Topics.Dead},
		Every:   cfg.RepairInterval, Logger: cfg.Logger, Now: cfg.Now, Checks: cfg.SafetyChecks,
	})
	if err != nil {
		return nil, fmt.Errorf("fanout client: %w", err)
	}
	return &Fanout{cfg: cfg, sess: sess}, nil
}

// TransactionalID is the Kafka transactional id of this instance's fan-out.
func (f *Fanout) TransactionalID() string { return f.cfg.TransactionalID + "-" + f.cfg.InstanceID }

// Start runs the stage in the background until Stop (ctx is not its
// lifetime, nor used otherwise). It cannot fail.
func (f *Fanout) Start(context.Context) error {
	f.sess.Run(f.run)
	return nil
}

// Stop finishes the current transaction, waits for the stage's goroutine
// and closes. ctx is not used: Stop waits however long the transaction
// takes to end. It may be called without Start; it returns nil.
func (f *Fanout) Stop(context.Context) error {
	f.sess.Stop()
	return nil
}

func (f *Fanout) run(ctx context.Context) {
	for ctx.Err() == nil {
		fetches := f.sess.Poll(ctx, f.sess.RepairInterval(), 5000, "fanout fetch failed")
		if ctx.Err() != nil {
			return
		}
		if fetches.NumRecords() == 0 {
			f.sess.MaybeRepair(ctx)
			continue
		}
		written, err := f.transactDetached(ctx, fetches)
		if !f.sess.Finish(ctx, written, err, "fanout transaction failed; records will be consumed again") {
			return
		}
	}
}

// transactDetached runs transact to its end even when Stop cancels ctx
// meanwhile: a poll already taken is committed, not aborted and replayed.
func (f *Fanout) transactDetached(ctx context.Context, fetches kgo.Fetches) (kadm.TopicsSet, error) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return f.transact(tctx, fetches)
}

// transact writes the deliveries (and dead letters) for one poll in one
// transaction. An abort rewinds the session to the last committed offsets,
// so nothing is lost and nothing is written twice. It returns the
// partitions a committed transaction wrote to.
func (f *Fanout) transact(ctx context.Context, fetches kgo.Fetches) (kadm.TopicsSet, error) {
	sess := f.sess.Current()
	if err := sess.Begin(); err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	produced := kgo.AbortingFirstErrPromise(sess.Client())
	var sc fanoutScratch
	var outs []*kgo.Record
	fetches.EachRecord(func(r *kgo.Record) {
		n := len(outs)
		outs = f.deliveriesFor(r, &sc, outs)
		for _, out := range outs[n:] {
			sess.Produce(ctx, out, produced.Promise())
		}
	})
	counts := sc.counts
	// Err waits for every produce; any failure aborts the transaction.
	produceErr := produced.Err()
	committed, err := sess.End(ctx, produceErr == nil)
	if err == nil {
		err = produceErr
	}
	if err != nil || !committed {
		return nil, err
	}
	f.cfg.Metrics.addFanout(counts)
	if f.cfg.OnEvent != nil {
		f.tellWritten(outs)
	}
	return kafkatxn.Written(outs), nil
}

// tellWritten tells OnEvent what a committed transaction wrote to each
// deliveries partition: how many deliveries, and the offset after the last.
func (f *Fanout) tellWritten(outs []*kgo.Record) {
	written := map[int32]*Event{}
	var order []int32
	for _, r := range outs {
		if r.Topic != f.cfg.Topics.Deliveries {
			continue // a dead letter
		}
		e := written[r.Partition]
		if e == nil {
			e = &Event{Kind: EventFannedOut, Partition: r.Partition}
			written[r.Partition] = e
			order = append(order, r.Partition)
		}
		e.Count++
		e.Offset = max(e.Offset, r.Offset+1)
	}
	for _, p := range order {
		f.cfg.OnEvent(*written[p])
	}
}

type fanoutCounts struct{ events, deliveries, invalid, unmatched int }

// fanoutScratch is what one transaction reuses from event to event.
type fanoutScratch struct {
	ids    []string
	enc    event.DeliveryEncoder
	counts fanoutCounts
}

// deliveriesFor appends one event record's output records to outs: a
// delivery per subscribed endpoint, or one dead letter if the event is
// invalid.
func (f *Fanout) deliveriesFor(r *kgo.Record, sc *fanoutScratch, outs []*kgo.Record) []*kgo.Record {
	now := f.cfg.Now()
	sc.counts.events++
	env, err := event.ParseEnvelope(r.Value, now)
	if err != nil {
		sc.counts.invalid++
		f.cfg.Logger.Warn("invalid event dead-lettered", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		return append(outs, f.invalidEventRecord(r, err, now))
	}
	sc.ids = f.cfg.Subscribers.Subscribers(sc.ids[:0], env.Tenant, env.Type)
	if len(sc.ids) == 0 {
		sc.counts.unmatched++
		return outs
	}
	if err := sc.enc.Reset(env, now); err != nil { // cannot happen: the envelope was just decoded from JSON
		sc.counts.invalid++
		return append(outs, f.invalidEventRecord(r, err, now))
	}
	for _, id := range sc.ids {
		outs = append(outs, &kgo.Record{Topic: f.cfg.Topics.Deliveries, Key: []byte(id), Value: sc.enc.Encode(id)})
	}
	sc.counts.deliveries += len(sc.ids)
	return outs
}

func (f *Fanout) invalidEventRecord(r *kgo.Record, cause error, now time.Time) *kgo.Record {
	dl := event.UnreadableRecord(event.ReasonInvalidEvent, r.Topic, r.Partition, r.Offset, r.Value, "", cause, now)
	value, _ := json.Marshal(&dl)
	return &kgo.Record{Topic: f.cfg.Topics.Dead, Key: r.Key, Value: value}
}
