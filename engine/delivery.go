package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/endpoint"
	"github.com/laneway/laneway/health"
	"github.com/laneway/laneway/internal/kread"
	"github.com/laneway/laneway/topics"
)

// EndpointSource is the engine's view of endpoint config.
type EndpointSource interface {
	Get(id string) (endpoint.Endpoint, bool)
	Put(ctx context.Context, e endpoint.Endpoint) error
}

// Breakers is the per-endpoint breaker state (package breaker's Cache):
// in memory while this instance owns the endpoint, in Redis for handover.
type Breakers interface {
	Allow(endpointID string, now time.Time, maxConcurrency, inFlight int) breaker.Decision
	Record(endpointID string, success bool, now time.Time) breaker.Breaker
	Get(endpointID string) breaker.Breaker
	Warm(ctx context.Context, ids []string) error
	Loaded(endpointID string) bool
	Flush(ctx context.Context) error
	Forget(ids ...string)
	Reset(endpointID string)
}

// Sender makes one HTTP delivery attempt.
type Sender interface {
	Send(ctx context.Context, req deliver.Request) deliver.Result
}

// DeliveryConfig configures the delivery stage.
type DeliveryConfig struct {
	// Brokers to connect to. Required.
	Brokers []string
	// Topics names the topics. Defaults as in topics.Config.
	Topics topics.Config
	// Group is the consumer group reading deliveries. Default "laneway-deliveries".
	Group string
	// Endpoints resolves endpoint config. Required.
	Endpoints EndpointSource
	// Sender makes the HTTP attempts. Required.
	Sender Sender
	// Breakers pauses endpoints that keep failing. Nil disables the breaker.
	Breakers Breakers
	// DisableAfter disables an endpoint that has failed without a single
	// success for this long (needs Breakers). Default 120h (5 days).
	DisableAfter time.Duration
	// InstanceID names this instance in health snapshots.
	InstanceID string
	// LoadHealth loads an endpoint's last published health snapshot, so a
	// new owner carries its last success and error on. Nil: they start blank.
	LoadHealth func(ctx context.Context, endpointID string) (health.Snapshot, bool, error)
	// Notifier is told about every endpoint this stage disables (410 Gone,
	// or DisableAfter). Nil: the disable is only logged.
	Notifier Notifier
	// Retry is the retry and dead-letter policy. Zero fields take the delivery contract's defaults.
	Retry deliver.RetryPolicy
	// CommitInterval is how often watermarks are committed. Default 1s.
	CommitInterval time.Duration
	// WakeInterval is how often lanes waiting on a retry delay are checked.
	// Default 20ms.
	WakeInterval time.Duration
	// RevokeTimeout bounds how long a revoke waits for in-flight attempts
	// before committing. Default 10s (twice the attempt timeout).
	RevokeTimeout time.Duration
	// MaxPollRecords bounds the records taken per poll. Default 5000.
	MaxPollRecords int
	// ParkAfter parks a lane whose oldest pending delivery has waited this
	// long, so it stops holding the partition's watermark. Default 30s.
	ParkAfter time.Duration
	// LaneBuffer parks a lane holding more unstarted deliveries than this,
	// which bounds the memory one endpoint can take. It is above one poll's
	// worth (MaxPollRecords), so a burst to a healthy endpoint is not parked
	// just because it arrived in one fetch. Default 10000.
	LaneBuffer int
	// ParkedWindow is how many parked deliveries of one lane are read back
	// into memory at a time. Default 256.
	ParkedWindow int
	// ParkedGroup is the memberless group under which the parked readers
	// commit their progress. Default Group + "-parked".
	ParkedGroup string
	// ClientOpts are extra franz-go options (metrics hooks, TLS, SASL).
	ClientOpts []kgo.Opt
	// ReaderClientOpts are the same for the parked reader's own client
	// (hooks cannot be shared between clients).
	ReaderClientOpts []kgo.Opt
	// Metrics; nil disables them.
	Metrics *Metrics
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Rand returns a float in [0,1) for retry jitter. Default math/rand/v2.
	Rand func() float64
}

