package breaker

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/redis/go-redis/v9"
)

// backend is a Redis a store test runs against, with a key prefix no other
// test uses.
type backend struct {
	client redis.UniversalClient
	prefix string
	mr     *miniredis.Miniredis // nil for the real Redis
}

// eachRedis runs fn against miniredis and, when LANEWAY_TEST_REDIS_URL is
// set, against that real Redis.
func eachRedis(t *testing.T, fn func(t *testing.T, be backend)) {
	t.Run("miniredis", func(t *testing.T) {
		mr := miniredis.RunT(t)
		client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { client.Close() })
		fn(t, backend{client: client, prefix: testenv.Unique("breaker") + ":", mr: mr})
	})
	url := os.Getenv(testenv.RedisEnv)
	if url == "" {
		t.Logf("%s not set: skipping the real-Redis run", testenv.RedisEnv)
		return
	}
	t.Run("real", func(t *testing.T) {
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Fatalf("%s: %v", testenv.RedisEnv, err)
		}
		client := redis.NewClient(opts)
		be := backend{client: client, prefix: testenv.Unique("breaker") + ":"}
		t.Cleanup(func() {
			be.flush(t)
			client.Close()
		})
		fn(t, be)
	})
}

func (be backend) store(t *testing.T) *Store {
	t.Helper()
	s, err := NewStore(StoreConfig{Client: be.client, KeyPrefix: be.prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// flush simulates a Redis flush or restart without its data. On the real
// Redis, which other packages' tests share, only this test's keys go.
func (be backend) flush(t *testing.T) {
	t.Helper()
	if be.mr != nil {
		be.mr.FlushAll()
		return
	}
	ctx := context.Background()
	keys, err := be.client.Keys(ctx, be.prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		if err := be.client.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func (be backend) exists(t *testing.T, endpointID string) bool {
	t.Helper()
	n, err := be.client.Exists(context.Background(), be.prefix+endpointID).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// unreachable returns a client for an address nothing listens on.
func unreachable(t *testing.T) redis.UniversalClient {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { client.Close() })
	return client
}
