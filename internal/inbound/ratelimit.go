package inbound

import (
	"cmp"
	"math"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/laneway/laneway/internal/plumbing/addrlimit"
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
	cfg   RateLimits
	now   func() time.Time
	addrs *addrlimit.Limiter

	mu      sync.Mutex
	sources map[string]*rate.Limiter
}

func newLimiter(cfg RateLimits, now func() time.Time) *limiter {
	return &limiter{
		cfg: cfg, now: now,
		addrs:   addrlimit.New(cfg.PerAddress, cfg.PerAddressBurst, cfg.MaxAddresses, now),
		sources: map[string]*rate.Limiter{},
	}
}

// allowAddress takes a token for the client address; when there is none
// it returns how long until there will be.
func (l *limiter) allowAddress(client netip.Addr) (bool, time.Duration) {
	if l.cfg.PerAddress < 0 {
		return true, 0
	}
	return l.addrs.Allow(client)
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
	return addrlimit.Take(b, now)
}
