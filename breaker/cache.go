package breaker

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// DefaultFlushInterval is the default of CacheConfig.FlushInterval.
const DefaultFlushInterval = time.Second

// CacheConfig configures a Cache.
type CacheConfig struct {
	// Store is where breakers are loaded from and flushed to. Required.
	Store *Store

	// Breaker tunes the transitions Record applies. Default: the zero
	// Config, the contract's values.
	Breaker Config

	// FlushInterval is how often the loop run by Start writes changed
	// breakers to Redis; a crash loses at most this much breaker history.
	// Default: DefaultFlushInterval (1s).
	FlushInterval time.Duration

	// Logger receives the errors of the flush loop. Default: slog.Default().
	Logger *slog.Logger
}

// Cache holds the breakers of the endpoints this instance owns, in memory,
// and writes the changed ones to the Store behind the delivery path.
//
// While this instance owns an endpoint (one owner at a time, through Kafka
// partition assignment) its in-memory breaker is authoritative; Redis is
// only read when ownership starts (Warm) and by the API. The engine's
// ownership callbacks therefore drive the Cache:
//
//   - on assignment, Warm the endpoints it is about to serve, to pick up
//     what the previous owner wrote (an endpoint never warmed starts
//     closed, as after a Redis flush, and so does one whose Warm failed:
//     it is then in memory, closed, and not read from Redis again while
//     owned);
//   - on revocation, Flush and then Forget them, so the next owner reads
//     the latest state and a later re-assignment reads the next owner's;
//   - on partition loss, only Forget: another instance may already own
//     the endpoints, and writing would overwrite its newer state.
//
// Every method may be called concurrently. Get, Update, Allow and Record
// never touch Redis.
type Cache struct {
	store    *Store
	cfg      Config
	interval time.Duration
	logger   *slog.Logger

	mu      sync.Mutex
	entries map[string]entry

	// flushMu serialises Flush, so that an older snapshot never lands in
	// Redis after a newer one.
	flushMu sync.Mutex

	runMu  sync.Mutex
	cancel context.CancelFunc // of the running flush loop; nil when stopped
	done   chan struct{}      // closed when that loop has returned

	flushed func(error) // test hook: called by the loop after each flush
}

type entry struct {
	b     Breaker
	dirty bool // changed since it was last written to Redis
}

// NewCache checks cfg, fills in defaults and returns an empty Cache.
func NewCache(cfg CacheConfig) (*Cache, error) {
	if cfg.Store == nil {
		return nil, errors.New("breaker: CacheConfig.Store is required")
	}
	cfg.FlushInterval = valutil.PositiveOr(cfg.FlushInterval, DefaultFlushInterval)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return &Cache{
		store:    cfg.Store,
		cfg:      cfg.Breaker.withDefaults(),
		interval: cfg.FlushInterval,
		logger:   cfg.Logger,
		entries:  make(map[string]entry),
	}, nil
}

// Get returns the breaker of endpointID from memory; the zero (closed)
// Breaker if it has none.
func (c *Cache) Get(endpointID string) Breaker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[endpointID].b
}

// Update replaces the breaker of endpointID with fn's result and returns
// it; a changed breaker is written by the next Flush. fn runs under the
// Cache's lock: it must be quick and must not call the Cache.
func (c *Cache) Update(endpointID string, fn func(Breaker) Breaker) Breaker {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.entries[endpointID].b
	next := fn(old)
	// Only a change is stored: a closed breaker allowing an attempt must
	// not cost a Redis write, and an unknown endpoint left untouched stays
	// unknown so that Warm can still load it.
	if next != old {
		c.entries[endpointID] = entry{b: next, dirty: true}
	}
	return next
}

// Reset closes the breaker of endpointID and forgets its failures, in
// Redis too (at the next Flush), even when it was not loaded: an endpoint
// that was disabled starts afresh when re-enabled, instead of being
// disabled again by its first failure.
func (c *Cache) Reset(endpointID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[endpointID] = entry{dirty: true}
}

// Allow applies Allow to the breaker of endpointID and keeps the result.
func (c *Cache) Allow(endpointID string, now time.Time, maxConcurrency, inFlight int) Decision {
	var d Decision
	c.Update(endpointID, func(b Breaker) Breaker {
		b, d = Allow(b, now, maxConcurrency, inFlight)
		return b
	})
	return d
}

