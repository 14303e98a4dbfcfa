package deliver

import (
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// RetryPolicy decides when a failed delivery is tried again and when it is
// given up. The zero value is the delivery contract's policy.
type RetryPolicy struct {
	// Base is the delay after the first failure; it doubles with each
	// further failure. Default: 30 s.
	Base time.Duration
	// Max caps any delay, Retry-After included. Default: 6 h.
	Max time.Duration
	// Min is the least delay ever returned, so a retry is never immediate.
	// Default: 1 s.
	Min time.Duration
	// MaxAttempts dead-letters a delivery after this many attempts.
	// Default: 20.
	MaxAttempts int
	// MaxAge dead-letters a delivery this long after it was created.
	// Default: 72 h.
	MaxAge time.Duration
}

// Defaults for RetryPolicy.
const (
	DefaultRetryBase   = 30 * time.Second
	DefaultRetryMax    = 6 * time.Hour
	DefaultRetryMin    = time.Second
	DefaultMaxAttempts = 20
	DefaultMaxAge      = 72 * time.Hour
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	p.Base = valutil.PositiveOr(p.Base, DefaultRetryBase)
	p.Max = valutil.PositiveOr(p.Max, DefaultRetryMax)
	p.Min = valutil.PositiveOr(p.Min, DefaultRetryMin)
	p.MaxAttempts = valutil.PositiveOr(p.MaxAttempts, DefaultMaxAttempts)
	p.MaxAge = valutil.PositiveOr(p.MaxAge, DefaultMaxAge)
	return p
}

// Delay returns the wait before the next attempt, after attempt failed
// attempts (1 after the first). With d = min(Max, Base·2^(attempt−1)) it is
// d/2 + rnd()·d/2: half fixed, half random so that the retries of a failed
// endpoint's many deliveries spread out instead of arriving together. It is
// at least Min. A longer retryAfter (from the response's Retry-After)
// replaces it, capped at Max. rnd returns values in [0, 1); nil means
// math/rand/v2.Float64.
func (p RetryPolicy) Delay(attempt int, retryAfter time.Duration, rnd func() float64) time.Duration {
	p = p.withDefaults()
	if rnd == nil {
		rnd = rand.Float64
	}
	d := p.backoff(attempt)
	delay := max(d/2+time.Duration(unit(rnd())*float64(d/2)), p.Min)
	if retryAfter > delay {
		delay = min(retryAfter, p.Max)
	}
	return delay
}

// backoff is min(Max, Base·2^(attempt−1)), doubling step by step so that a
// huge attempt count cannot overflow.
func (p RetryPolicy) backoff(attempt int) time.Duration {
	d := min(p.Base, p.Max)
	for i := 1; i < attempt && d < p.Max; i++ {
		if d > p.Max/2 {
			return p.Max
		}
		d *= 2
	}
	return d
}

// unit clamps a random value to [0, 1], so a broken rnd (NaN, negative,
// above one) cannot produce a delay outside the documented range.
func unit(f float64) float64 {
	if math.IsNaN(f) || f < 0 {
		return 0
	}
	return min(f, 1)
}

// Exhausted reports whether a delivery that has had attempts attempts and
// was created at createdAt must be dead-lettered instead of retried, and
// why: event.ReasonMaxAttempts ("max_attempts") or event.ReasonMaxAge
// ("max_age"). A zero createdAt skips the age check: an unknown age must not
// kill a delivery.
func (p RetryPolicy) Exhausted(attempts int, createdAt, now time.Time) (reason string, dead bool) {
	p = p.withDefaults()
	if attempts >= p.MaxAttempts {
		return event.ReasonMaxAttempts, true
	}
	if !createdAt.IsZero() && now.Sub(createdAt) >= p.MaxAge {
		return event.ReasonMaxAge, true
	}
	return "", false
}

// ParseRetryAfter reads a Retry-After header value: delta-seconds ("120")
// or an HTTP-date, taken relative to now. It returns false for an empty,
// malformed or negative value and for a date in the past. Absurdly large
// delays saturate; RetryPolicy.Delay caps them anyway.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		secs, err := strconv.ParseUint(v, 10, 64)
		if err != nil || secs > uint64(math.MaxInt64/int64(time.Second)) {
			return time.Duration(math.MaxInt64), true // only overflow is possible here
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		return 0, false
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
