package inbound

import (
	"cmp"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Rate limit defaults. They are per instance: an anonymous sender spread
// over N instances gets N times as much.
const (
	DefaultPerAddressRate = 100.0
	DefaultPerSourceRate  = 500.0
	DefaultMaxAddresses   = 100_000
)

// RateLimits bound how often the front door takes a request, before it
// reads a body or writes to Kafka. A refused request gets 429 with
// Retry-After and is counted, never stored (storing it would cost what the
// limit saves). Providers retry 429s (GitHub does not: its deliveries show
// as failed and can be redelivered by hand), so size them for the busiest
// provider's bursts.
type RateLimits struct {
	// PerAddress is the sustained requests/s one client address may make,
	// all sources together. IPv6 addresses count per /64, the block one
	// host usually holds. Default 100; negative: no limit.
	PerAddress float64
	// PerAddressBurst is how many requests one address may make at once.
	// Default 2 × PerAddress.
	PerAddressBurst int
	// PerSource is the sustained requests/s one source takes from all
	// addresses together: it bounds a distributed flood at one source.
	// Default 500; negative: no limit.
	PerSource float64
	// PerSourceBurst is how many requests one source may take at once.
	// Default 2 × PerSource.
	PerSourceBurst int
	// MaxAddresses bounds the addresses tracked at once (memory). Beyond it,
	// and after idle ones are forgotten, new addresses share one limiter of
	// PerAddress. Default 100,000 (about 20 MB).
	MaxAddresses int
	// TrustedProxies are the peers (an ingress, a load balancer) whose
	// X-Forwarded-For is believed: the client is the last address in it
	// that is not itself a trusted proxy. Default none: the peer address,
	// which behind a proxy makes every sender one address.
	TrustedProxies []netip.Prefix
}

func (r *RateLimits) setDefaults() {
	r.PerAddress = cmp.Or(r.PerAddress, DefaultPerAddressRate)
	r.PerSource = cmp.Or(r.PerSource, DefaultPerSourceRate)
	r.PerAddressBurst = valutil.PositiveOr(r.PerAddressBurst, burstOf(r.PerAddress))
	r.PerSourceBurst = valutil.PositiveOr(r.PerSourceBurst, burstOf(r.PerSource))
	r.MaxAddresses = valutil.PositiveOr(r.MaxAddresses, DefaultMaxAddresses)
}

func burstOf(perSecond float64) int { return max(1, int(math.Ceil(2*perSecond))) }

// limiter holds the token buckets of the addresses and sources seen
// lately. Its memory is bounded: addresses by MaxAddresses, sources by the
// configured sources (a request reaches the source limit only once its
// source exists).
type limiter struct {
	cfg RateLimits
	now func() time.Time

	mu       sync.Mutex
	addrs    map[netip.Prefix]*rate.Limiter
	overflow *rate.Limiter // shared by new addresses once addrs is full
	sources  map[string]*rate.Limiter
	swept    time.Time
}

func newLimiter(cfg RateLimits, now func() time.Time) *limiter {
	return &limiter{
		cfg: cfg, now: now,
		addrs:    map[netip.Prefix]*rate.Limiter{},
		overflow: rate.NewLimiter(rate.Limit(cfg.PerAddress), cfg.PerAddressBurst),
		sources:  map[string]*rate.Limiter{},
	}
}

// allowAddress takes a token for the client address; when there is none
// it returns how long until there will be.
func (l *limiter) allowAddress(client netip.Addr) (bool, time.Duration) {
	if l.cfg.PerAddress < 0 {
		return true, 0
	}
	key := addressKey(client)
	now := l.now()
	l.mu.Lock()
	b, ok := l.addrs[key]
	if !ok {
		b = l.newAddress(key, now)
	}
	l.mu.Unlock()
	return take(b, now)
}

// newAddress makes a bucket for key, or hands out the shared overflow one
// when the map is full even after forgetting the idle addresses.
func (l *limiter) newAddress(key netip.Prefix, now time.Time) *rate.Limiter {
	if len(l.addrs) >= l.cfg.MaxAddresses && now.Sub(l.swept) >= time.Second {
		l.sweep(now)
	}
	if len(l.addrs) >= l.cfg.MaxAddresses {
		return l.overflow
	}
	b := rate.NewLimiter(rate.Limit(l.cfg.PerAddress), l.cfg.PerAddressBurst)
	l.addrs[key] = b
	return b
}

// sweep forgets addresses whose bucket has refilled: a new bucket would be
// the same, so nothing an address earned or spent is lost. At most once a
// second, so that a full map under attack costs one pass per second.
func (l *limiter) sweep(now time.Time) {
	l.swept = now
	for k, b := range l.addrs {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(l.addrs, k)
		}
	}
}

// allowSource takes a token for a configured source.
func (l *limiter) allowSource(id string) (bool, time.Duration) {
	if l.cfg.PerSource < 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	b, ok := l.sources[id]
	if !ok {
		b = rate.NewLimiter(rate.Limit(l.cfg.PerSource), l.cfg.PerSourceBurst)
		l.sources[id] = b
	}
	l.mu.Unlock()
	return take(b, now)
}

// take spends a token now, or reports the wait without spending one: a
// refused request must not push the next allowed one further out.
func take(b *rate.Limiter, now time.Time) (bool, time.Duration) {
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

// addressKey is the bucket of an address: itself for IPv4, its /64 for IPv6.
func addressKey(a netip.Addr) netip.Prefix {
	a = a.Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits) // bits is valid for the address family
	return p
}

// clientAddr is the address a request is limited by: the peer, or, when
// the peer is a trusted proxy, the last X-Forwarded-For entry that is not.
// A peer address that cannot be parsed (not TCP) is the zero address, one
// bucket for all such requests.
func clientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
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

// retryAfterSeconds is a Retry-After value: whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
