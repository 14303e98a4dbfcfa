package api

import (
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/laneway/laneway/internal/plumbing/addrlimit"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Defaults for FeedAuthLimit.
const (
	DefaultFeedAuthFailures     = 20
	DefaultFeedAuthWindow       = time.Minute
	DefaultFeedAuthMaxAddresses = 100_000
)

// FeedAuthLimit bounds failed authentications at the feed routes per
// client address, so that the public listener is no oracle for guessing
// consumer tokens: an address may fail Failures times at once and earns
// one failure back every Window/Failures; beyond that its feed requests
// get 429 with Retry-After, whatever token they carry. A success costs
// nothing. Per instance.
type FeedAuthLimit struct {
	// Failures is how many failed authentications one address (IPv6: one
	// /64) may make at once. Default 20; negative: no limit.
	Failures int
	// Window is how long an address takes to earn all its Failures back.
	// Default 1 minute.
	Window time.Duration
	// MaxAddresses bounds the addresses tracked at once (memory). Beyond
	// it, new addresses share one allowance. Default 100,000.
	MaxAddresses int
	// TrustedProxies are the peers whose X-Forwarded-For names the client.
	// Default none: the peer address.
	TrustedProxies []netip.Prefix
}

func (l FeedAuthLimit) withDefaults() FeedAuthLimit {
	if l.Failures == 0 {
		l.Failures = DefaultFeedAuthFailures
	}
	l.Window = valutil.PositiveOr(l.Window, DefaultFeedAuthWindow)
	l.MaxAddresses = valutil.PositiveOr(l.MaxAddresses, DefaultFeedAuthMaxAddresses)
	return l
}

// feedGuard counts failed feed authentications per client address.
type feedGuard struct {
	failures *addrlimit.Limiter // nil: no limit
	trusted  []netip.Prefix
}

func newFeedGuard(l FeedAuthLimit, now func() time.Time) feedGuard {
	l = l.withDefaults()
	if l.Failures < 0 {
		return feedGuard{}
	}
	perSecond := float64(l.Failures) / l.Window.Seconds()
	return feedGuard{failures: addrlimit.New(perSecond, l.Failures, l.MaxAddresses, now), trusted: l.TrustedProxies}
}

// refused answers 429 when r's address has used up its failures.
func (g feedGuard) refused(w http.ResponseWriter, r *http.Request) bool {
	if g.failures == nil {
		return false
	}
	wait := g.failures.Wait(addrlimit.ClientAddr(r, g.trusted))
	if wait <= 0 {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(addrlimit.RetryAfterSeconds(wait)))
	httpjson.Error(w, http.StatusTooManyRequests, "too many failed feed authentications from this address")
	return true
}

// failed counts a failed authentication against r's address.
func (g feedGuard) failed(r *http.Request) {
	if g.failures != nil {
		g.failures.Charge(addrlimit.ClientAddr(r, g.trusted))
	}
}