func (c *DeliveryConfig) setDefaults() error {
	if c.Endpoints == nil || c.Sender == nil {
		return errors.New("delivery stage: Endpoints and Sender are required")
	}
	c.Topics = c.Topics.WithDefaults()
	if c.Group == "" {
		c.Group = "laneway-deliveries"
	}
	setDur(&c.CommitInterval, time.Second)
	setDur(&c.WakeInterval, 20*time.Millisecond)
	setDur(&c.RevokeTimeout, 10*time.Second)
	if c.MaxPollRecords <= 0 {
		c.MaxPollRecords = 5000
	}
	setDur(&c.ParkAfter, 30*time.Second)
	setDur(&c.DisableAfter, 5*24*time.Hour)
	if c.LaneBuffer <= 0 {
		c.LaneBuffer = 10000
	}
	if c.ParkedWindow <= 0 {
		c.ParkedWindow = 256
	}
	if c.ParkedGroup == "" {
		c.ParkedGroup = c.Group + "-parked"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return nil
}

func setDur(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Notifier tells the operators about endpoints disabled by the engine.
type Notifier interface {
	EndpointDisabled(ep endpoint.Endpoint, reason string)
}

// DeliveryStage is the second stage: it owns partitions of the deliveries
// topic, gives every endpoint in them a lane, makes the HTTP attempts and
// commits each partition's watermark (its lowest unfinished offset).
type DeliveryStage struct {
	cfg          DeliveryConfig
	client       *kgo.Client
	admin        *kadm.Client
	parkedReader *kread.Reader
	readerClient *kgo.Client // the parked reader's and admin's own client

	mu    sync.Mutex // guards parts
	parts map[int32]*ownedPartition

	commitMu sync.Mutex // serialises commits with revokes

	attemptCtx    context.Context // cancelled only when shutdown gives up waiting
	cancelAttempt context.CancelFunc
	cancel        context.CancelFunc
	loops         sync.WaitGroup // poll, commit and wake loops
	background    sync.WaitGroup // attempts, dead-letter writes, endpoint disables
}

// NewDeliveryStage builds the stage; Start runs it.
func NewDeliveryStage(cfg DeliveryConfig) (*DeliveryStage, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &DeliveryStage{cfg: cfg, parts: map[int32]*ownedPartition{}}
	s.attemptCtx, s.cancelAttempt = context.WithCancel(context.Background())
	// The parked reader gets a client of its own: Kafka answers requests on
	// one connection in order, and the group consumer's long-polling fetches
	// would otherwise delay every parked read by up to their max wait. It is
	// made first because the group client may call onAssigned, which uses
	// it, before kgo.NewClient even returns.
	readerClient, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ReaderClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("parked reader client: %w", err)
	}
	s.readerClient = readerClient
	s.admin = kadm.NewClient(readerClient)
	s.parkedReader = kread.NewReader(readerClient, cfg.Topics.Parked)
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics.Deliveries),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.RecordPartitioner(parkedAwarePartitioner(cfg.Topics.Parked)),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		readerClient.Close()
		return nil, fmt.Errorf("delivery client: %w", err)
	}
	s.client = cl
	return s, nil
}

// parkedAwarePartitioner writes parked records to the partition the record
// names (the owner's partition) and everything else by key hash.
func parkedAwarePartitioner(parkedTopic string) kgo.Partitioner {
	byKey := kgo.StickyKeyPartitioner(nil)
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		if topic == parkedTopic {
			return func(r *kgo.Record, _ int) int { return int(r.Partition) }
		}
		return byKey.ForTopic(topic).Partition
	})
}

// Start runs the poll, commit and wake loops until Stop.
func (s *DeliveryStage) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.loops.Add(3)
	go s.pollLoop(ctx)
	go s.tickLoop(ctx, s.cfg.CommitInterval, s.everyCommitInterval)
	go s.tickLoop(ctx, s.cfg.WakeInterval, s.wakeLanes)
}

// Stop stops fetching, lets in-flight attempts finish (bounded by
// RevokeTimeout), commits every watermark, leaves the group and closes.
func (s *DeliveryStage) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.loops.Wait()
	s.mu.Lock()
	owned := make([]int32, 0, len(s.parts))
	for p := range s.parts {
		owned = append(owned, p)
	}
	s.mu.Unlock()
	s.release(context.Background(), s.client, owned, true)
	s.cancelAttempt()
	s.background.Wait()
	s.client.Close()
	s.readerClient.Close()
}

