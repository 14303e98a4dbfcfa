package partition

import (
	"cmp"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/event"
)

// Defaults of Config.
const (
	DefaultParkAfter          = 30 * time.Second
	DefaultLaneBuffer         = 10000
	DefaultParkedWindow       = 256
	DefaultDisableAfter       = 5 * 24 * time.Hour
	DefaultMaxAppendsInFlight = 1024
	DefaultMaxDeadInFlight    = 1024
	DefaultMaxQueuedAppends   = 20000
	DefaultMaxTrackedOffsets  = 1 << 20
	DefaultReplayHold         = 15 * time.Second
	DefaultReplayHoldRecords  = 50000

	DefaultLaneBytes            = 32 << 20
	DefaultParkedWindowBytes    = 8 << 20
	DefaultMaxQueuedAppendBytes = 64 << 20
)

// Config configures an Owner.
type Config struct {
	// Partition is the deliveries partition owned, and the parked
	// partition of the same number. Required to be set by the caller.
	Partition int32
	// ParkedTopic is the topic parked records are appended to. Required.
	ParkedTopic string
	// DeadTopic is the topic dead letters go to. Required.
	DeadTopic string
	// Endpoints resolves endpoint config. Required.
	Endpoints Endpoints
	// Effects starts every asynchronous effect. Required.
	Effects Effects
	// Clock is the owner's time. Required.
	Clock Clock
	// Breakers pauses endpoints that keep failing. Nil disables the breaker.
	Breakers Breakers
	// Slots caps the instance's attempts in flight, shared by its owners.
	// Nil: no cap beyond each endpoint's max_concurrency.
	Slots Slots
	// Lease fences the owner's attempts: none starts unless it ends within
	// the member's group lease, so an owner that stalled past its session
	// timeout starts nothing beside the next owner (lease.go). Shared by
	// the member's owners. Nil: no fencing (a single owner, a test).
	Lease *Lease
	// Rand returns a float in [0,1) for retry jitter. Default math/rand/v2.
	Rand func() float64
	// Retry is the retry and dead-letter policy. Zero fields take the
	// delivery contract's defaults.
	Retry deliver.RetryPolicy
	// DisableAfter disables an endpoint that has failed without a single
	// success for this long (needs Breakers). Default DefaultDisableAfter (5 days).
	DisableAfter time.Duration
	// ParkAfter parks a lane whose oldest pending delivery has waited this
	// long, so it stops holding the partition's watermark. Default
	// DefaultParkAfter (30s).
	ParkAfter time.Duration
	// LaneBuffer parks a lane holding more unstarted deliveries than this.
	// Default DefaultLaneBuffer (10000).
	LaneBuffer int
	// LaneBytes parks a lane holding more bytes of deliveries than this,
	// pending and in flight, so that large payloads cannot fill memory
	// before LaneBuffer's count is reached. Default DefaultLaneBytes (32 MiB).
	LaneBytes int64
	// ParkedWindow is how many parked deliveries of one lane are read back
	// into memory at a time. Default DefaultParkedWindow (256).
	ParkedWindow int
	// ParkedWindowBytes bounds the bytes of a parked lane's window beside
	// its count (records staged behind the lookahead, at most a quarter of
	// the window, are not counted: they must load for any to start).
	// Default DefaultParkedWindowBytes (8 MiB).
	ParkedWindowBytes int64
	// MaxAppendsInFlight bounds the parked appends handed to the producer
	// and not yet acknowledged. Default DefaultMaxAppendsInFlight (1024).
	MaxAppendsInFlight int
	// MaxDeadInFlight bounds the dead letters handed to the producer and
	// not yet acknowledged. Default DefaultMaxDeadInFlight (1024). With
	// MaxAppendsInFlight it bounds what the owner keeps with the producer,
	// which the driver keeps below the producer's own buffer limit, so that
	// handing a record over never blocks (a completion may hand one over).
	MaxDeadInFlight int
	// MaxQueuedAppends is the parked appends waiting (queued, in flight or
	// to retry), and separately the dead letters waiting, beyond which
	// Backpressured reports true, so the driver stops fetching the
	// partition. Default DefaultMaxQueuedAppends (20000).
	MaxQueuedAppends int
	// MaxTrackedOffsets bounds the offset tracker: it keeps one entry
	// (40 bytes) per deliveries offset from the oldest unfinished delivery
	// to the newest fetched, so a delivery holding the watermark (an
	// attempt up to its timeout, a lane waiting to park) makes it grow
	// with the partition's throughput. Beyond it Backpressured reports
	// true and the driver stops fetching until the watermark moves; not
	// while the replay hold lasts, which ReplayHoldRecords bounds and which
	// ends only once its records are fetched. Default
	// DefaultMaxTrackedOffsets (1 Mi offsets, 40 MiB), far above what
	// park_after lets build up at tens of thousands of deliveries/s.
	MaxTrackedOffsets int
	// MaxQueuedAppendBytes is MaxQueuedAppends in bytes. Default
	// DefaultMaxQueuedAppendBytes (64 MiB).
	MaxQueuedAppendBytes int64
	// MaxProgressBytes bounds the parked progress committed as the
	// deliveries commit's metadata; Kafka's offset.metadata.max.bytes must
	// be above it. Beyond it, the endpoints least ahead of the parked commit
	// are left out (a restart reads their finished parked records again).
	// Default DefaultMaxProgressBytes (3072).
	MaxProgressBytes int
	// ReplayHold bounds how long, after assignment, no attempt starts while
	// the replay range (what the partition held beyond its committed
	// watermark at assignment) is read: a safety net for a replay end that
	// is not reached (Kafka unreachable at assignment); the hold normally
	// ends as soon as the range is routed. Default DefaultReplayHold (15s).
	ReplayHold time.Duration
	// ReplayHoldRecords bounds the records the replay hold keeps in memory
	// (lanes do not park during it): a longer replay starts once this many
	// are routed, and may then deliver a state the previous owner had
	// superseded after its successor. Default DefaultReplayHoldRecords (50000).
	ReplayHoldRecords int
	// InstanceID names this instance in health snapshots.
	InstanceID string
	// Metrics receives counts. Nil: none.
	Metrics Metrics
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Endpoints == nil || c.Effects == nil || c.Clock == nil || c.ParkedTopic == "" || c.DeadTopic == "" {
		return errors.New("partition owner: Endpoints, Effects, Clock, ParkedTopic and DeadTopic are required")
	}
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	setDefault(&c.DisableAfter, DefaultDisableAfter)
	setDefault(&c.ParkAfter, DefaultParkAfter)
	setDefault(&c.LaneBuffer, DefaultLaneBuffer)
	setDefault(&c.ParkedWindow, DefaultParkedWindow)
	setDefault(&c.MaxAppendsInFlight, DefaultMaxAppendsInFlight)
	setDefault(&c.MaxDeadInFlight, DefaultMaxDeadInFlight)
	setDefault(&c.MaxQueuedAppends, DefaultMaxQueuedAppends)
	setDefault(&c.MaxTrackedOffsets, DefaultMaxTrackedOffsets)
	setDefault(&c.ReplayHold, DefaultReplayHold)
	setDefault(&c.ReplayHoldRecords, DefaultReplayHoldRecords)
	setDefault(&c.MaxProgressBytes, DefaultMaxProgressBytes)
	setDefault(&c.LaneBytes, DefaultLaneBytes)
	setDefault(&c.ParkedWindowBytes, DefaultParkedWindowBytes)
	setDefault(&c.MaxQueuedAppendBytes, DefaultMaxQueuedAppendBytes)
	if c.Metrics == nil {
		c.Metrics = noMetrics{}
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return nil
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Owner is the deterministic core of one owned deliveries partition (and
// the parked partition of the same number): the offset tracker, a lane per
// endpoint, parking, retries, dead letters and the endpoint's breaker
// decisions.
//
// It starts no goroutine, reads no wall clock and never blocks: every
// effect goes through Config.Effects and every completion comes back as a
// method call. It is not safe for concurrent use; the driver (the delivery
// stage, or the simulator) serialises every call.
type Owner struct {
	cfg Config
	log *slog.Logger

	tracker       *Tracker // nil until the first record arrives
	highWatermark int64
	lastCommitted int64
	lastMetadata  string // the parked progress last committed, encoded

	lanes   map[string]*laneState
	waiting map[*laneState]struct{} // lanes with a head waiting on a retry delay or breaker
	// slotWaiting are lanes that found no free slot of Config.Slots, or
	// no Config.Lease: Tick pumps them again.
	slotWaiting map[*laneState]struct{}
	inFlight    int
	stopped     bool

	parking
	replay
	epochs
	dead      outbox[*DeadWrite]
	deadSeq   uint64
	stats     map[string]*endpointStats
	disabling map[string]disableState
	// disableReasons are the reasons of disables not yet confirmed.
	disableReasons map[string]string
	disableRetryAt time.Time           // failed disables are written again from then on
	breakerIDs     map[string]struct{} // every endpoint whose breaker this owner used
}

// laneState is a lane plus what the owner keeps about its endpoint.
type laneState struct {
	id      string
	lane    *Lane
	running map[*Task]struct{} // in flight, so parking can copy them
	// breakerLoaded is false until the breaker state a previous owner left
	// in Redis is loaded: the lane starts nothing before, or a new owner
	// would send a burst into an endpoint whose breaker is open.
	breakerLoaded bool
	// pausedUntil is when the endpoint's open breaker lets probes out.
	pausedUntil time.Time
	// dying is set while the lane runs at DeadLetterConcurrency for an
	// undeliverable endpoint: once it is active again, the lane takes the
	// endpoint's own limit back before it sends anything.
	dying bool
}

// Work is a task's payload: the delivery and where its record lives.
type Work struct {
	Delivery *event.Delivery
	// Body is the rendered payload, set by the driver on the first attempt
	// and kept across retries; BodyThin says it was rendered thin (an
	// endpoint switched between full and thin payloads renders it again).
	Body     []byte
	BodyThin bool
	parked   bool  // Task.Offset is a parked offset, not a deliveries one
	src      int64 // for parked work: the deliveries offset it came from
	seq      int64 // for parked work: its rank among its lane's records read back
	gone     bool  // for parked work still staged: superseded
	unread   bool  // for parked work still staged: a placeholder of a record that died unread
	ended    bool  // for parked work: an end marker says its delivery ended
	// deadLanded: its dead letter is in Kafka and its end marker queued.
	deadLanded bool
}

type disableState uint8

const (
	disableNone      disableState = iota
	disableInFlight               // a disable write is out
	disableRetrying               // the last write failed; retried by Tick
	disableConfirmed              // written; the endpoint config will show it
)

// NewOwner returns the owner of cfg.Partition. It reads nothing: call
// Assign to begin.
func NewOwner(cfg Config) (*Owner, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	o := &Owner{
		cfg: cfg, log: cfg.Logger.With("partition", cfg.Partition), lastCommitted: -1,
		lanes: map[string]*laneState{}, waiting: map[*laneState]struct{}{}, slotWaiting: map[*laneState]struct{}{},
		stats: map[string]*endpointStats{}, disabling: map[string]disableState{}, disableReasons: map[string]string{}, breakerIDs: map[string]struct{}{},
	}
	o.parking.init()
	o.replay.init()
	o.epochs.init(-1, 0)
	o.appends.seq = func(a *Append) uint64 { return a.seq }
	o.appends.issue = o.issueAppend
	o.appends.size = func(a *Append) int64 { return int64(len(a.Record.Value)) }
	o.dead.seq = func(w *DeadWrite) uint64 { return w.seq }
	o.dead.issue = cfg.Effects.WriteDead
	return o, nil
}

// Partition is the partition owned.
func (o *Owner) Partition() int32 { return o.cfg.Partition }

func (o *Owner) now() time.Time { return o.cfg.Clock.Now() }

// lane returns the endpoint's lane, creating it (and asking for its
// breaker's state) on first use.
func (o *Owner) lane(id string, maxConcurrency int) *laneState {
	ls, ok := o.lanes[id]
	if ok {
		return ls
	}
	ls = &laneState{id: id, lane: NewLane(id, maxConcurrency+btoi(mutated("new-lane-limit-plus-one"))), running: map[*Task]struct{}{}}
	o.lanes[id] = ls
	o.statsOf(id)
	b := o.cfg.Breakers
	ls.breakerLoaded = b == nil || b.Loaded(id) || mutated("breaker-not-warmed")
	if b != nil {
		o.breakerIDs[id] = struct{}{}
	}
	if !ls.breakerLoaded {
		o.cfg.Effects.WarmBreaker(id)
	}
	return ls
}

// BreakerWarmed lets the endpoint's lane start once its breaker is loaded
// (or its load failed: it then starts closed, as after a Redis flush).
func (o *Owner) BreakerWarmed(id string) {
	ls, ok := o.lanes[id]
	if !ok || ls.breakerLoaded {
		return
	}
	ls.breakerLoaded = true
	if !o.stopped {
		o.pump(ls, o.now())
		o.flushOutboxes(o.now())
	}
}

// flushOutboxes issues the parked appends and dead letters that may go.
func (o *Owner) flushOutboxes(now time.Time) {
	switch {
	case o.epoch >= 0: // a quarter of the queued bytes allowed may be with the producer
		o.appends.flush(now, o.cfg.MaxAppendsInFlight, o.cfg.MaxQueuedAppendBytes/4)
	case len(o.appends.failed) > 0 || len(o.appends.queued) > 0 && o.appends.queued[0].takeover:
		o.appends.flush(now, 1, 0) // before the takeover is settled, only it goes (epoch.go)
	}
	o.dead.flush(now, o.cfg.MaxDeadInFlight, 0)
}

// Backpressured reports whether the driver should stop fetching the
// partition: parked appends or dead letters are piling up (the parked or
// dead topic is slow or unavailable; an undeliverable endpoint's
// deliveries die as they are fetched), the owner is still reading its
// parked partition, or the offset tracker holds MaxTrackedOffsets (a
// delivery holds the watermark).
func (o *Owner) Backpressured() bool {
	return o.appends.pending() > o.cfg.MaxQueuedAppends || o.appends.bytes > o.cfg.MaxQueuedAppendBytes ||
		o.dead.pending() > o.cfg.MaxQueuedAppends || !o.discovered || !o.cfg.Lease.Held(o.now()) ||
		(!o.holding && o.tracker != nil && o.tracker.Len() >= o.cfg.MaxTrackedOffsets)
}

// DeliveriesWatermark is the deliveries offset below which everything is
// finished.
func (o *Owner) DeliveriesWatermark() int64 {
	if o.tracker == nil {
		return o.deliveriesAt
	}
	return o.tracker.Watermark()
}

// Stop gives the partition up: every unstarted task is dropped (the next
// owner reads it again from the committed watermark), nothing new starts,
// and produces not yet issued are dropped (their offsets stay unfinished,
// so the watermark holds them). Attempts and produces in flight still
// complete through their methods; Idle reports when none is left.
func (o *Owner) Stop() {
	if o.stopped {
		return
	}
	o.stopped = true
	for _, ls := range o.lanes {
		ls.lane.DrainUnstarted()
	}
	clear(o.waiting)
	clear(o.slotWaiting)
	o.early = nil
	o.appends.drop()
	o.dead.drop()
}

// Stopped reports whether Stop was called.
func (o *Owner) Stopped() bool { return o.stopped }

// Idle reports whether nothing the owner started is still out: no attempt,
// no append, no dead letter and no parked read.
func (o *Owner) Idle() bool {
	return o.inFlight == 0 && o.appends.inFlight == 0 && o.dead.inFlight == 0 && o.reads == 0
}

// EndpointIDs returns every endpoint whose breaker this owner used, for the
// driver to hand their breakers over (flush to Redis, forget) on release.
func (o *Owner) EndpointIDs() []string {
	ids := make([]string, 0, len(o.breakerIDs))
	for id := range o.breakerIDs {
		ids = append(ids, id)
	}
	return ids
}

// sortedKeys returns m's keys in order: the owner iterates maps in a fixed
// order, so that one seed of the simulator always makes the same run.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type noMetrics struct{}

func (noMetrics) Attempt(string, string, float64) {}
func (noMetrics) Ended(string)                    {}
func (noMetrics) Dead(string)                     {}
func (noMetrics) Superseded(int)                  {}
func (noMetrics) Parked(string, string)           {}
func (noMetrics) Unparked(string)                 {}
func (noMetrics) ParkedExpired(int)               {}
func (noMetrics) StaleSkipped()                   {}