// Record applies Record, with the Cache's Config, to the breaker of
// endpointID and returns the result.
func (c *Cache) Record(endpointID string, success bool, now time.Time) Breaker {
	return c.Update(endpointID, func(b Breaker) Breaker {
		return Record(b, success, now, c.cfg)
	})
}

// Warm loads from Redis, with one MGET, the breakers of the ids not yet in
// memory. An id updated while Warm waited for Redis keeps its in-memory
// breaker: that evidence is newer.
//
// Every other id is in memory when Warm returns, error or not: on error the
// ids Redis did not answer for (all of them when it failed or hung until
// ctx ended, one whose value did not decode) are entered closed, as a Redis
// flush would leave them, and not dirty, so nothing is written for them.
// Redis holds no truth, and entering them means a later Warm for them
// returns at once instead of waiting on a failing Redis again; they read
// Redis again only after a Forget (the next ownership).
func (c *Cache) Warm(ctx context.Context, ids []string) error {
	missing := c.unknown(ids)
	if len(missing) == 0 {
		return nil
	}
	loaded, err := c.store.LoadMany(ctx, missing)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range missing {
		if _, ok := c.entries[id]; ok {
			continue
		}
		c.entries[id] = entry{b: loaded[id]} // the zero (closed) Breaker if not read
	}
	return err
}

// Loaded reports whether the breaker of endpointID is in memory (loaded,
// entered closed by a failed Warm, or updated here), so a Warm for it would
// not go to Redis.
func (c *Cache) Loaded(endpointID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[endpointID]
	return ok
}

func (c *Cache) unknown(ids []string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, id := range ids {
		if _, ok := c.entries[id]; !ok {
			out = append(out, id)
		}
	}
	return out
}

// Forget drops the breakers of ids from memory without writing them.
func (c *Cache) Forget(ids ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		delete(c.entries, id)
	}
}

// Flush writes the breakers changed since the last Flush in one pipeline.
// On error they stay marked changed, so the next Flush writes them again.
func (c *Cache) Flush(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	batch := c.takeDirty()
	if len(batch) == 0 {
		return nil
	}
	err := c.store.SaveMany(ctx, batch)
	if err != nil {
		c.markDirty(batch)
	}
	return err
}

func (c *Cache) takeDirty() map[string]Breaker {
	c.mu.Lock()
	defer c.mu.Unlock()
	batch := make(map[string]Breaker)
	for id, e := range c.entries {
		if e.dirty {
			batch[id] = e.b
			c.entries[id] = entry{b: e.b}
		}
	}
	return batch
}

// markDirty marks the batch's ids changed again, except those forgotten
// meanwhile, which this instance no longer owns.
func (c *Cache) markDirty(batch map[string]Breaker) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range batch {
		if e, ok := c.entries[id]; ok {
			c.entries[id] = entry{b: e.b, dirty: true}
		}
	}
}

// Start runs a goroutine that calls Flush every FlushInterval until Stop.
// As for every component, ctx bounds only the start (it keeps ctx's
// values, not its end): the loop must run until Stop, whose final flush
// relies on it. Starting a running Cache does nothing. It cannot fail.
func (c *Cache) Start(ctx context.Context) error {
	c.runMu.Lock()
	defer c.runMu.Unlock()
	if c.cancel != nil {
		return nil
	}
	ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.done = make(chan struct{})
	go c.loop(ctx, c.done)
	return nil
}

func (c *Cache) loop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	timing.Every(ctx.Done(), c.interval, func() {
		err := c.Flush(ctx)
		if err != nil && ctx.Err() == nil {
			c.logger.Warn("breaker: flush failed; retrying at the next interval", "error", err)
		}
		if c.flushed != nil {
			c.flushed(err)
		}
	})
}

// Stop ends the flush loop, waits for it to return (a flush in progress is
// canceled), and flushes one last time with ctx so that a clean shutdown
// loses nothing: ctx bounds that flush, whose error it returns. It may be
// called without Start, and more than once.
func (c *Cache) Stop(ctx context.Context) error {
	c.runMu.Lock()
	cancel, done := c.cancel, c.done
	c.cancel, c.done = nil, nil
	c.runMu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return c.Flush(ctx)
}
