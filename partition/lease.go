package partition

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of LeaseConfig.
const (
	// DefaultLeaseDrift bounds how much slower this host's clock may run
	// than the group coordinator's: 1 %, a hundred times what an
	// undisciplined quartz oscillator drifts (±100 ppm).
	DefaultLeaseDrift = 0.01
	// DefaultLeaseMargin is taken off every lease on top of the drift.
	DefaultLeaseMargin = 500 * time.Millisecond
)

// Lease fences a member's attempts: it starts one only while the group
// cannot have given the member's partitions to another member, and only
// if the attempt will have ended by then.
//
// A group member keeps its partitions while the coordinator hears from it
// within the session timeout. A heartbeat the coordinator answered without
// an error was received after it was sent, so measured from its sending the
// coordinator keeps the member for at least the session timeout: that is
// the lease. It is shortened by the drift bound (a slow local clock measures
// the session as shorter than the coordinator does) and a margin, and it
// only ever grows from answers, never from the passing of time. A process
// that stalls (a GC pause, a frozen VM or container, a cut to the
// coordinator) finds its lease expired when it wakes, since the monotonic
// clock went on meanwhile, and starts nothing until a new heartbeat is
// answered, which a member the group dropped never gets.
//
// An attempt starts only if now + AttemptTimeout is within the lease, so
// every attempt ends (answered or timed out) before the next owner can
// exist, and the receiver, which has AttemptTimeout to answer, has finished
// with it by then. Safe for concurrent use: the heartbeats renew it while
// the owners read it.
type Lease struct {
	cfg LeaseConfig
	// length is how long after a confirmed heartbeat's sending the lease
	// lasts: SessionTimeout × (1 − Drift) − Margin.
	length time.Duration

	mu        sync.Mutex
	until     time.Time // the lease's end; zero: none held
	revokedAt time.Time // heartbeats sent before it renew nothing
}

// LeaseConfig configures a Lease.
type LeaseConfig struct {
	// SessionTimeout is the consumer group's session timeout: the
	// coordinator gives a member's partitions away no sooner than this
	// after the last heartbeat it received from it. Required.
	SessionTimeout time.Duration
	// AttemptTimeout bounds one attempt (the delivery contract's 5 s): an
	// attempt starts only if it ends within the lease. Required.
	AttemptTimeout time.Duration
	// Drift bounds how much slower the local clock may run than the
	// coordinator's, as a fraction. Default DefaultLeaseDrift (1 %).
	Drift float64
	// Margin is taken off the lease for the time between reading the clock
	// and a request leaving. It must be at least Drift × AttemptTimeout.
	// Default DefaultLeaseMargin (500ms), or Drift × AttemptTimeout if more.
	Margin time.Duration
}

// NewLease returns a lease that holds nothing until the first Renew.
func NewLease(cfg LeaseConfig) (*Lease, error) {
	if cfg.Drift == 0 {
		cfg.Drift = DefaultLeaseDrift
	}
	if cfg.Margin == 0 {
		cfg.Margin = max(DefaultLeaseMargin, time.Duration(cfg.Drift*float64(cfg.AttemptTimeout)))
	}
	if cfg.SessionTimeout <= 0 || cfg.AttemptTimeout <= 0 {
		return nil, errors.New("lease: SessionTimeout and AttemptTimeout are required")
	}
	if cfg.Drift < 0 || cfg.Drift >= 0.5 {
		return nil, fmt.Errorf("lease: Drift %v is outside [0, 0.5)", cfg.Drift)
	}
	if min := time.Duration(cfg.Drift * float64(cfg.AttemptTimeout)); cfg.Margin < min {
		return nil, fmt.Errorf("lease: Margin %v is below Drift × AttemptTimeout (%v)", cfg.Margin, min)
	}
	l := &Lease{cfg: cfg}
	l.length = l.Span(cfg.SessionTimeout)
	if l.length <= cfg.AttemptTimeout {
		return nil, fmt.Errorf("lease: a session timeout of %v leaves no room for a %v attempt (it needs more than %v)",
			cfg.SessionTimeout, cfg.AttemptTimeout, MinSessionTimeout(cfg.AttemptTimeout))
	}
	return l, nil
}

// MinSessionTimeout is the shortest session timeout under which attempts
// of attemptTimeout can start at all with the default drift and margin.
// A session timeout of several times it leaves attempts a wide window.
func MinSessionTimeout(attemptTimeout time.Duration) time.Duration {
	margin := max(DefaultLeaseMargin, time.Duration(DefaultLeaseDrift*float64(attemptTimeout)))
	return time.Duration(float64(attemptTimeout+margin)/(1-DefaultLeaseDrift)) + time.Millisecond
}

// Length is how long a lease lasts after the sending of the heartbeat
// that renewed it.
func (l *Lease) Length() time.Duration { return l.length }

// Renew records that a heartbeat sent at sentAt was answered without an
// error: the member was in the group when the coordinator received it. An
// answer to a heartbeat sent before the last Revoke renews nothing, and a
// late answer never shortens the lease.
func (l *Lease) Renew(sentAt time.Time) { l.RenewWithin(sentAt, time.Time{}) }

// RenewWithin is Renew, with the lease ending no later than atMost (zero:
// no such bound), even if an earlier renewal ran past it: a member the
// group keeps only until a deadline of its own, as a rebalance's, holds no
// lease beyond it.
func (l *Lease) RenewWithin(sentAt, atMost time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.revokedAt.IsZero() && !sentAt.After(l.revokedAt) {
		return
	}
	if until := sentAt.Add(l.length); until.After(l.until) {
		l.until = until
	}
	if !atMost.IsZero() && atMost.Before(l.until) {
		l.until = atMost
	}
}

// Span is how long the member may count on a period the coordinator
// measures as d: d shortened by the drift bound and the margin.
func (l *Lease) Span(d time.Duration) time.Duration {
	return time.Duration(float64(d)*(1-l.cfg.Drift)) - l.cfg.Margin
}

// Revoke ends the lease at once: the coordinator said that the member is
// not in the group (or not in the generation it owns its partitions in).
func (l *Lease) Revoke(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until, l.revokedAt = time.Time{}, now
}

// Until is the lease's end; the zero time when none is held.
func (l *Lease) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Allows reports whether an attempt starting at now ends within the lease.
// A nil Lease allows everything (no group: a test, or a single owner).
func (l *Lease) Allows(now time.Time) bool {
	if l == nil {
		return true
	}
	return !now.Add(l.cfg.AttemptTimeout).After(l.Until())
}

// Held reports whether the lease holds at now: the group cannot have given
// the member's partitions away yet. A nil Lease always holds.
func (l *Lease) Held(now time.Time) bool {
	return l == nil || now.Before(l.Until())
}

// Remaining is how long an attempt starting at now may run within the
// lease; zero or less when none may start. A nil Lease has no bound.
func (l *Lease) Remaining(now time.Time) time.Duration {
	if l == nil {
		return time.Duration(1<<63 - 1)
	}
	return l.Until().Sub(now)
}
