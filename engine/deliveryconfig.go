package engine

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/ops/health"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
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
	// DefaultSessionTimeout is Kafka's (and franz-go's) group session timeout.
	DefaultSessionTimeout = 45 * time.Second
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
	// Group is the consumer group reading deliveries. Default
	// topics.GroupsFor(topics.DefaultPrefix).Deliveries ("laneway-deliveries").
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
	// SessionTimeout is the consumer group's session timeout, set on the
	// stage's client after ClientOpts: the member's lease is measured
	// against it (fence.go), and attempts start only while an
	// AttemptTimeout fits in what is left of the lease, so it must be
	// well above AttemptTimeout (partition.MinSessionTimeout).
	// Default DefaultSessionTimeout (45s, Kafka's).
	SessionTimeout time.Duration
	// FenceInterval is how often the stage heartbeats to the group
	// coordinator to renew the member's lease (fence.go). Default a
	// twentieth of the client's session timeout, at most DefaultFenceInterval (1s).
	FenceInterval time.Duration
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
	// is committed. Default topics.ParkedGroup(Group): Group + "-parked".
	ParkedGroup string
	// ClientOpts are extra franz-go options (metrics hooks, TLS, SASL).
	ClientOpts []kgo.Opt
	// ReaderClientOpts are the same for the parked reader's own client
	// (hooks cannot be shared between clients).
	ReaderClientOpts []kgo.Opt
	// Metrics; nil disables them.
	Metrics *Metrics
	// OnEvent, when set, is told what the stage did: partitions assigned
	// and released, commits, lanes parked and unparked, attempts, breakers
	// opened and closed; for tests and tools that wait on what happened
	// instead of polling metrics. It is called synchronously, some calls
	// under a partition's lock: it must return quickly and not call the
	// stage (see Event). Default nil.
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
	c.Group = cmp.Or(c.Group, topics.GroupsFor(topics.DefaultPrefix).Deliveries)
	c.AttemptTimeout = valutil.PositiveOr(c.AttemptTimeout, deliver.DefaultTimeout)
	c.CommitInterval = valutil.PositiveOr(c.CommitInterval, DefaultCommitInterval)
	c.WakeInterval = valutil.PositiveOr(c.WakeInterval, DefaultWakeInterval)
	c.SessionTimeout = valutil.PositiveOr(c.SessionTimeout, DefaultSessionTimeout)
	c.FenceInterval = valutil.PositiveOr(c.FenceInterval, fenceIntervalFor(c.SessionTimeout))
	c.RevokeTimeout = valutil.PositiveOr(c.RevokeTimeout, c.AttemptTimeout+DefaultRevokeGrace)
	c.MaxPollRecords = valutil.PositiveOr(c.MaxPollRecords, DefaultMaxPollRecords)
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight()
	}
	c.InstanceBytes = valutil.PositiveOr(c.InstanceBytes, DefaultInstanceBytes)
	c.ParkedGroup = cmp.Or(c.ParkedGroup, topics.ParkedGroup(c.Group))
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Now = timing.Clock(c.Now)
	if c.Rand == nil {
		c.Rand = rand.Float64
	}
	return nil
}
