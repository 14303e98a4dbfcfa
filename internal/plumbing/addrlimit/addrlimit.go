// Package addrlimit keeps a token bucket per client address, in bounded
// memory: the inbound front door limits requests with it, the feed routes
// failed authentications.
package addrlimit

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiter holds the buckets of the addresses seen lately. Past maxAddrs,
// and after idle ones are forgotten, new addresses share one bucket.
type Limiter struct {
	rate     rate.Limit
	burst    int
	maxAddrs int
	now      func() time.Time

	mu       sync.Mutex
	addrs    map[netip.Prefix]*rate.Limiter
	overflow *rate.Limiter // shared by new addresses once addrs is full
	swept    time.Time
}

// New is a Limiter of perSecond tokens a second and burst at once per
// address, tracking at most maxAddrs addresses.
func New(perSecond float64, burst, maxAddrs int, now func() time.Time) *Limiter {
	return &Limiter{
		rate: rate.Limit(perSecond), burst: burst, maxAddrs: maxAddrs, now: now,
		addrs:    map[netip.Prefix]*rate.Limiter{},
		overflow: rate.NewLimiter(rate.Limit(perSecond), burst),
	}
}

// Allow takes a token for the address; when there is none it returns how
// long until there will be, and takes nothing.
func (l *Limiter) Allow(a netip.Addr) (bool, time.Duration) {
	now := l.now()
	return Take(l.bucket(a, now), now)
}

// Wait reports how long until the address has a token, 0 when it has one
// now. It takes nothing: with Charge, it limits failures only.
func (l *Limiter) Wait(a netip.Addr) time.Duration {
	now := l.now()
	r := l.bucket(a, now).ReserveN(now, 1)
	if !r.OK() {
		return time.Second
	}
	defer r.CancelAt(now)
	return r.DelayFrom(now)
}

// Charge takes a token for the address, going into debt if need be: a
// failure is counted even when it came while the address was limited.
func (l *Limiter) Charge(a netip.Addr) {
	now := l.now()
	l.bucket(a, now).ReserveN(now, 1)
}

// Tracked is how many addresses have their own bucket.
func (l *Limiter) Tracked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.addrs)
}

func (l *Limiter) bucket(a netip.Addr, now time.Time) *rate.Limiter {
	key := Key(a)
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.addrs[key]; ok {
		return b
	}
	return l.newAddress(key, now)
}

// newAddress makes a bucket for key, or hands out the shared overflow one
// when the map is full even after forgetting the idle addresses.
func (l *Limiter) newAddress(key netip.Prefix, now time.Time) *rate.Limiter {
	if len(l.addrs) >= l.maxAddrs && now.Sub(l.swept) >= time.Second {
		l.sweep(now)
	}
	if len(l.addrs) >= l.maxAddrs {
		return l.overflow
	}
	b := rate.NewLimiter(l.rate, l.burst)
	l.addrs[key] = b
	return b
}

// sweep forgets addresses whose bucket has refilled: a new bucket would be
// the same, so nothing an address earned or spent is lost. At most once a
// second, so that a full map under attack costs one pass per second.
func (l *Limiter) sweep(now time.Time) {
	l.swept = now
	for k, b := range l.addrs {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(l.addrs, k)
		}
	}
}

// Take spends a token now, or reports the wait without spending one: a
// refused request must not push the next allowed one further out.
func Take(b *rate.Limiter, now time.Time) (bool, time.Duration) {
	r := b.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Key is the bucket of an address: itself for IPv4, its /64 for IPv6, the
// block one host usually holds.
func Key(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits) // bits is valid for the address family
	return p
}

// ClientAddr is the address a request is limited by: the peer, or, when
// the peer is a trusted proxy, the last X-Forwarded-For entry that is not.
// A peer address that cannot be parsed (not TCP) is the zero address, one
// bucket for all such requests.
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := parseHostAddr(r.RemoteAddr)
	if !isTrusted(peer, trusted) {
		return peer
	}
	forwarded := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(forwarded) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(forwarded[i]))
		if err != nil {
			return peer // a garbled chain: trust nothing a sender could have written
		}
		if !isTrusted(a.Unmap(), trusted) {
			return a.Unmap()
		}
	}
	return peer
}

func parseHostAddr(hostport string) netip.Addr {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if a.IsValid() && p.Contains(a) {
			return true
		}
	}
	return false
}

// RetryAfterSeconds is a Retry-After value: whole seconds, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
