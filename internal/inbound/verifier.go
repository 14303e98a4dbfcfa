package inbound

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kafkatxn"
)

// Replay actions.
const (
	// ActionReverify verifies a copy of the request again with the source's
	// current config and forwards it unless an earlier request already did.
	ActionReverify = "reverify"
	// ActionRepublish verifies a copy again and forwards it even if it was
	// forwarded before (same event id, so receivers can still tell).
	ActionRepublish = "republish"
)

// SourceGetter looks sources up; *SourceStore is one.
type SourceGetter interface {
	Get(id string) (Source, bool)
}

type verifierConfig struct {
	brokers         []string
	inboundTopic    string
	eventsTopic     string
	group           string
	transactionalID string
	instanceID      string // static group member id, stable across restarts
	transactionV2   bool
	sessionTimeout  time.Duration
	batchWait       time.Duration
	clientOpts      []kgo.Opt
	sources         SourceGetter
	dedup           *deduper
	metrics         *metrics
	checks          *kafkatxn.Checks // the transaction safety checks' state
	logger          *slog.Logger
	now             func() time.Time
}

// verifier is the verify stage: a consumer group on the inbound topic that
// turns each poll's captures into outcome records (and envelopes for the
// verified ones) in one Kafka transaction with the consumed offsets.
type verifier struct {
	cfg  verifierConfig
	sess *kafkatxn.Session

	// beforeEnd, set by tests only, runs before each transaction ends; an
	// error aborts the transaction as a crash there would.
	beforeEnd func() error

	mu      sync.Mutex
	totals  map[string]int64 // committed outcomes by status
	changed chan struct{}    // closed and replaced at every commit
}

// outcomePartitioner puts outcome records in the partition named on the
// record (the captured request's own) and hashes keys everywhere else, as
// every other Laneway producer does (so an entity's events stay in one
// partition of the events topic).
type outcomePartitioner struct {
	inbound string
	byKey   kgo.Partitioner
}

func (p outcomePartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.inbound {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	return p.byKey.ForTopic(topic)
}

func newVerifier(cfg verifierConfig) (*verifier, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.brokers...),
		kgo.TransactionalID(cfg.transactionalID),
		kgo.TransactionTimeout(20 * time.Second),
		kgo.ConsumerGroup(cfg.group),
		kgo.InstanceID(cfg.instanceID), // static member: see app.groupOpts
		kgo.ConsumeTopics(cfg.inboundTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(outcomePartitioner{inbound: cfg.inboundTopic, byKey: kgo.StickyKeyPartitioner(nil)}),
		kgo.ProducerLinger(0),
		// Let the broker gather a batch (up to batchWait) rather than
		// answer each poll with the one record that just arrived: every
		// poll is a transaction (several broker round trips and markers),
		// and a stream of tiny ones loads the broker that captures wait on.
		kgo.FetchMinBytes(256 << 10),
		kgo.FetchMaxWait(cfg.batchWait),
	}
	if cfg.sessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(cfg.sessionTimeout), kgo.HeartbeatInterval(cfg.sessionTimeout/5))
	}
	opts = append(opts, kafkatxn.Protocol(cfg.transactionV2)...)
	sess, err := kafkatxn.NewSession(append(opts, cfg.clientOpts...), kafkatxn.RepairConfig{
		TransactionalID: cfg.transactionalID, Group: cfg.group,
		Outputs: []string{cfg.inboundTopic, cfg.eventsTopic},
		Logger:  cfg.logger, Now: cfg.now, Checks: cfg.checks,
	})
	if err != nil {
		return nil, fmt.Errorf("inbound verifier client: %w", err)
	}
	return &verifier{cfg: cfg, sess: sess, totals: map[string]int64{}, changed: make(chan struct{})}, nil
}

// Start runs the stage until Stop; ctx bounds nothing (the session's
// preparation runs in the stage's goroutine). It cannot fail.
func (v *verifier) Start(context.Context) error {
	v.sess.Run(v.run)
	return nil
}

// Stop finishes the current transaction, leaves the group and closes,
// waiting for the stage without a bound of its own (ctx is not used). It
// returns nil.
func (v *verifier) Stop(context.Context) error {
	v.sess.Stop()
	return nil
}

// idleCommit is how long offsets of polled records that need no
// transaction (our own outcome records) may wait for the next transaction
// before they are committed on their own.
const idleCommit = time.Second

func (v *verifier) run(ctx context.Context) {
	// uncommitted: records were polled but not committed yet because they
	// were all outcome records. Each verify transaction's outcomes come
	// back to us; committing them in a transaction of their own would
	// double the transactions, so they ride along with the next one, or
	// are committed alone after idleCommit without captures.
	uncommitted := false
	for ctx.Err() == nil {
		// The poll is bounded (see kafkatxn.Session.Poll).
		wait := v.sess.RepairInterval()
		if uncommitted {
			wait = min(wait, idleCommit)
		}
		fetches := v.sess.Poll(ctx, wait, 500, "inbound verifier fetch failed")
		if ctx.Err() != nil {
			return
		}
		switch {
		case fetches.NumRecords() == 0 && !uncommitted:
			v.sess.MaybeRepair(ctx)
			continue
		case fetches.NumRecords() > 0 && !hasCaptures(fetches):
			uncommitted = true
			continue
		}
		uncommitted = false
		written, err := v.transact(fetches)
		if !v.sess.Finish(ctx, written, err, "inbound verify transaction failed; the requests will be verified again") {
			return
		}
	}
}