// Ping checks that the brokers answer.
func (s *DeliveryStage) Ping(ctx context.Context) error { return s.client.Ping(ctx) }

func (s *DeliveryStage) pollLoop(ctx context.Context) {
	defer s.loops.Done()
	for {
		fetches := s.client.PollRecords(ctx, s.cfg.MaxPollRecords)
		if ctx.Err() != nil {
			s.client.AllowRebalance()
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			s.cfg.Logger.Warn("deliveries fetch failed", "topic", t, "partition", p, "err", err)
		})
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			if op := s.owned(fp.Partition); op != nil {
				op.dispatch(fp.FetchPartition)
			}
		})
		s.client.AllowRebalance()
	}
}

func (s *DeliveryStage) tickLoop(ctx context.Context, every time.Duration, fn func()) {
	defer s.loops.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

func (s *DeliveryStage) owned(p int32) *ownedPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parts[p]
}

func (s *DeliveryStage) ownedPartitions() []*ownedPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*ownedPartition, 0, len(s.parts))
	for _, op := range s.parts {
		out = append(out, op)
	}
	return out
}

// onAssigned takes partitions over. Before any of their deliveries is
// dispatched (BlockRebalanceOnPoll guarantees this runs between polls), it
// reads the parked partition to learn which endpoints are still parked.
func (s *DeliveryStage) onAssigned(ctx context.Context, cl *kgo.Client, assigned map[string][]int32) {
	for _, p := range assigned[s.cfg.Topics.Deliveries] {
		op := newOwnedPartition(s, p, cl)
		if err := s.discover(ctx, op); err != nil {
			return // the client is closing
		}
		op.startParkedWorkers()
		s.mu.Lock()
		s.parts[p] = op
		s.mu.Unlock()
		s.cfg.Logger.Info("deliveries partition assigned", "partition", p, "parked_endpoints", len(op.parked))
	}
}

// discover retries until the parked partition is read or ctx ends (the
// client closing): dispatching without it could break per-entity order, and
// the partition cannot progress anyway while its parked log is unreadable.
func (s *DeliveryStage) discover(ctx context.Context, op *ownedPartition) error {
	for attempt := 1; ; attempt++ {
		err := s.tryDiscover(ctx, op)
		if err == nil || ctx.Err() != nil {
			return err
		}
		s.cfg.Logger.Error("reading the parked partition failed; retrying", "partition", op.id, "err", err)
		if !sleepCtx(ctx, min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)) {
			return ctx.Err()
		}
	}
}

func (s *DeliveryStage) tryDiscover(ctx context.Context, op *ownedPartition) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start, err := committedOffset(ctx, s.admin, s.cfg.ParkedGroup, s.cfg.Topics.Parked, op.id)
	if err != nil {
		return fmt.Errorf("parked commit: %w", err)
	}
	delivered, err := committedOffset(ctx, s.admin, s.cfg.Group, s.cfg.Topics.Deliveries, op.id)
	if err != nil {
		return fmt.Errorf("deliveries commit: %w", err)
	}
	clear(op.parked)
	clear(op.alreadyParked)
	return op.discoverParked(ctx, start, delivered)
}

func (s *DeliveryStage) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	s.release(ctx, cl, revoked[s.cfg.Topics.Deliveries], true)
}

// onLost drops the partitions without committing: another member may own
// them already, and a commit from us could move its progress backwards.
func (s *DeliveryStage) onLost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	s.release(ctx, cl, lost[s.cfg.Topics.Deliveries], false)
}

