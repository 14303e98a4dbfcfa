package batch

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
	"github.com/laneway/laneway/partition"
)

// Endpoints is the endpoint config the runners read and change.
type Endpoints interface {
	Get(id string) (endpoint.Endpoint, bool)
	List() []endpoint.Endpoint
	Disable(ctx context.Context, id, reason string, at time.Time) (endpoint.Endpoint, bool, error)
}

// Sender makes one HTTP attempt (deliver.Sender).
type Sender interface {
	Send(ctx context.Context, req deliver.Request) deliver.Result
}

// Breakers is the endpoints' breaker state (breaker.Cache): a batch
// endpoint's breaker is kept from its batches' outcomes.
type Breakers interface {
	Allow(id string, now time.Time, maxConcurrency, inFlight int) breaker.Decision
	Record(id string, success bool, now time.Time) breaker.Breaker
	Reset(id string)
	Warm(ctx context.Context, ids []string) error
}

// Notifier is told about every endpoint a runner disables.
type Notifier interface {
	EndpointDisabled(ep endpoint.Endpoint, reason string)
}

// DeadLetters writes dead letters and returns once Kafka has them.
type DeadLetters interface {
	Write(ctx context.Context, letters []event.DeadLetter) error
}

// Waiter lets a runner wait for its feed to grow (feed.Watcher).
type Waiter interface {
	Wait(ctx context.Context, topic string, from int64) bool
}

// DefaultRecheck is how often an idle runner looks at its endpoint's
// config again (pause, resume, new sizes).
const DefaultRecheck = time.Second

// Config configures a Manager.
type Config struct {
	// Client reads the feeds and commits the cursors. Required.
	Client *kgo.Client
	// Topics names the deliveries and feed topics. Default: topics.Config{}.
	Topics topics.Config
	// Group holds each batch endpoint's cursor (topics.Groups.Batch).
	// Required.
	Group string
	// Endpoints, Sender, Breakers, DeadLetters and Watcher: required.
	Endpoints   Endpoints
	Sender      Sender
	Breakers    Breakers
	DeadLetters DeadLetters
	Watcher     Waiter
	// Retry is the retry and dead-letter policy, as for every delivery.
	Retry deliver.RetryPolicy
	// DisableAfter disables an endpoint whose batches have failed without
	// one success for this long, as the delivery stage does for push
	// endpoints. Default partition.DefaultDisableAfter (5 days).
	DisableAfter time.Duration
	// Notifier is told of the endpoints a runner disables. Default nil.
	Notifier Notifier
	// OnDead counts the dead letters runners write, by reason (the
	// delivery stage's laneway_dead_letters_total). Default nil.
	OnDead func(reason string, n int)
	// Recheck: default DefaultRecheck.
	Recheck time.Duration
	// Registerer receives the batch metrics. Default: none.
	Registerer prometheus.Registerer
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Rand gives retry jitter in [0,1). Default math/rand/v2.
	Rand func() float64
}

// Manager runs a runner for every batch endpoint whose deliveries
// partition this instance owns: the delivery stage tells it what it owns
// (Owned, Released), and it looks at the endpoints every Recheck for new
// and deleted ones.
type Manager struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics

	mu      sync.Mutex
	owned   map[int32]bool
	runners map[string]*runner
	parts   int // deliveries partitions; 0 until read

	orphansAt time.Time // when the topics were last listed for orphans

	started atomic.Bool
	stop    chan struct{}
	done    chan struct{}
}

