package testenv

import (
	"os"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Redises returns the Redises a test of Redis plumbing runs against: a
// fresh miniredis and, when RedisEnv is set, the real Redis (shared with
// other tests: give keys a Unique prefix). Name is "miniredis" or "real".
func Redises(t testing.TB) []Backend {
	t.Helper()
	out := []Backend{{Name: "miniredis", RedisURL: "redis://" + miniredis.RunT(t).Addr() + "/0"}}
	if url := os.Getenv(RedisEnv); url != "" {
		out = append(out, Backend{Name: "real", RedisURL: url})
	} else {
		t.Logf("%s not set: skipping the real-Redis run", RedisEnv)
	}
	return out
}

// RedisClient is a client of b's Redis, closed when the test ends.
func RedisClient(t testing.TB, b Backend) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(b.RedisURL)
	if err != nil {
		t.Fatalf("redis url %s: %v", b.RedisURL, err)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