// hasCaptures reports whether a poll holds anything but outcome records.
func hasCaptures(fetches kgo.Fetches) bool {
	found := false
	fetches.EachRecord(func(r *kgo.Record) {
		found = found || recordKind(r) != kindOutcome
	})
	return found
}

// transact verifies one poll's captures and writes their outcomes and
// envelopes in one transaction with the consumed offsets. Its context is
// not the run context, so that Stop lets a started transaction finish
// rather than leaving it open until it times out. An abort rewinds the
// session to the last committed offsets: the requests are verified again.
func (v *verifier) transact(fetches kgo.Fetches) (kadm.TopicsSet, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var recs []*kgo.Record
	fetches.EachRecord(func(r *kgo.Record) {
		if recordKind(r) != kindOutcome { // our own outcome records: nothing to do
			recs = append(recs, r)
		}
	})
	sess := v.sess.Current()
	if err := sess.Begin(); err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	items, outs := v.decide(ctx, recs)
	produced := kgo.AbortingFirstErrPromise(sess.Client())
	for _, out := range outs {
		sess.Produce(ctx, out, produced.Promise())
	}
	err := produced.Err()
	if err == nil && v.beforeEnd != nil {
		err = v.beforeEnd()
	}
	committed, endErr := sess.End(ctx, err == nil)
	if err == nil {
		err = endErr
	}
	if err != nil || !committed {
		return nil, err
	}
	v.cfg.metrics.committed(items, v.cfg.now())
	v.notify(items)
	return kafkatxn.Written(outs), nil
}

// decide verifies each record and returns the outcomes and the records to
// produce: an outcome per request and an envelope per verified one.
func (v *verifier) decide(ctx context.Context, recs []*kgo.Record) ([]Item, []*kgo.Record) {
	now := v.cfg.now().UTC()
	items := make([]Item, len(recs))
	envelopes := make([][]byte, len(recs))
	var claims []claim
	var claimed []int // index into items per claim
	for i, r := range recs {
		it, env, wantClaim := v.verifyOne(r)
		it.VerifiedAt = now
		items[i], envelopes[i] = it, env
		if wantClaim {
			claims = append(claims, claim{source: it.Source, key: it.DedupKey, requestID: it.ID})
			claimed = append(claimed, i)
		}
	}
	if v.cfg.dedup != nil && len(claims) > 0 {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		owners, err := v.cfg.dedup.claimAll(rctx, claims)
		cancel()
		if err != nil {
			v.cfg.metrics.dedupErrors.Inc()
			v.cfg.logger.Warn("inbound dedup unavailable; forwarding without it (duplicates possible)", "requests", len(claims), "err", err)
		}
		for j, i := range claimed {
			if owners[j] != "" {
				items[i].Status, items[i].DuplicateOf = StatusDuplicate, owners[j]
				envelopes[i] = nil
			}
		}
	}
	outs := make([]*kgo.Record, 0, 2*len(recs))
	for i, r := range recs {
		it := &items[i]
		if envelopes[i] != nil {
			outs = append(outs, &kgo.Record{Topic: v.cfg.eventsTopic, Key: []byte(it.Entity), Value: envelopes[i]})
		}
		outs = append(outs, outcomeRecord(v.cfg.inboundTopic, r.Partition, it, now))
		if it.Status == StatusRejected {
			v.cfg.logger.Debug("inbound request rejected", "id", it.ID, "source", it.Source, "reason", it.Reason, "detail", it.Detail)
		}
	}
	return items, outs
}

// verifyOne decides one record up to dedup: rejected (with a reason), or
// verified with its envelope. wantClaim says the dedup claim decides
// between verified and duplicate (every verified request but a republish).
func (v *verifier) verifyOne(r *kgo.Record) (it Item, envelope []byte, wantClaim bool) {
	c, err := decodeCapture(r)
	if err != nil {
		return Item{
			ID: RequestID(r.Partition, r.Offset), Source: string(r.Key), Status: StatusRejected,
			Reason: ReasonMalformed, Detail: err.Error(), ReceivedAt: r.Timestamp, BodyBytes: len(r.Value),
		}, nil, false
	}
	it = itemOf(&c)
	reject := func(reason, detail string) (Item, []byte, bool) {
		it.Status, it.Reason, it.Detail = StatusRejected, reason, detail
		return it, nil, false
	}
	if c.Reject != "" {
		return reject(c.Reject, c.Detail)
	}
	src, ok := v.cfg.sources.Get(c.Source)
	if !ok {
		return reject(ReasonUnknownSource, "source "+c.Source+" is not configured")
	}
	if err := Verify(&src, c.Header, c.Body, c.ReceivedAt); err != nil {
		return reject(Classify(err), detailOf(err))
	}
	n, err := normalise(&src, &c)
	it.DedupKey, it.EventID = n.dedupKey, n.eventID
	if err != nil {
		return reject(Classify(err), detailOf(err))
	}
	it.Status, it.EventType, it.Entity = StatusVerified, n.typ, n.entity
	return it, n.envelope, c.Action != ActionRepublish
}

func detailOf(err error) string {
	if ve, ok := err.(*VerifyError); ok {
		return ve.Detail
	}
	return err.Error()
}

func (v *verifier) notify(items []Item) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for i := range items {
		v.totals[items[i].Status]++
	}
	close(v.changed)
	v.changed = make(chan struct{})
}

// progress returns the committed outcome counts by status and a channel
// closed at the next commit.
func (v *verifier) progress() (map[string]int64, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]int64, len(v.totals))
	for k, n := range v.totals {
		out[k] = n
	}
	return out, v.changed
}