// New returns a Manager; Start runs it.
func New(cfg Config) (*Manager, error) {
	if cfg.Client == nil || cfg.Group == "" || cfg.Endpoints == nil || cfg.Sender == nil || cfg.Breakers == nil ||
		cfg.DeadLetters == nil || cfg.Watcher == nil {
		return nil, errors.New("batch: Client, Group, Endpoints, Sender, Breakers, DeadLetters and Watcher are required")
	}
	cfg.Topics = cfg.Topics.WithDefaults()
	cfg.Recheck = valutil.PositiveOr(cfg.Recheck, DefaultRecheck)
	cfg.DisableAfter = valutil.PositiveOr(cfg.DisableAfter, partition.DefaultDisableAfter)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Now = timing.Clock(cfg.Now)
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Manager{cfg: cfg, log: cfg.Logger, metrics: newMetrics(cfg.Registerer), owned: map[int32]bool{},
		runners: map[string]*runner{}, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Start runs the rescan loop until Stop (ctx is not its lifetime, nor used
// otherwise). It cannot fail.
func (m *Manager) Start(context.Context) error {
	m.started.Store(true)
	go m.loop()
	return nil
}

// Stop stops every runner (a batch in flight is canceled: the next owner
// sends it again) and the loop, and waits for their goroutines; ctx is not
// used. It may be called once, started or not. It returns nil.
func (m *Manager) Stop(context.Context) error {
	close(m.stop)
	if m.started.Load() {
		<-m.done
	}
	m.mu.Lock()
	rs := make([]*runner, 0, len(m.runners))
	for id, r := range m.runners {
		rs = append(rs, r)
		delete(m.runners, id)
	}
	m.owned = map[int32]bool{}
	m.mu.Unlock()
	stopAll(rs, time.Time{})
	return nil
}

// Owned starts the runners of partition p's batch endpoints.
func (m *Manager) Owned(p int32) {
	m.mu.Lock()
	m.owned[p] = true
	m.mu.Unlock()
	m.rescan()
}

// Released stops the runners of partition p's batch endpoints before the
// partition goes to another owner, so that two instances never send one
// endpoint's batches at once: a batch still out at deadline is canceled.
func (m *Manager) Released(p int32, deadline time.Time) {
	m.mu.Lock()
	delete(m.owned, p)
	var rs []*runner
	for id, r := range m.runners {
		if r.part == p {
			rs = append(rs, r)
			delete(m.runners, id)
		}
	}
	m.mu.Unlock()
	stopAll(rs, deadline)
}

// stopAll stops runners, letting a batch in flight finish until deadline
// (zero: cancel at once).
func stopAll(rs []*runner, deadline time.Time) {
	for _, r := range rs {
		if deadline.IsZero() {
			r.cancel()
		}
	}
	for _, r := range rs {
		if !deadline.IsZero() {
			t := time.AfterFunc(time.Until(deadline), r.cancel)
			r.stopSoon()
			<-r.done
			t.Stop()
		}
		r.cancel()
		<-r.done
	}
}

func (m *Manager) loop() {
	defer close(m.done)
	timing.Every(m.stop, m.cfg.Recheck, m.rescan)
}

// rescan starts a runner for every batch endpoint of an owned partition
// that has none. Runners end by themselves (a deleted endpoint's feed
// drained) or when their partition is released.
func (m *Manager) rescan() {
	n, err := m.partitions()
	if err != nil {
		m.log.Warn("batch: the deliveries partitions are unknown; retrying", "err", err)
		return
	}
	byKey := kgo.StickyKeyPartitioner(nil).ForTopic(m.cfg.Topics.Deliveries)
	orphans := m.orphans()
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, r := range m.runners {
		select {
		case <-r.done:
			delete(m.runners, id) // it ended by itself
		default:
		}
	}
	var ids []string
	for _, ep := range m.cfg.Endpoints.List() {
		if ep.Batched() {
			ids = append(ids, ep.ID)
		}
	}
	for _, id := range append(ids, orphans...) {
		if m.runners[id] != nil {
			continue
		}
		p := int32(byKey.Partition(&kgo.Record{Key: []byte(id)}, n))
		if m.owned[p] {
			m.runners[id] = m.startRunner(id, p)
		}
	}
}

// orphanEvery is how often the topics are listed for the backlogs of
// batch endpoints deleted while no runner of theirs was alive.
const orphanEvery = 30 * time.Second

// orphans returns the ids of batch topics whose endpoint is gone: a
// runner drains each into dead letters (endpoint_deleted), then deletes
// it. Without this, an endpoint deleted during a restart or a rebalance
// would leave its backlog neither sent nor dead-lettered.
func (m *Manager) orphans() []string {
	now := m.cfg.Now()
	m.mu.Lock()
	due := now.Sub(m.orphansAt) >= orphanEvery
	if due {
		m.orphansAt = now
	}
	m.mu.Unlock()
	if !due {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := kadm.NewClient(m.cfg.Client).ListTopics(ctx)
	if err != nil {
		m.log.Warn("batch: listing topics for deleted endpoints' backlogs failed", "err", err)
		return nil
	}
	// Only a topic this Laneway's cursor group has a position for is its
	// own (every runner commits one when it starts): another Laneway on
	// the cluster with the same prefix keeps its backlogs.
	ours, err := kadm.NewClient(m.cfg.Client).FetchOffsets(ctx, m.cfg.Group)
	if err != nil {
		if !errors.Is(err, kerr.GroupIDNotFound) {
			m.log.Warn("batch: reading the cursors for deleted endpoints' backlogs failed", "err", err)
		}
		return nil
	}
	var out []string
	for _, name := range listed.Names() {
		id, ok := strings.CutPrefix(name, m.cfg.Topics.BatchPrefix)
		if _, exists := m.cfg.Endpoints.Get(id); !ok || id == "" || exists {
			continue
		}
		if _, has := ours.Lookup(name, 0); has {
			out = append(out, id)
		}
	}
	return out
}

// partitions reads the deliveries topic's partition count once.
func (m *Manager) partitions() (int, error) {
	m.mu.Lock()
	n := m.parts
	m.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := kadm.NewClient(m.cfg.Client).ListTopics(ctx, m.cfg.Topics.Deliveries)
	if err != nil {
		return 0, err
	}
	d, ok := td[m.cfg.Topics.Deliveries]
	if !ok || d.Err != nil || len(d.Partitions) == 0 {
		return 0, errors.Join(errors.New("no metadata for the deliveries topic"), d.Err)
	}
	m.mu.Lock()
	m.parts = len(d.Partitions)
	m.mu.Unlock()
	return len(d.Partitions), nil
}

func (m *Manager) startRunner(id string, p int32) *runner {
	topic := m.cfg.Topics.BatchFeed(id)
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{m: m, id: id, topic: topic, part: p, kr: kread.NewReader(m.cfg.Client, topic),
		cancel: cancel, done: make(chan struct{}), stopping: make(chan struct{})}
	go r.run(ctx)
	return r
}

// removeFeed deletes a deleted batch endpoint's drained feed and cursor.
func (m *Manager) removeFeed(ctx context.Context, id, topic string) {
	adm := kadm.NewClient(m.cfg.Client)
	if err := topics.DeleteFeed(ctx, adm, topic); err != nil {
		m.log.Warn("batch: deleting a deleted endpoint's feed failed", "endpoint", id, "err", err)
	}
	offs := kadm.Offsets{}
	offs.AddOffset(topic, 0, 0, -1)
	if _, err := adm.DeleteOffsets(ctx, m.cfg.Group, offs.TopicsSet()); err != nil {
		m.log.Warn("batch: deleting a deleted endpoint's cursor failed", "endpoint", id, "err", err)
	}
}
