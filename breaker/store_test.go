package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func TestNewStore(t *testing.T) {
	if _, err := NewStore(StoreConfig{}); err == nil {
		t.Error("NewStore without a client succeeded")
	}
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	if _, err := NewStore(StoreConfig{Client: client, TTL: -time.Second}); err == nil {
		t.Error("NewStore with a negative TTL succeeded")
	}
	s, err := NewStore(StoreConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if s.prefix != DefaultKeyPrefix || s.ttl != DefaultTTL {
		t.Errorf("defaults: prefix %q ttl %v, want %q %v", s.prefix, s.ttl, DefaultKeyPrefix, DefaultTTL)
	}
}

func TestStoreDefaultKey(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	s, err := NewStore(StoreConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(context.Background(), "ep_1", opened()); err != nil {
		t.Fatal(err)
	}
	if !mr.Exists("laneway:breaker:ep_1") {
		t.Fatalf("keys %v, want laneway:breaker:ep_1", mr.Keys())
	}
}

func TestStoreRoundTrip(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		want := map[string]Breaker{
			"ep_open":    opened(),
			"ep_probing": probing(20 * time.Minute),
			"ep_failing": {State: Closed, ConsecutiveFailures: 3, FailingSince: t0},
		}
		for id, b := range want {
			if err := s.Save(ctx, id, b); err != nil {
				t.Fatal(err)
			}
		}
		for id, b := range want {
			got, err := s.Load(ctx, id)
			if err != nil || got != b {
				t.Errorf("Load(%s) = %+v, %v; want %+v", id, got, err, b)
			}
		}
		if got, err := s.Load(ctx, "ep_missing"); err != nil || got != (Breaker{}) {
			t.Errorf("Load(missing) = %+v, %v; want the zero breaker, no error", got, err)
		}

		got, err := s.LoadMany(ctx, []string{"ep_open", "ep_probing", "ep_failing", "ep_missing"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("LoadMany returned %d breakers, want %d: %+v", len(got), len(want), got)
		}
		for id, b := range want {
			if got[id] != b {
				t.Errorf("LoadMany[%s] = %+v, want %+v", id, got[id], b)
			}
		}
		if got, err := s.LoadMany(ctx, nil); err != nil || got == nil || len(got) != 0 {
			t.Errorf("LoadMany(nil) = %v, %v; want an empty map", got, err)
		}
	})
}

func TestStoreSaveManyPipelines(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		if err := s.Save(ctx, "ep_b", opened()); err != nil {
			t.Fatal(err)
		}
		batch := map[string]Breaker{"ep_a": opened(), "ep_b": {State: Closed}, "ep_c": probing(time.Hour)}
		if err := s.SaveMany(ctx, batch); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadMany(ctx, []string{"ep_a", "ep_b", "ep_c"})
		if err != nil {
			t.Fatal(err)
		}
		if got["ep_a"] != batch["ep_a"] || got["ep_c"] != batch["ep_c"] {
			t.Errorf("LoadMany = %+v, want %+v", got, batch)
		}
		if _, ok := got["ep_b"]; ok || be.exists(t, "ep_b") {
			t.Errorf("healthy ep_b still stored: %+v", got["ep_b"])
		}
		if err := s.SaveMany(ctx, nil); err != nil {
			t.Errorf("SaveMany(nil) = %v", err)
		}
	})
}

// A healthy breaker is deleted rather than written, and the deletion must
// still replace what a previous owner left.
func TestStoreSaveHealthyDeletes(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		for _, healthy := range []Breaker{{}, {State: Closed}} {
			if err := s.Save(ctx, "ep_1", opened()); err != nil {
				t.Fatal(err)
			}
			if err := s.Save(ctx, "ep_1", healthy); err != nil {
				t.Fatal(err)
			}
			if be.exists(t, "ep_1") {
				t.Errorf("saving %+v left the key", healthy)
			}
			if got, err := s.Load(ctx, "ep_1"); err != nil || got != (Breaker{}) {
				t.Errorf("Load = %+v, %v; want the zero breaker", got, err)
			}
		}
	})
}

func TestStoreTTL(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s, err := NewStore(StoreConfig{Client: be.client, KeyPrefix: be.prefix, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		key := be.prefix + "ep_1"
		if err := s.Save(ctx, "ep_1", opened()); err != nil {
			t.Fatal(err)
		}
		if ttl := be.client.TTL(ctx, key).Val(); ttl <= 59*time.Minute || ttl > time.Hour {
			t.Fatalf("TTL after Save = %v, want about 1h", ttl)
		}
		// Every write refreshes it.
		if err := be.client.Expire(ctx, key, 10*time.Second).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(ctx, "ep_1", probing(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if ttl := be.client.TTL(ctx, key).Val(); ttl <= 59*time.Minute {
			t.Fatalf("TTL after a second Save = %v, want refreshed to about 1h", ttl)
		}
		if be.mr == nil {
			return
		}
		be.mr.FastForward(time.Hour + time.Second)
		if got, err := s.Load(ctx, "ep_1"); err != nil || got != (Breaker{}) {
			t.Fatalf("Load after the TTL = %+v, %v; want the zero breaker, no error", got, err)
		}
	})
}

func TestStoreRedisFlushed(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		if err := s.Save(ctx, "ep_1", opened()); err != nil {
			t.Fatal(err)
		}
		be.flush(t)
		if got, err := s.Load(ctx, "ep_1"); err != nil || got != (Breaker{}) {
			t.Fatalf("Load after a flush = %+v, %v; want the zero breaker, no error", got, err)
		}
		if got, err := s.LoadMany(ctx, []string{"ep_1"}); err != nil || len(got) != 0 {
			t.Fatalf("LoadMany after a flush = %+v, %v; want nothing", got, err)
		}
	})
}

func TestStoreRedisUnreachable(t *testing.T) {
	ctx := context.Background()
	s, err := NewStore(StoreConfig{Client: unreachable(t)})
	if err != nil {
		t.Fatal(err)
	}
	checkUnreachable(t, s)

	// Redis going away under a working store: the restart case.
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	s, err = NewStore(StoreConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "ep_1", opened()); err != nil {
		t.Fatal(err)
	}
	mr.Close()
	checkUnreachable(t, s)
}

func checkUnreachable(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	if got, err := s.Load(ctx, "ep_1"); err == nil || got != (Breaker{}) {
		t.Errorf("Load = %+v, %v; want the zero breaker and an error", got, err)
	}
	if got, err := s.LoadMany(ctx, []string{"ep_1"}); err == nil || got == nil || len(got) != 0 {
		t.Errorf("LoadMany = %v, %v; want an empty map and an error", got, err)
	}
	if err := s.Save(ctx, "ep_1", opened()); err == nil {
		t.Error("Save succeeded")
	}
}

func TestStoreCorruptValue(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		if err := be.client.Set(ctx, be.prefix+"ep_bad", "not json", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(ctx, "ep_good", opened()); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Load(ctx, "ep_bad"); err == nil || got != (Breaker{}) {
			t.Errorf("Load(corrupt) = %+v, %v; want the zero breaker and an error", got, err)
		}
		got, err := s.LoadMany(ctx, []string{"ep_bad", "ep_good"})
		if err == nil {
			t.Error("LoadMany with a corrupt value returned no error")
		}
		if _, ok := got["ep_bad"]; ok || got["ep_good"] != opened() {
			t.Errorf("LoadMany = %+v, want only ep_good", got)
		}
	})
}
