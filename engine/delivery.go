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
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/health"
	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/partition"
)

// EndpointSource is the engine's view of endpoint config.
type EndpointSource interface {
	Get(id string) (endpoint.Endpoint, bool)
	// Disable marks the endpoint disabled, its status only, on its latest
	// version (endpoint.ErrNotFound for a deleted one); it returns the
	// endpoint as stored and whether this call disabled it.
	Disable(ctx context.Context, id, reason string, at time.Time) (endpoint.Endpoint, bool, error)
}

// Breakers is the per-endpoint breaker state (package breaker's Cache):
// in memory while this instance owns the endpoint, in Redis for handover.
type Breakers interface {
	partition.Breakers
	Warm(ctx context.Context, ids []string) error
	Flush(ctx context.Context) error
	Forget(ids ...string)
}

// Sender makes one HTTP delivery attempt.
type Sender interface {
	Send(ctx context.Context, req deliver.Request) deliver.Result
}

// FeedAppender appends a pull or batch endpoint's delivery to its topic.
type FeedAppender interface {
	// Append returns once the event is stored at the end of topic.
	Append(ctx context.Context, topic, key string, body []byte) error
}

// Ownership is told which deliveries partitions this stage owns (the
// batch endpoints' runners live with their partition).
type Ownership interface {
	Owned(p int32)
	// Released returns once nothing of p is sent any more; it may let work
	// in flight finish until deadline.
	Released(p int32, deadline time.Time)
}

