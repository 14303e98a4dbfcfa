package embedded

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

func redisClient(t *testing.T, r *Redis) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(r.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitGone waits until key no longer exists, failing after a generous
// deadline: the condition, not the time it takes, is what is tested.
func waitGone(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := c.Exists(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %q still exists: its TTL is not honoured", key)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// TestEmbeddedRedisExpiresKeys: idempotency keys and markers are written
// with a TTL; an in-process Redis that never expires them grows without
// bound.
func TestEmbeddedRedisExpiresKeys(t *testing.T) {
	r, err := StartRedis("")
	if err != nil {
		t.Fatal(err)
	}
	testenv.StopOnCleanup(t, r.Stop)
	c := redisClient(t, r)
	ctx := context.Background()
	if err := c.Set(ctx, "short", "v", 100*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "kept", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, "short")
	if n, _ := c.Exists(ctx, "kept").Result(); n != 1 {
		t.Fatal("a key without a TTL was removed")
	}
}

// TestEmbeddedRedisExpiryFollowsTheClock drives the injected clock: keys
// go exactly when their TTL has passed on it.
func TestEmbeddedRedisExpiryFollowsTheClock(t *testing.T) {
	clock := newFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	r, err := StartRedisWith(RedisConfig{ExpiryInterval: time.Millisecond, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	testenv.StopOnCleanup(t, r.Stop)
	c := redisClient(t, r)
	ctx := context.Background()
	for key, ttl := range map[string]time.Duration{"idem": time.Hour, "later": 3 * time.Hour} {
		if err := c.Set(ctx, key, "v", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Hour)
	waitGone(t, c, "idem")
	ttl, err := c.TTL(ctx, "later").Result()
	if err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("TTL of later = %v, %v; want at most the 1h left on the clock", ttl, err)
	}
}

func TestEmbeddedRedisStopEndsTheSweeper(t *testing.T) {
	r, err := StartRedisWith(RedisConfig{ExpiryInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Stop(t, r.Stop)
	select {
	case <-r.done:
	default:
		t.Fatal("Stop returned while the expiry goroutine runs")
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{now: t} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
