// Package redisstore keeps a Laneway receiver's dedup and revision state in
// Redis, so that several receiver processes behind a load balancer drop the
// same duplicates and stale updates. Dedup implements receiver.DedupStore
// and Revisions implements receiver.RevisionStore.
//
// Every key has a TTL, so the state is bounded in time without any cleanup
// job. Each operation is one round trip; the ones that read and write run as
// Lua scripts so that they are atomic. Every key is a single key, so both
// stores work on Redis Cluster as they are.
package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/receiver"
)

// DefaultKeyPrefix starts every key: the dedup keys continue with "id:",
// the revision keys with "rev:".
const DefaultKeyPrefix = "laneway:receiver:"

// Config configures Dedup and Revisions.
type Config struct {
	// Client is the Redis the state is kept in. Required.
	Client redis.UniversalClient

	// KeyPrefix is prepended to every key. Give each receiver endpoint its
	// own prefix when several share a Redis and their entity ids or event
	// ids could collide. Default: DefaultKeyPrefix.
	KeyPrefix string

	// RevisionTTL is how long an entity's revision is kept after its last
	// update (Revisions only; dedup TTLs come from the caller).
	// Default: receiver.DefaultRevisionTTL (7 days), well past Laneway's
	// 72 h delivery age limit.
	RevisionTTL time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Client == nil {
		return c, errors.New("redisstore: Config.Client is required")
	}
	if c.RevisionTTL < 0 {
		return c, fmt.Errorf("redisstore: negative Config.RevisionTTL %v", c.RevisionTTL)
	}
	c.KeyPrefix = cmp.Or(c.KeyPrefix, DefaultKeyPrefix)
	c.RevisionTTL = cmp.Or(c.RevisionTTL, receiver.DefaultRevisionTTL)
	return c, nil
}

// A dedup key holds "done" once handled, or "claim:" + token while claimed.
const (
	doneValue   = "done"
	claimPrefix = "claim:"
)

// claimScript returns 0 (claimed), 1 (already done) or 2 (in progress), the
// values of receiver.ClaimResult.
const claimScript = `
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 0
end
if v == 'done' then return 1 end
return 2`

// releaseScript deletes the key only while it holds the caller's claim.
const releaseScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`

// Dedup is a receiver.DedupStore in Redis. It is safe for concurrent use.
type Dedup struct {
	client  redis.UniversalClient
	prefix  string
	claim   *redis.Script
	release *redis.Script
}

// NewDedup checks cfg and returns a Dedup.
func NewDedup(cfg Config) (*Dedup, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Dedup{
		client: cfg.Client, prefix: cfg.KeyPrefix + "id:",
		claim: redis.NewScript(claimScript), release: redis.NewScript(releaseScript),
	}, nil
}

// Claim implements receiver.DedupStore.
func (d *Dedup) Claim(ctx context.Context, id, token string, ttl time.Duration) (receiver.ClaimResult, error) {
	n, err := d.claim.Run(ctx, d.client, []string{d.prefix + id}, claimPrefix+token, ttlMillis(ttl)).Int()
	if err != nil {
		return 0, fmt.Errorf("redisstore: claim %q: %w", id, err)
	}
	res := receiver.ClaimResult(n)
	if res != receiver.Claimed && res != receiver.AlreadyDone && res != receiver.InProgress {
		return 0, fmt.Errorf("redisstore: claim %q: unexpected script result %d", id, n)
	}
	return res, nil
}

// Done implements receiver.DedupStore.
func (d *Dedup) Done(ctx context.Context, id string, ttl time.Duration) error {
	if err := d.client.Set(ctx, d.prefix+id, doneValue, ttlOrMin(ttl)).Err(); err != nil {
		return fmt.Errorf("redisstore: done %q: %w", id, err)
	}
	return nil
}

// Release implements receiver.DedupStore.
func (d *Dedup) Release(ctx context.Context, id, token string) error {
	if err := d.release.Run(ctx, d.client, []string{d.prefix + id}, claimPrefix+token).Err(); err != nil {
		return fmt.Errorf("redisstore: release %q: %w", id, err)
	}
	return nil
}

// advanceScript stores ARGV[1] unless the stored revision is at least as
// high, and refreshes the TTL either way. Revisions are compared as decimal
// strings (longer is higher, then lexically), because Lua's numbers are
// doubles and would round revisions above 2^53.
const advanceScript = `
local cur = redis.call('GET', KEYS[1])
local new = ARGV[1]
if cur and (#cur > #new or (#cur == #new and cur >= new)) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 0
end
redis.call('SET', KEYS[1], new, 'PX', ARGV[2])
return 1`

// Revisions is a receiver.RevisionStore in Redis. It is safe for concurrent
// use.
type Revisions struct {
	client  redis.UniversalClient
	prefix  string
	ttl     time.Duration
	advance *redis.Script
}

// NewRevisions checks cfg and returns a Revisions.
func NewRevisions(cfg Config) (*Revisions, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Revisions{
		client: cfg.Client, prefix: cfg.KeyPrefix + "rev:", ttl: cfg.RevisionTTL,
		advance: redis.NewScript(advanceScript),
	}, nil
}

// Stale implements receiver.RevisionStore.
func (r *Revisions) Stale(ctx context.Context, entity string, revision int64) (bool, error) {
	raw, err := r.client.Get(ctx, r.prefix+entity).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("redisstore: revision of %q: %w", entity, err)
	}
	stored, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return false, fmt.Errorf("redisstore: revision of %q is not an integer", entity)
	}
	return revision < stored, nil
}

// Advance implements receiver.RevisionStore. Revisions are never negative in
// Laneway; a negative one is refused, as the script's string comparison only
// orders non-negative numbers.
func (r *Revisions) Advance(ctx context.Context, entity string, revision int64) error {
	if revision < 0 {
		return fmt.Errorf("redisstore: negative revision %d for %q", revision, entity)
	}
	keys := []string{r.prefix + entity}
	if err := r.advance.Run(ctx, r.client, keys, strconv.FormatInt(revision, 10), ttlMillis(r.ttl)).Err(); err != nil {
		return fmt.Errorf("redisstore: advance %q: %w", entity, err)
	}
	return nil
}

// ttlOrMin keeps a TTL at Redis's 1 ms resolution or above: SET with PX 0 is
// an error, and rounding a sub-millisecond TTL down to it would lose a key
// that was meant to live briefly.
func ttlOrMin(ttl time.Duration) time.Duration { return max(ttl, time.Millisecond) }

func ttlMillis(ttl time.Duration) int64 { return ttlOrMin(ttl).Milliseconds() }
