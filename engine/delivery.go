package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/ops/health"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/partition"
)

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
	lease            *partition.Lease    // the member's group lease, shared by every owner
	fence            *fence              // renews lease

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
	if err := s.newFence(); err != nil {
		readerClient.Close()
		return nil, err
	}
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
	opts = append(opts, kgo.SessionTimeout(cfg.SessionTimeout)) // what the lease is measured against
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		readerClient.Close()
		return nil, fmt.Errorf("delivery client: %w", err)
	}
	s.client = cl
	s.fence.attach(cl)
	return s, nil
}

// newFence makes the member's lease and the fence that renews it, before
// the client: the client joins the group at once, and an owner must never
// exist without the lease.
func (s *DeliveryStage) newFence() error {
	lease, err := partition.NewLease(partition.LeaseConfig{SessionTimeout: s.cfg.SessionTimeout, AttemptTimeout: s.cfg.AttemptTimeout})
	if err != nil {
		return fmt.Errorf("delivery stage: %w", err)
	}
	s.lease = lease
	s.fence = newFence(s.cfg.Group, lease, s.cfg.FenceInterval, s.cfg.Now, s.cfg.Logger, s.cfg.Metrics, s.emit)
	return nil
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
	s.loops.Add(4)
	go func() {
		defer s.loops.Done()
		s.fence.run(ctx)
	}()
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
	s.releaseRevoked(context.Background(), s.client, s.ownedIDs())
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
	timing.Every(ctx.Done(), every, fn)
}

func (s *DeliveryStage) owned(p int32) *driven {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.parts[p]
}

func (s *DeliveryStage) ownedPartitions() []*driven {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.parts))
}

func (s *DeliveryStage) ownedIDs() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.parts))
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
// more (parked appends piling up, the parked partition still being read at
// assignment, or the offset tracker full) and resumes the others.
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
