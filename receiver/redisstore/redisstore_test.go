package redisstore_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/laneway/laneway/receiver"
	"github.com/laneway/laneway/receiver/internal/storetest"
	"github.com/laneway/laneway/receiver/redisstore"
	"github.com/laneway/laneway/signing"
)

// backend is a Redis to run against, with a key prefix no other test uses.
type backend struct {
	client  redis.UniversalClient
	prefix  string
	advance storetest.Advance // nil on a real Redis, whose clock cannot move
}

// eachRedis runs fn against miniredis and, when LANEWAY_TEST_REDIS_URL is
// set, against that real Redis.
func eachRedis(t *testing.T, fn func(t *testing.T, newBackend func(t *testing.T) backend)) {
	t.Run("miniredis", func(t *testing.T) {
		fn(t, func(t *testing.T) backend {
			mr := miniredis.RunT(t)
			client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { client.Close() })
			return backend{client: client, prefix: "test:", advance: mr.FastForward}
		})
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
		fn(t, func(t *testing.T) backend {
			client := redis.NewClient(opts)
			be := backend{client: client, prefix: testenv.Unique("receiver") + ":"}
			t.Cleanup(func() {
				deleteKeys(t, client, be.prefix)
				client.Close()
			})
			return be
		})
	})
}

func deleteKeys(t *testing.T, client redis.UniversalClient, prefix string) {
	ctx := context.Background()
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	if len(keys) > 0 {
		client.Del(ctx, keys...)
	}
}

func (be backend) dedup(t *testing.T) *redisstore.Dedup {
	t.Helper()
	s, err := redisstore.NewDedup(redisstore.Config{Client: be.client, KeyPrefix: be.prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (be backend) revisions(t *testing.T, ttl time.Duration) *redisstore.Revisions {
	t.Helper()
	s, err := redisstore.NewRevisions(redisstore.Config{Client: be.client, KeyPrefix: be.prefix, RevisionTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDedup(t *testing.T) {
	eachRedis(t, func(t *testing.T, newBackend func(*testing.T) backend) {
		storetest.Dedup(t, func(t *testing.T) (receiver.DedupStore, storetest.Advance) {
			be := newBackend(t)
			return be.dedup(t), be.advance
		})
	})
}

func TestRevisions(t *testing.T) {
	const ttl = 24 * time.Hour
	eachRedis(t, func(t *testing.T, newBackend func(*testing.T) backend) {
		storetest.Revisions(t, ttl, func(t *testing.T) (receiver.RevisionStore, storetest.Advance) {
			be := newBackend(t)
			return be.revisions(t, ttl), be.advance
		})
	})
}

// Every key has a TTL, so Redis never fills with receiver state.
func TestEveryKeyExpires(t *testing.T) {
	eachRedis(t, func(t *testing.T, newBackend func(*testing.T) backend) {
		be := newBackend(t)
		ctx := context.Background()
		dedup, revs := be.dedup(t), be.revisions(t, 0)
		if _, err := dedup.Claim(ctx, "claimed", "tok", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := dedup.Claim(ctx, "done", "tok", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := dedup.Done(ctx, "done", 72*time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := revs.Advance(ctx, "order:1", 3); err != nil {
			t.Fatal(err)
		}
		want := map[string]time.Duration{
			be.prefix + "id:claimed":  time.Minute,
			be.prefix + "id:done":     72 * time.Hour,
			be.prefix + "rev:order:1": receiver.DefaultRevisionTTL,
		}
		keys, err := be.client.Keys(ctx, be.prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != len(want) {
			t.Fatalf("keys %v, want %d", keys, len(want))
		}
		for key, ttl := range want {
			got, err := be.client.PTTL(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got <= ttl-time.Second || got > ttl {
				t.Errorf("%s: TTL %v, want about %v", key, got, ttl)
			}
		}
	})
}

func TestRevisionsRefusesNegative(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	s, err := redisstore.NewRevisions(redisstore.Config{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Advance(context.Background(), "e", -1); err == nil {
		t.Fatal("Advance accepted a negative revision")
	}
}

func TestStoreErrorsAreReturned(t *testing.T) {
	mr := miniredis.RunT(t)
	// No retries: a refused connection must fail the call at once.
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond})
	defer client.Close()
	dedup, _ := redisstore.NewDedup(redisstore.Config{Client: client})
	revs, _ := redisstore.NewRevisions(redisstore.Config{Client: client})
	mr.Close() // Redis goes away
	ctx := context.Background()
	if _, err := dedup.Claim(ctx, "a", "t", time.Minute); err == nil {
		t.Error("Claim succeeded without Redis")
	}
	if err := dedup.Done(ctx, "a", time.Minute); err == nil {
		t.Error("Done succeeded without Redis")
	}
	if _, err := revs.Stale(ctx, "e", 1); err == nil {
		t.Error("Stale succeeded without Redis")
	}
	if err := revs.Advance(ctx, "e", 1); err == nil {
		t.Error("Advance succeeded without Redis")
	}
}

func TestCorruptRevisionIsAnError(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	revs, _ := redisstore.NewRevisions(redisstore.Config{Client: client})
	if err := mr.Set(redisstore.DefaultKeyPrefix+"rev:e", "seven"); err != nil {
		t.Fatal(err)
	}
	_, err := revs.Stale(context.Background(), "e", 1)
	if err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("Stale on a corrupt value = %v, want an error", err)
	}
}

func TestConfig(t *testing.T) {
	if _, err := redisstore.NewDedup(redisstore.Config{}); err == nil {
		t.Error("NewDedup accepted no client")
	}
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	if _, err := redisstore.NewRevisions(redisstore.Config{Client: client, RevisionTTL: -time.Second}); err == nil {
		t.Error("NewRevisions accepted a negative TTL")
	}
}

// Two receiver processes behind a load balancer share one Redis: a
// redelivery handled by one is dropped by the other, and so is a stale
// revision.
func TestHandlersShareState(t *testing.T) {
	eachRedis(t, func(t *testing.T, newBackend func(*testing.T) backend) {
		be := newBackend(t)
		secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
		now := time.Now()
		var calls atomic.Int64
		newProcess := func() http.Handler {
			h, err := receiver.NewHandler(receiver.Config{
				Secrets: []string{secret}, Now: func() time.Time { return now },
				Dedup: be.dedup(t), Revisions: be.revisions(t, 0),
			}, func(context.Context, receiver.Delivery) error { calls.Add(1); return nil })
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		a, b := newProcess(), newProcess()
		send := func(h http.Handler, id string, revision int64) int {
			body := []byte(`{"id":"` + id + `","type":"order.updated","timestamp":"2026-11-30T10:00:00Z",` +
				`"data":{},"entity":{"id":"order:1","revision":` + strconv.FormatInt(revision, 10) + `}}`)
			hdr, err := signing.Headers(id, now, body, []string{secret})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			maps.Copy(r.Header, hdr)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		for _, step := range []struct {
			h        http.Handler
			id       string
			revision int64
			calls    int64
		}{
			{a, "evt_1", 2, 1},
			{b, "evt_1", 2, 1}, // duplicate seen by the other process
			{b, "evt_0", 1, 1}, // stale at the other process
			{b, "evt_2", 3, 2},
		} {
			if code := send(step.h, step.id, step.revision); code != http.StatusOK {
				t.Fatalf("%s: status %d", step.id, code)
			}
			if n := calls.Load(); n != step.calls {
				t.Fatalf("after %s: %d application calls, want %d", step.id, n, step.calls)
			}
		}
	})
}