// Defaults of DeliveryConfig.
const (
	DefaultCommitInterval = time.Second
	DefaultWakeInterval   = 20 * time.Millisecond
	DefaultMaxPollRecords = 5000
	DefaultInstanceBytes  = 512 << 20
	// fallbackMaxInFlight is DefaultMaxInFlight where the fd limit is unknown.
	fallbackMaxInFlight = 4096
	// DefaultRevokeGrace is added to the attempt timeout to make the
	// default RevokeTimeout.
	DefaultRevokeGrace = 2 * time.Second
)

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
	// Ownership is told of every partition taken over and given up, the
	// latter before the partition's commit. Default nil.
	Ownership Ownership
	// Feed appends the deliveries of pull endpoints to their feeds, in
	// place of an HTTP attempt, under the same lanes, order, retries and
	// breaker. Default nil: a pull endpoint's deliveries are retried (and
	// in the end dead-lettered) with a reason saying so.
	Feed FeedAppender
	// AttemptTimeout is the sender's bound on one attempt; the revoke wait
	// is derived from it. Default deliver.DefaultTimeout (5s).
	AttemptTimeout time.Duration
	// Breakers pauses endpoints that keep failing. Nil disables the breaker.
	Breakers Breakers
	// DisableAfter disables an endpoint that has failed without a single
	// success for this long (needs Breakers). Default partition.DefaultDisableAfter (5 days).
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
	// CommitInterval is how often watermarks are committed and live config
	// changes applied. Default DefaultCommitInterval (1s).
	CommitInterval time.Duration
	// WakeInterval is how often lanes waiting on a retry delay are checked.
	// Default DefaultWakeInterval (20ms).
	WakeInterval time.Duration
	// RevokeTimeout bounds how long a revoke waits for in-flight attempts;
	// attempts still out then are canceled (and not counted), so a new
	// owner never overlaps them. Default AttemptTimeout + DefaultRevokeGrace.
	RevokeTimeout time.Duration
	// MaxPollRecords bounds the records taken per poll. Default DefaultMaxPollRecords (5000).
	MaxPollRecords int
	// ParkAfter parks a lane whose oldest pending delivery has waited this
	// long. Default partition.DefaultParkAfter (30s).
	ParkAfter time.Duration
	// LaneBuffer parks a lane holding more unstarted deliveries than this.
	// It is above one poll's worth (MaxPollRecords), so a burst to a healthy
	// endpoint is not parked just because it arrived in one fetch. Default
	// partition.DefaultLaneBuffer (10000).
	LaneBuffer int
	// ParkedWindow is how many parked deliveries of one lane are read back
	// into memory at a time. Default partition.DefaultParkedWindow (256).
	ParkedWindow int
	// LaneBytes parks a lane holding more bytes of deliveries than this.
	// Default partition.DefaultLaneBytes (32 MiB).
	LaneBytes int64
	// ParkedWindowBytes bounds a parked lane's window in bytes. Default
	// partition.DefaultParkedWindowBytes (8 MiB).
	ParkedWindowBytes int64
	// MaxInFlight caps the attempts in flight of the whole stage (sockets,
	// file descriptors), shared fairly among endpoints once it binds; each
	// endpoint still never passes its own max_concurrency. Default
	// DefaultMaxInFlight: half the process's file-descriptor limit.
	MaxInFlight int
	// InstanceBytes is the budget for the deliveries every lane of the
	// instance holds: past it, each commit interval parks the largest lanes
	// until the rest fit. Default DefaultInstanceBytes (512 MiB).
	InstanceBytes int64
	// ParkedGroup is the memberless group under which the parked progress
	// is committed. Default Group + "-parked".
	ParkedGroup string
	// ClientOpts are extra franz-go options (metrics hooks, TLS, SASL).
	ClientOpts []kgo.Opt
	// ReaderClientOpts are the same for the parked reader's own client
	// (hooks cannot be shared between clients).
	ReaderClientOpts []kgo.Opt
	// Metrics; nil disables them.
	Metrics *Metrics
	// OnEvent, when set, is told what the stage did: partitions assigned
	// and released, commits, lanes parked and unparked; for tests and
	// tools that wait on what happened instead of polling metrics. It is
	// called synchronously, some calls under a partition's lock: it must
	// return quickly and not call the stage. Default nil.
	OnEvent func(Event)
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
	setDur(&c.AttemptTimeout, deliver.DefaultTimeout)
	setDur(&c.CommitInterval, DefaultCommitInterval)
	setDur(&c.WakeInterval, DefaultWakeInterval)
	setDur(&c.RevokeTimeout, c.AttemptTimeout+DefaultRevokeGrace)
	if c.MaxPollRecords <= 0 {
		c.MaxPollRecords = DefaultMaxPollRecords
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight()
	}
	if c.InstanceBytes <= 0 {
		c.InstanceBytes = DefaultInstanceBytes
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
// topic and drives a partition.Owner for each (the deterministic core:
// lanes, parking, retries, dead letters). The stage does what the core may
// not: Kafka polling and produces, HTTP attempts on goroutines, timers and
// commits.
type DeliveryStage struct {
	cfg          DeliveryConfig
	client       *kgo.Client
	admin        *kadm.Client
	parkedReader *kread.Reader
	// deliveriesReader finds where a replay ends at assignment.
	deliveriesReader *kread.Reader
	readerClient     *kgo.Client // the parked reader's and admin's own client
	signers          signerCache
	slots            *partition.SlotPool // the cap on attempts in flight, shared by every owner

	mu    sync.Mutex // guards parts
	parts map[int32]*driven

	commitMu sync.Mutex // serialises commits with revokes

	ctx        context.Context // ends when Stop gives up on Kafka: produces, reads and disables end
	cancel     context.CancelFunc
	stopping   context.Context // ends when Stop begins: an assignment waiting for Kafka gives up
	stop       context.CancelFunc
	loopCancel context.CancelFunc
	loops      sync.WaitGroup // poll, commit and wake loops
	background sync.WaitGroup // attempts, produces, reads, breaker and health loads, disables
	workers    workers        // the goroutines attempts run on
}

// NewDeliveryStage builds the stage; Start runs it.
func NewDeliveryStage(cfg DeliveryConfig) (*DeliveryStage, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &DeliveryStage{cfg: cfg, parts: map[int32]*driven{}, slots: partition.NewSlotPool(cfg.MaxInFlight, cfg.Now)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.stopping, s.stop = context.WithCancel(context.Background())
	// The parked reader gets a client of its own: Kafka answers requests on
	// one connection in order, and the group consumer's long-polling fetches
	// would otherwise delay every parked read by up to their max wait.
	readerClient, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ReaderClientOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("parked reader client: %w", err)
	}
	s.readerClient = readerClient
	s.admin = kadm.NewClient(readerClient)
	s.parkedReader = kread.NewReader(readerClient, cfg.Topics.Parked)
	s.deliveriesReader = kread.NewReader(readerClient, cfg.Topics.Deliveries, kread.ReadCommitted())
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topics.Deliveries),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// A revoke waits up to RevokeTimeout for attempts; the group must
		// not give up on this member meanwhile.
		kgo.RebalanceTimeout(max(60*time.Second, 2*cfg.RevokeTimeout+10*time.Second)),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.RecordPartitioner(parkedAwarePartitioner(cfg.Topics.Parked)),
		// Produce is called from completions, some of them produce promises,
		// where a Produce blocked on a full buffer would deadlock the client.
		// Each owner keeps at most MaxAppendsInFlight + MaxDeadInFlight
		// records with the producer; this leaves room for many partitions.
		kgo.MaxBufferedRecords(maxBufferedRecords),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		readerClient.Close()
		return nil, fmt.Errorf("delivery client: %w", err)
	}
	s.client = cl
	return s, nil
}

