package breaker

import (
	"time"

	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Defaults of Config, from the delivery contract.
const (
	DefaultThreshold  = 20
	DefaultFirstPause = 5 * time.Minute
	DefaultMaxPause   = time.Hour
)

// Config tunes the transitions. The zero Config is the contract's.
type Config struct {
	// Threshold is the number of consecutive failures that opens the
	// breaker. Default: DefaultThreshold (20).
	Threshold int

	// FirstPause is how long the breaker stays open after the streak
	// reaches Threshold. Default: DefaultFirstPause (5m).
	FirstPause time.Duration

	// MaxPause caps the pause, which each failed probe round doubles.
	// Default: DefaultMaxPause (1h). A MaxPause below FirstPause is raised
	// to FirstPause.
	MaxPause time.Duration
}

func (c Config) withDefaults() Config {
	c.Threshold = valutil.PositiveOr(c.Threshold, DefaultThreshold)
	c.FirstPause = valutil.PositiveOr(c.FirstPause, DefaultFirstPause)
	c.MaxPause = valutil.PositiveOr(c.MaxPause, DefaultMaxPause)
	c.MaxPause = max(c.MaxPause, c.FirstPause)
	return c
}

// State is where a breaker is.
type State string

const (
	// Closed lets every attempt through (within the lane's own limit). The
	// empty State, that of the zero Breaker, is closed too.
	Closed State = "closed"
	// Open lets nothing through until PausedUntil.
	Open State = "open"
	// Probing follows a pause: at most max_concurrency attempts, the
	// probes, are in flight at once, and the first result decides.
	Probing State = "probing"
)

// String returns the state's name, "closed" for the empty State.
func (s State) String() string {
	if s == "" {
		return string(Closed)
	}
	return string(s)
}

// Breaker is the state of one endpoint's breaker, the value the Store
// persists as JSON. The zero Breaker is closed with no failures: it is what a
// new endpoint, or one whose state Redis lost, starts from.
type Breaker struct {
	// State is empty in the zero Breaker, which is closed; State.String
	// names it "closed" for display.
	State State `json:"state,omitempty"`

	// ConsecutiveFailures counts the failures recorded since the last
	// success, including those that arrive while the breaker is open.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`

	// FailingSince is when the first of those failures was recorded; zero
	// after a success. The engine disables an endpoint that has been
	// failing for too long (5 days).
	FailingSince time.Time `json:"failing_since,omitzero"`

	// OpenedAt is when the streak opened the breaker. Re-opening after a
	// failed probe round keeps it, so now − OpenedAt is how long the
	// endpoint has been paused. Zero while closed.
	OpenedAt time.Time `json:"opened_at,omitzero"`

	// PausedUntil is when the current pause ends and probing may start.
	// Zero while closed.
	PausedUntil time.Time `json:"paused_until,omitzero"`

	// Pause is the length of the current pause, doubled by each failed
	// probe round. Zero while closed.
	Pause time.Duration `json:"pause_ns,omitempty"`
}

// FailingFor returns how long the endpoint has been failing without a
// success in between, or 0 if its last result was a success.
func (b Breaker) FailingFor(now time.Time) time.Duration {
	if b.FailingSince.IsZero() {
		return 0
	}
	return now.Sub(b.FailingSince)
}

// healthy reports whether b is closed with no failures, which is what a
// missing key reads as.
func (b Breaker) healthy() bool {
	return b == Breaker{} || b == Breaker{State: Closed}
}

// Decision is Allow's answer.
type Decision struct {
	// Allowed says the lane may start one attempt now.
	Allowed bool

	// Probe says the breaker is probing: an attempt started now is a probe.
	Probe bool

	// Wait is the time left of the pause when the breaker is open; 0 when
	// the attempt is allowed or the lane only waits for a probe's result.
	Wait time.Duration
}

// Allow decides whether a lane with inFlight attempts under way may start
// one more at now, and returns the breaker to keep: an open breaker whose
// pause is over moves to probing.
//
// A closed breaker always allows: the lane enforces its own limit. A probing
// one allows while inFlight < maxConcurrency (at least one probe, so a lane
// misconfigured with 0 still recovers).
func Allow(b Breaker, now time.Time, maxConcurrency, inFlight int) (Breaker, Decision) {
	if b.State == Open {
		if now.Before(b.PausedUntil) {
			return b, Decision{Wait: b.PausedUntil.Sub(now)}
		}
		b.State = Probing
	}
	if b.State != Probing {
		return b, Decision{Allowed: true}
	}
	return b, Decision{Allowed: inFlight < max(maxConcurrency, 1), Probe: true}
}

// Record returns the breaker after an attempt finished at now.
//
// A success closes the breaker and forgets the streak, whatever the state:
// the endpoint answered, and one success is what the contract asks for. That
// includes a success arriving while open, from an attempt started before the
// pause or a probe of a round another probe already failed.
//
// A probe round is the set of probes sent after one pause, and its first
// result decides it. A failure while probing re-opens the breaker with the
// pause doubled (up to MaxPause). The round's other probes then finish while
// the breaker is open, and a failure while open is counted in the streak but
// does not extend the pause: the round that attempt belonged to, or the
// streak that opened the breaker, has already been paid for.
func Record(b Breaker, success bool, now time.Time, cfg Config) Breaker {
	if success {
		return Breaker{State: Closed}
	}
	cfg = cfg.withDefaults()
	b.ConsecutiveFailures++
	if b.FailingSince.IsZero() {
		b.FailingSince = now
	}
	switch b.State {
	case Open:
		return b
	case Probing:
		return pause(b, now, doubled(b.Pause, cfg))
	}
	// Closed, or a state this version does not know, which reads as closed.
	if b.ConsecutiveFailures < cfg.Threshold {
		b.State = Closed
		return b
	}
	b.OpenedAt = now
	return pause(b, now, cfg.FirstPause)
}

func pause(b Breaker, now time.Time, d time.Duration) Breaker {
	b.State = Open
	b.Pause = d
	b.PausedUntil = now.Add(d)
	return b
}

// doubled returns the pause after a failed probe round. A pause below
// FirstPause (only possible from a damaged stored value) restarts from it.
func doubled(p time.Duration, cfg Config) time.Duration {
	p = max(p, cfg.FirstPause)
	if p > cfg.MaxPause/2 { // also keeps 2*p from overflowing
		return cfg.MaxPause
	}
	return 2 * p
}
