package partition

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/ops/health"
)

// The Owner makes no call that blocks and starts no goroutine: every effect
// goes through one of the interfaces below, given at construction. An effect
// that completes later (an HTTP attempt, a produce, a read) is started by a
// method that must return at once, and its completion is handed back by the
// driver through the matching Owner method (named in each comment). The
// driver serialises every call into an Owner, completions included.

// Clock is the owner's only source of time.
type Clock interface {
	Now() time.Time
}

// Endpoints is the owner's view of endpoint config, in memory.
type Endpoints interface {
	Get(id string) (endpoint.Endpoint, bool)
}

// Breakers is the per-endpoint breaker state, in memory while this instance
// owns the endpoint (package breaker's Cache). Loading what a previous owner
// left in Redis is an effect of its own: Effects.WarmBreaker.
type Breakers interface {
	Allow(endpointID string, now time.Time, maxConcurrency, inFlight int) breaker.Decision
	Record(endpointID string, success bool, now time.Time) breaker.Breaker
	Get(endpointID string) breaker.Breaker
	Loaded(endpointID string) bool
	Reset(endpointID string)
}

// Effects are the owner's asynchronous effects.
type Effects interface {
	// Send makes the attempt's HTTP request; then Owner.AttemptDone.
	Send(a *Attempt)
	// Append produces a.Record to the parked partition; then
	// Owner.Appended. Appends are issued in parking order, and a failed
	// append must fail every append issued after it (franz-go's idempotent
	// producer does), so that a retry never lands behind a later record.
	Append(a *Append)
	// Read fetches the parked partition from r.From; then Owner.ReadDone.
	Read(r *Read)
	// WriteDead produces a dead letter; then Owner.DeadWritten.
	WriteDead(w *DeadWrite)
	// Disable marks the endpoint disabled in its store, its status only;
	// then Owner.DisableDone.
	Disable(endpointID, reason string)
	// WarmBreaker loads the endpoint's breaker from Redis, bounded in time
	// (a failed load counts as closed); then Owner.BreakerWarmed.
	WarmBreaker(endpointID string)
	// LoadHealth loads the endpoint's last published health snapshot; then
	// Owner.HealthLoaded. It may do nothing.
	LoadHealth(endpointID string)
}

// Metrics receives the owner's counts. Nil-safe wrappers live in the
// owner; an implementation never sees a nil receiver.
type Metrics interface {
	Attempt(endpointID, outcome string, seconds float64)
	Ended(outcome string)
	Dead(reason string)
	Superseded(n int)
	Parked(endpointID, reason string)
	Unparked(endpointID string)
	ParkedExpired(n int)
	// StaleSkipped counts a stale parked record skipped, by the
	// assignment scan or a lane's read-back (see skipStale).
	StaleSkipped()
}

// Attempt is one HTTP attempt the owner wants made.
type Attempt struct {
	Delivery *event.Delivery
	// Endpoint is the endpoint's config when the attempt started.
	Endpoint endpoint.Endpoint
	// Now is when the owner started it (the webhook-timestamp).
	Now  time.Time
	task *Task
	lane *laneState
	slot bool // holds a slot of Config.Slots
}

// Work returns the task's cached rendering, kept across retries: the
// driver renders the body once and stores it here. Only the driver of
// this attempt touches it while the attempt runs.
func (a *Attempt) Work() *Work { return a.task.Payload.(*Work) }

// AttemptResult is what an attempt came to.
type AttemptResult struct {
	deliver.Result
	// Invalid is set when the request could not be built at all (an
	// unrenderable delivery, unusable secrets): the delivery is dead.
	Invalid error
}

// Append is a record for the parked partition.
type Append struct {
	Record *kgo.Record
	lane   *parkedLane
	src    int64 // the deliveries offset the append finishes; -1 for none
	seq    uint64
	marker bool   // an end marker, not a delivery
	ended  func() // for an end marker: runs once it is in Kafka (may be nil)
	// takeover: the owner's takeover record (epoch.go), not a delivery.
	takeover bool
}

// Read asks for parked records of one partition from From.
type Read struct {
	From int64
	lane *parkedLane // nil for the assignment scan
}

// ReadResult is one read of the parked partition.
type ReadResult struct {
	Records []*kgo.Record
	// End is the high watermark: nothing at or beyond it exists yet.
	End int64
	// LogStart is the partition's first offset (retention).
	LogStart int64
	// Next is the offset to read from next: past every record and marker
	// the read covered.
	Next int64
	// OutOfRange: From is below LogStart (records expired).
	OutOfRange bool
}

// DeadWrite is a dead letter to produce.
type DeadWrite struct {
	Letter event.DeadLetter
	done   func()
	seq    uint64
}

// HealthSnapshot is the health.Snapshot type, named here for the driver.
type HealthSnapshot = health.Snapshot