// maxBufferedRecords is the delivery client's producer buffer: above what
// the owners of many partitions keep in flight at once (2 × 1024 each).
const maxBufferedRecords = 1 << 20

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

// Start runs the poll, commit and wake loops until Stop (ctx is not their
// lifetime, nor used otherwise). It cannot fail.
func (s *DeliveryStage) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	s.loopCancel = cancel
	s.loops.Add(3)
	go s.pollLoop(ctx)
	go s.tickLoop(ctx, s.cfg.CommitInterval, s.everyCommitInterval)
	go s.tickLoop(ctx, s.cfg.WakeInterval, s.everyWake)
	return nil
}

// Stop stops fetching, lets in-flight attempts finish (bounded by
// RevokeTimeout), commits every watermark and closes. However Kafka
// behaves, it returns within about RevokeTimeout + 15s (the commit and the
// breakers' handover are bounded): what Kafka has not acknowledged by then
// is failed, and stays unfinished for the next owner. Those are its own
// bounds: ctx is not used. It waits for its goroutines and returns nil.
func (s *DeliveryStage) Stop(context.Context) error {
	s.stop() // before waiting for the poll loop, which may wait for onAssigned
	if s.loopCancel != nil {
		s.loopCancel()
	}
	s.loops.Wait()
	s.release(context.Background(), s.client, s.ownedIDs(), true)
	s.cancel()
	s.client.Close()
	s.readerClient.Close()
	s.background.Wait()
	s.workers.stop()
	return nil
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
			if d := s.owned(fp.Partition); d != nil && len(fp.Records) > 0 {
				d.dispatch(fp.FetchPartition)
			}
		})
		s.applyBackpressure()
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

func (s *DeliveryStage) owned(p int32) *driven {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parts[p]
}

func (s *DeliveryStage) ownedPartitions() []*driven {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*driven, 0, len(s.parts))
	for _, d := range s.parts {
		out = append(out, d)
	}
	return out
}

func (s *DeliveryStage) ownedIDs() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int32, 0, len(s.parts))
	for p := range s.parts {
		out = append(out, p)
	}
	return out
}

// everyWake lets time act on every owner: retry delays, produce retries,
// parked reads.
func (s *DeliveryStage) everyWake() {
	for _, d := range s.ownedPartitions() {
		d.do((*partition.Owner).Tick)
	}
	s.applyBackpressure()
}

// everyCommitInterval applies live config changes and commits watermarks.
func (s *DeliveryStage) everyCommitInterval() {
	for _, d := range s.ownedPartitions() {
		d.do((*partition.Owner).Maintain)
	}
	s.keepWithinBytes()
	s.commit()
}

// keepWithinBytes parks the largest lanes of the instance while its lanes
// hold more than InstanceBytes, so that many lanes each within LaneBytes
// cannot together exhaust memory.
func (s *DeliveryStage) keepWithinBytes() {
	owned := s.ownedPartitions()
	for range owned { // at most one lane per partition per round
		var total, most int64
		var largest string
		var holder *driven
		for _, d := range owned {
			d.do(func(o *partition.Owner) {
				t, id, b := o.LaneBytes()
				total += t
				if id != "" && b > most {
					most, largest, holder = b, id, d
				}
			})
		}
		if total <= s.cfg.InstanceBytes || holder == nil {
			return
		}
		var parked bool
		holder.do(func(o *partition.Owner) { parked = o.ParkLane(largest, "instance_bytes") })
		if !parked {
			return
		}
	}
}

// applyBackpressure pauses fetching the partitions whose owner cannot take
// more (parked appends piling up, or the parked partition still being
// read at assignment) and resumes the others.
func (s *DeliveryStage) applyBackpressure() {
	for _, d := range s.ownedPartitions() {
		d.syncFetchPause(s.client)
	}
}

// handOverBreakers writes the released endpoints' breakers to Redis for the
// next owner (not on loss: the next owner may have newer state already) and
// drops them from memory: every endpoint whose breaker the owner used, so a
// later owner of the partition warms them again.
func (s *DeliveryStage) handOverBreakers(ctx context.Context, gone []*driven, flush bool) {
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
	for _, d := range gone {
		d.do(func(o *partition.Owner) { ids = append(ids, o.EndpointIDs()...) })
	}
	s.cfg.Breakers.Forget(ids...)
}

// Snapshots returns the health of every endpoint this instance owns and
// has seen lately.
func (s *DeliveryStage) Snapshots(now time.Time) []health.Snapshot {
	var out []health.Snapshot
	for _, d := range s.ownedPartitions() {
		d.do(func(o *partition.Owner) { out = o.Snapshots(now, out) })
	}
	return out
}

var _ Breakers = (*breaker.Cache)(nil)
