package breaker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of StoreConfig.
const (
	DefaultKeyPrefix = "laneway:breaker:"
	DefaultTTL       = 7 * 24 * time.Hour
)

// StoreConfig configures a Store.
type StoreConfig struct {
	// Client is the Redis breakers are kept in. Required.
	Client redis.UniversalClient

	// KeyPrefix is prepended to the endpoint id to form its key.
	// Default: DefaultKeyPrefix ("laneway:breaker:"). On Redis Cluster, put
	// a hash tag in it (e.g. "{laneway:breaker}:") so that LoadMany's MGET
	// stays in one slot.
	KeyPrefix string

	// TTL is how long a breaker is kept after its last write. An endpoint
	// idle for longer loses its state, which only resets its breaker.
	// Default: DefaultTTL (7 days), more than the 5 days after which a
	// failing endpoint is disabled, so a failing streak is not forgotten
	// before then.
	TTL time.Duration
}

// Store reads and writes breakers in Redis, one JSON value per endpoint.
// Every method may be called concurrently.
type Store struct {
	client redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// NewStore checks cfg, fills in defaults and returns a Store.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("breaker: StoreConfig.Client is required")
	}
	if cfg.TTL < 0 {
		return nil, fmt.Errorf("breaker: negative StoreConfig.TTL %v", cfg.TTL)
	}
	cfg.KeyPrefix = cmp.Or(cfg.KeyPrefix, DefaultKeyPrefix)
	cfg.TTL = cmp.Or(cfg.TTL, DefaultTTL)
	return &Store{client: cfg.Client, prefix: cfg.KeyPrefix, ttl: cfg.TTL}, nil
}

func (s *Store) key(endpointID string) string { return s.prefix + endpointID }

// Load returns the breaker of endpointID. A missing key is the zero Breaker
// with no error. When Redis fails or the value cannot be decoded, Load still
// returns the zero Breaker, which callers may use as is (Redis holds no
// truth: the breaker starts closed), along with the error to log.
func (s *Store) Load(ctx context.Context, endpointID string) (Breaker, error) {
	data, err := s.client.Get(ctx, s.key(endpointID)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Breaker{}, nil
	}
	if err != nil {
		return Breaker{}, fmt.Errorf("breaker: load %q: %w", endpointID, err)
	}
	return decode(endpointID, data)
}

// LoadMany returns the breakers of ids with one MGET, for the API and for
// warming a Cache. Ids without a stored breaker are absent from the map
// (their breaker is the zero one). On error the map holds what could be
// read, possibly nothing, and is never nil.
func (s *Store) LoadMany(ctx context.Context, ids []string) (map[string]Breaker, error) {
	out := make(map[string]Breaker, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.key(id)
	}
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return out, fmt.Errorf("breaker: load %d breakers: %w", len(ids), err)
	}
	var errs []error
	for i, v := range vals {
		data, ok := v.(string)
		if !ok { // nil: no key
			continue
		}
		b, err := decode(ids[i], []byte(data))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[ids[i]] = b
	}
	return out, errors.Join(errs...)
}

func decode(endpointID string, data []byte) (Breaker, error) {
	var b Breaker
	if err := json.Unmarshal(data, &b); err != nil {
		return Breaker{}, fmt.Errorf("breaker: decode %q: %w", endpointID, err)
	}
	return b, nil
}

// Save writes the breaker of endpointID and refreshes its TTL.
//
// A closed breaker with no failures is deleted rather than written: a
// missing key reads the same, and Redis then only holds the endpoints with
// something to say. Deleting still overwrites what a previous owner left.
func (s *Store) Save(ctx context.Context, endpointID string, b Breaker) error {
	return s.SaveMany(ctx, map[string]Breaker{endpointID: b})
}

// SaveMany writes several breakers, as Save does, in one pipeline.
func (s *Store) SaveMany(ctx context.Context, breakers map[string]Breaker) error {
	var errs []error
	pipe := s.client.Pipeline()
	for id, b := range breakers {
		if b.healthy() {
			pipe.Del(ctx, s.key(id))
			continue
		}
		data, err := json.Marshal(b)
		if err != nil { // only a time beyond year 9999; skip it, write the rest
			errs = append(errs, fmt.Errorf("breaker: encode %q: %w", id, err))
			continue
		}
		pipe.Set(ctx, s.key(id), data, s.ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil { // a no-op when nothing was queued
		errs = append(errs, fmt.Errorf("breaker: save %d breakers: %w", len(breakers), err))
	}
	return errors.Join(errs...)
}
