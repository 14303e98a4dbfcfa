// Package timing is the one way Laneway waits on the clock: a sleep that a
// context (or a stop channel) cuts short, and a loop that calls a function
// at a fixed interval until told to stop; and the clock a component reads
// when its Config injects none.
package timing

import (
	"context"
	"time"
)

// Sleep waits d, or less if ctx ends first; it reports whether ctx is still
// live. A d of zero or less does not wait.
func Sleep(ctx context.Context, d time.Duration) bool {
	return SleepOr(ctx, nil, d)
}

// SleepOr is Sleep that also ends early, reporting false, once stop is
// closed (a nil stop never is).
func SleepOr(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	// An end that has come wins: with d of zero or less the timer below
	// would be ready too, and select would pick either at random.
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	default:
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}

// Every calls fn every d, the first time d after the call, until stop is
// closed; it returns then, never in the middle of fn (fn that must end
// sooner watches its own context). A tick that comes while fn runs is
// dropped, as time.Ticker drops it. d must be positive.
func Every(stop <-chan struct{}, d time.Duration, fn func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			fn()
		}
	}
}

// Clock is now, or time.Now when now is nil: what a Config's Now field
// (the clock a component reads, injected so tests can move it) defaults to.
func Clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}
