// Package health shares each endpoint's live delivery state between
// instances. The instance that owns an endpoint publishes a snapshot of it
// to Redis about every second; any instance's API reads the snapshots, so an
// operator can ask any instance about any endpoint, or for the endpoints
// that are most behind.
//
// Snapshots are a view, not truth: losing Redis only blanks the view until
// the owners publish again.
package health

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Breaker is an endpoint's breaker as the owner sees it: the API shows
// the same fields.
type Breaker = wire.Breaker

// PerMinute counts an endpoint's outcomes over the last 60 seconds, as
// the API shows them.
type PerMinute = wire.PerMinute

// LaneState is an endpoint's lane as its owner publishes it and the API
// shows it.
type LaneState = wire.LaneState

// Snapshot is one endpoint's state at UpdatedAt: its lane, as the API
// shows it, and since when its oldest delivery is pending.
type Snapshot struct {
	EndpointID string `json:"endpoint_id"`
	LaneState
	// OldestPendingSince is when the oldest unfinished delivery was
	// created or queued; nil when nothing is pending.
	OldestPendingSince *time.Time `json:"oldest_pending_since"`
	UpdatedAt          time.Time  `json:"updated_at"`
}

// OldestPendingAge is the age of the oldest pending delivery at now.
func (s Snapshot) OldestPendingAge(now time.Time) time.Duration {
	if s.OldestPendingSince == nil {
		return 0
	}
	return max(0, now.Sub(*s.OldestPendingSince))
}

// Healthy reports whether the endpoint keeps up by itself: it is not
// parked and its breaker is closed. The oldest pending age over healthy
// endpoints separates a platform short of capacity (it grows) from one
// slow customer (it does not).
func (s Snapshot) Healthy() bool {
	return s.ParkedReason == "" && (s.Breaker.State == "" || s.Breaker.State == "closed")
}

// Source gives the snapshots of the endpoints this instance owns.
type Source interface {
	Snapshots(now time.Time) []Snapshot
}

// Config configures a Publisher and a Reader.
type Config struct {
	// Redis stores the snapshots. Required.
	Redis redis.UniversalClient
	// KeyPrefix prefixes the keys. Default "laneway:health:".
	KeyPrefix string
	// Interval between publications. Default 1s.
	Interval time.Duration
	// TTL of a snapshot. It outlives ownership changes, so last_success_at
	// and last_error survive a rebalance. Default 24h.
	TTL time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() error {
	if c.Redis == nil {
		return errors.New("health: Config.Redis is required")
	}
	c.KeyPrefix = cmp.Or(c.KeyPrefix, "laneway:health:")
	c.Interval = valutil.PositiveOr(c.Interval, time.Second)
	c.TTL = valutil.PositiveOr(c.TTL, 24*time.Hour)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Now = timing.Clock(c.Now)
	return nil
}

// Publisher writes the owned endpoints' snapshots every Interval.
type Publisher struct {
	cfg    Config
	source Source
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// NewPublisher returns a publisher of source's snapshots.
func NewPublisher(cfg Config, source Source) (*Publisher, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Publisher{cfg: cfg, source: source}, nil
}

// Start publishes every Interval until Stop (ctx is not its lifetime, nor
// used otherwise). It cannot fail.
func (p *Publisher) Start(context.Context) error {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		timing.Every(ctx.Done(), p.cfg.Interval, func() {
			if err := p.Publish(ctx); err != nil && ctx.Err() == nil {
				p.cfg.Logger.Debug("health snapshots not published", "err", err)
			}
		})
	}()
	return nil
}

// Stop ends publishing (a publish in progress is canceled) and waits for
// the goroutine; ctx is not used. It returns nil.
func (p *Publisher) Stop(context.Context) error {
	if p.cancel != nil {
		p.cancel()
	}
	p.done.Wait()
	return nil
}

// Publish writes the current snapshots once.
func (p *Publisher) Publish(ctx context.Context) error {
	snaps := p.source.Snapshots(p.cfg.Now())
	if len(snaps) == 0 {
		return nil
	}
	pipe := p.cfg.Redis.Pipeline()
	for _, s := range snaps {
		raw, _ := json.Marshal(s) // plain struct always encodes
		pipe.Set(ctx, p.cfg.KeyPrefix+s.EndpointID, raw, p.cfg.TTL)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// Reader reads snapshots.
type Reader struct{ cfg Config }

// NewReader returns a reader.
func NewReader(cfg Config) (*Reader, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Reader{cfg: cfg}, nil
}

// Get returns the snapshots of ids that have one.
func (r *Reader) Get(ctx context.Context, ids []string) (map[string]Snapshot, error) {
	out := make(map[string]Snapshot, len(ids))
	const batch = 1000 // one MGET per thousand keys keeps each reply small
	for start := 0; start < len(ids); start += batch {
		part := ids[start:min(start+batch, len(ids))]
		keys := make([]string, len(part))
		for i, id := range part {
			keys[i] = r.cfg.KeyPrefix + id
		}
		vals, err := r.cfg.Redis.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, fmt.Errorf("read health snapshots: %w", err)
		}
		for i, v := range vals {
			raw, ok := v.(string)
			if !ok {
				continue
			}
			var s Snapshot
			if json.Unmarshal([]byte(raw), &s) == nil {
				out[part[i]] = s
			}
		}
	}
	return out, nil
}

// Load returns one endpoint's last snapshot, for a new owner to carry its
// last success and last error on.
func (r *Reader) Load(ctx context.Context, id string) (Snapshot, bool, error) {
	m, err := r.Get(ctx, []string{id})
	if err != nil {
		return Snapshot{}, false, err
	}
	s, ok := m[id]
	return s, ok, nil
}