// release gives partitions up: unstarted tasks are dropped (the next owner
// reads them again from the committed watermark), in-flight attempts are
// awaited so two owners never deliver the same entity at once, and then the
// watermark is committed if commit is set.
func (s *DeliveryStage) release(ctx context.Context, cl *kgo.Client, parts []int32, commit bool) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	var gone []*ownedPartition
	s.mu.Lock()
	for _, p := range parts {
		if op, ok := s.parts[p]; ok {
			gone = append(gone, op)
			delete(s.parts, p)
		}
	}
	s.mu.Unlock()
	for _, op := range gone {
		op.stop()
	}
	deadline := time.Now().Add(s.cfg.RevokeTimeout)
	for _, op := range gone {
		if !op.awaitIdle(deadline) {
			s.cfg.Logger.Warn("attempts still in flight at revoke timeout", "partition", op.id)
		}
	}
	if commit {
		// Parked appends must be acknowledged before the commit, or their
		// deliveries would be parked a second time by the next owner.
		flushCtx, cancel := context.WithTimeout(ctx, s.cfg.RevokeTimeout)
		if err := cl.Flush(flushCtx); err != nil {
			s.cfg.Logger.Warn("flushing parked appends before commit", "err", err)
		}
		cancel()
		s.commitPartitions(ctx, cl, gone)
	}
	s.handOverBreakers(ctx, gone, commit)
	for _, op := range gone {
		s.cfg.Logger.Info("deliveries partition released", "partition", op.id, "committed", commit)
	}
}

func (s *DeliveryStage) commit() {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.commitPartitions(context.Background(), s.client, s.ownedPartitions())
}

// commitPartitions commits, for each partition that moved, the deliveries
// watermark under the consumer group and the parked offset under the
// memberless parked group.
func (s *DeliveryStage) commitPartitions(ctx context.Context, cl *kgo.Client, ops []*ownedPartition) {
	deliveries := map[int32]kgo.EpochOffset{}
	parked := kadm.Offsets{}
	for _, op := range ops {
		d, p := op.uncommittedWatermarks()
		if d >= 0 {
			deliveries[op.id] = kgo.EpochOffset{Epoch: -1, Offset: d}
		}
		if p >= 0 {
			parked.AddOffset(s.cfg.Topics.Parked, op.id, p, -1)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	dOK := len(deliveries) == 0 || s.commitDeliveries(ctx, cl, deliveries)
	pOK := len(parked) == 0 || s.commitParked(ctx, parked)
	for _, op := range ops {
		d, p := int64(-1), int64(-1)
		if o, ok := deliveries[op.id]; ok && dOK {
			d = o.Offset
		}
		if o, ok := parked.Lookup(s.cfg.Topics.Parked, op.id); ok && pOK {
			p = o.At
		}
		op.committed(d, p)
	}
}

func (s *DeliveryStage) commitDeliveries(ctx context.Context, cl *kgo.Client, offsets map[int32]kgo.EpochOffset) bool {
	var commitErr error
	all := map[string]map[int32]kgo.EpochOffset{s.cfg.Topics.Deliveries: offsets}
	cl.CommitOffsetsSync(ctx, all, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = firstCommitError(resp, err)
	})
	if commitErr != nil {
		s.cfg.Logger.Warn("deliveries commit failed; will retry", "err", commitErr)
		return false
	}
	return true
}

func (s *DeliveryStage) commitParked(ctx context.Context, offsets kadm.Offsets) bool {
	resp, err := s.admin.CommitOffsets(ctx, s.cfg.ParkedGroup, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		s.cfg.Logger.Warn("parked commit failed; will retry", "err", err)
		return false
	}
	return true
}

func (s *DeliveryStage) wakeLanes() {
	now := s.cfg.Now()
	for _, op := range s.ownedPartitions() {
		op.wake(now)
	}
}

func firstCommitError(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil || resp == nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("partition %d: %w", p.Partition, err)
			}
		}
	}
	return nil
}

// everyCommitInterval applies live limit changes and commits watermarks.
func (s *DeliveryStage) everyCommitInterval() {
	now := s.cfg.Now()
	for _, op := range s.ownedPartitions() {
		op.maintain(now)
	}
	s.commit()
}

// handOverBreakers writes the released endpoints' breakers to Redis for the
// next owner (not on loss: the next owner may have newer state already) and
// drops them from memory.
func (s *DeliveryStage) handOverBreakers(ctx context.Context, gone []*ownedPartition, flush bool) {
	if s.cfg.Breakers == nil || len(gone) == 0 {
		return
	}
	if flush {
		flushCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := s.cfg.Breakers.Flush(flushCtx); err != nil {
			s.cfg.Logger.Warn("breaker handover to Redis failed; the next owner starts closed", "err", err)
		}
		cancel()
	}
	var ids []string
	for _, op := range gone {
		ids = append(ids, op.endpointIDs()...)
	}
	s.cfg.Breakers.Forget(ids...)
}
