package breaker

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

func newCache(t *testing.T, s *Store, cfg CacheConfig) *Cache {
	t.Helper()
	cfg.Store = s
	c, err := NewCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	return c
}

// openIn records failures until the breaker of id in c is open.
func openIn(t *testing.T, c *Cache, id string) Breaker {
	t.Helper()
	var b Breaker
	for i := range DefaultThreshold {
		b = c.Record(id, false, at(time.Duration(i)*time.Second))
	}
	if b.State != Open {
		t.Fatalf("after %d failures: %+v, want open", DefaultThreshold, b)
	}
	return b
}

func TestNewCache(t *testing.T) {
	if _, err := NewCache(CacheConfig{}); err == nil {
		t.Fatal("NewCache without a store succeeded")
	}
}

func TestCacheUpdateFlushHandover(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		c1 := newCache(t, s, CacheConfig{})
		want := openIn(t, c1, "ep_1")
		if got := c1.Get("ep_1"); got != want {
			t.Fatalf("Get = %+v, want %+v", got, want)
		}
		if be.exists(t, "ep_1") {
			t.Fatal("Update wrote to Redis before Flush")
		}
		if err := c1.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Load(ctx, "ep_1"); err != nil || got != want {
			t.Fatalf("Load after Flush = %+v, %v; want %+v", got, err, want)
		}

		// Another instance takes the endpoint over.
		c2 := newCache(t, s, CacheConfig{})
		if got := c2.Get("ep_1"); got != (Breaker{}) {
			t.Fatalf("Get before Warm = %+v, want the zero breaker", got)
		}
		if err := c2.Warm(ctx, []string{"ep_1", "ep_other"}); err != nil {
			t.Fatal(err)
		}
		if got := c2.Get("ep_1"); got != want {
			t.Fatalf("second cache after Warm = %+v, want %+v", got, want)
		}
		if d := c2.Allow("ep_1", want.PausedUntil.Add(-time.Second), 4, 0); d.Allowed {
			t.Fatalf("second cache allowed during the pause: %+v", d)
		}

		// It closes the breaker and hands the endpoint back.
		c1.Forget("ep_1")
		c2.Record("ep_1", true, want.PausedUntil)
		if err := c2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c1.Warm(ctx, []string{"ep_1"}); err != nil {
			t.Fatal(err)
		}
		if got := c1.Get("ep_1"); got != (Breaker{}) {
			t.Fatalf("first cache after handing back = %+v, want the zero (closed) breaker", got)
		}
	})
}

func TestCacheFlushWritesOnlyChanges(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		c := newCache(t, s, CacheConfig{})
		openIn(t, c, "ep_1")
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		// Delete behind the cache's back: only a change may write it again.
		if err := be.client.Del(ctx, be.prefix+"ep_1").Err(); err != nil {
			t.Fatal(err)
		}
		c.Allow("ep_1", t0, 4, 0) // still paused: no change
		c.Allow("ep_2", t0, 4, 0) // closed: no change
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if be.exists(t, "ep_1") || be.exists(t, "ep_2") {
			t.Fatal("Flush wrote a breaker that had not changed")
		}
		c.Record("ep_1", false, at(time.Minute))
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Load(ctx, "ep_1"); got != c.Get("ep_1") {
			t.Fatalf("Load = %+v, want the changed %+v", got, c.Get("ep_1"))
		}
	})
}

// Warm must not skip an endpoint that was only read: a closed breaker
// allowing attempts is no reason to ignore what the previous owner wrote.
func TestCacheWarmAfterReads(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		if err := s.Save(ctx, "ep_1", opened()); err != nil {
			t.Fatal(err)
		}
		c := newCache(t, s, CacheConfig{})
		if d := c.Allow("ep_1", t0, 4, 0); !d.Allowed {
			t.Fatalf("unwarmed endpoint denied: %+v", d)
		}
		c.Get("ep_1")
		if err := c.Warm(ctx, []string{"ep_1"}); err != nil {
			t.Fatal(err)
		}
		if got := c.Get("ep_1"); got != opened() {
			t.Fatalf("after Warm = %+v, want the stored %+v", got, opened())
		}
	})
}

// An endpoint updated before Warm keeps its in-memory breaker: that
// evidence is newer than Redis's.
func TestCacheWarmKeepsLocalUpdates(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		if err := s.Save(ctx, "ep_1", opened()); err != nil {
			t.Fatal(err)
		}
		c := newCache(t, s, CacheConfig{})
		want := c.Record("ep_1", false, t0)
		if err := c.Warm(ctx, []string{"ep_1"}); err != nil {
			t.Fatal(err)
		}
		if got := c.Get("ep_1"); got != want {
			t.Fatalf("after Warm = %+v, want the local %+v", got, want)
		}
	})
}

// An endpoint updated while Warm waits for Redis keeps the update.
func TestCacheWarmRacingUpdate(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		if err := s.Save(ctx, "ep_1", opened()); err != nil {
			t.Fatal(err)
		}
		c := newCache(t, s, CacheConfig{})
		var want Breaker
		be.client.AddHook(beforeCmd{name: "mget", fn: func() { want = c.Record("ep_1", false, t0) }})
		if err := c.Warm(ctx, []string{"ep_1"}); err != nil {
			t.Fatal(err)
		}
		if want == (Breaker{}) {
			t.Fatal("the hook did not run: Warm sent no MGET")
		}
		if got := c.Get("ep_1"); got != want {
			t.Fatalf("after Warm = %+v, want the update made during it %+v", got, want)
		}
	})
}

// beforeCmd is a go-redis hook that runs fn just before each command called
// name is sent.
type beforeCmd struct {
	name string
	fn   func()
}

func (h beforeCmd) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h beforeCmd) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == h.name {
			h.fn()
		}
		return next(ctx, cmd)
	}
}

func (h beforeCmd) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func TestCacheRedisDown(t *testing.T) {
	ctx := context.Background()
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr(), MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	s, err := NewStore(StoreConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, "ep_warm", opened()); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, s, CacheConfig{})
	want := openIn(t, c, "ep_1")

	mr.Close()
	if err := c.Flush(ctx); err == nil {
		t.Fatal("Flush with Redis down succeeded")
	}
	if err := c.Warm(ctx, []string{"ep_warm"}); err == nil {
		t.Fatal("Warm with Redis down succeeded")
	}
	if got := c.Get("ep_warm"); got != (Breaker{}) || !c.Loaded("ep_warm") {
		t.Fatalf("after a failed Warm: %+v, loaded %v; want the zero breaker, loaded", got, c.Loaded("ep_warm"))
	}
	if got := c.Get("ep_1"); got != want {
		t.Fatalf("Get with Redis down = %+v, want %+v", got, want)
	}

	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, "ep_1"); err != nil || got != want {
		t.Fatalf("Load after Redis came back = %+v, %v; want %+v kept dirty and flushed", got, err, want)
	}
	// The failed Warm entered ep_warm closed: it is not read again while
	// this instance owns it, only after a Forget (the next ownership).
	if err := c.Warm(ctx, []string{"ep_warm"}); err != nil {
		t.Fatal(err)
	}
	if got := c.Get("ep_warm"); got != (Breaker{}) {
		t.Fatalf("Warm after a failed Warm = %+v, want the closed breaker it entered", got)
	}
	c.Forget("ep_warm")
	if err := c.Warm(ctx, []string{"ep_warm"}); err != nil {
		t.Fatal(err)
	}
	if got := c.Get("ep_warm"); got != opened() {
		t.Fatalf("Warm after Forget = %+v, want %+v", got, opened())
	}
}

// A Warm that fails, whether Redis refuses the connection or accepts it and
// never answers, enters the ids it could not read as closed and clean, so
// the next lane for them starts at once: a second Warm does not go to
// Redis. An id updated while the failing Warm waited keeps its update.
func TestCacheFailedWarmEntersClosed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		client func(t *testing.T) redis.UniversalClient
	}{
		{"refused", unreachable},
		{"hung", hung},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			client := tc.client(t)
			s, err := NewStore(StoreConfig{Client: client})
			if err != nil {
				t.Fatal(err)
			}
			c := newCache(t, s, CacheConfig{})
			var mgets int
			var racing Breaker
			client.AddHook(beforeCmd{name: "mget", fn: func() {
				mgets++
				racing = c.Record("ep_racing", false, t0)
			}})

			if err := c.Warm(ctx, []string{"ep_1", "ep_racing"}); err == nil {
				t.Fatal("Warm against a failing Redis succeeded")
			}
			if mgets != 1 {
				t.Fatalf("Warm sent %d MGETs, want 1", mgets)
			}
			if !c.Loaded("ep_1") {
				t.Fatal("after a failed Warm the id is not loaded: the next lane would warm again")
			}
			c.mu.Lock()
			e := c.entries["ep_1"]
			c.mu.Unlock()
			if e.b != (Breaker{}) || e.dirty {
				t.Fatalf("after a failed Warm: %+v dirty %v, want the zero (closed) breaker, clean", e.b, e.dirty)
			}
			if got := c.Get("ep_racing"); got != racing || got.ConsecutiveFailures != 1 {
				t.Fatalf("id updated during the failed Warm = %+v, want its update %+v", got, racing)
			}

			if err := c.Warm(ctx, []string{"ep_1", "ep_racing"}); err != nil {
				t.Fatalf("second Warm: %v", err)
			}
			if mgets != 1 {
				t.Fatalf("second Warm went to Redis (%d MGETs)", mgets)
			}
			if d := c.Allow("ep_1", t0, 4, 0); !d.Allowed {
				t.Fatalf("closed breaker denied an attempt: %+v", d)
			}
		})
	}
}

// hung returns a client for a server that accepts connections and never
// answers, with a short read timeout so that a command fails quickly.
func hung(t *testing.T) redis.UniversalClient {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn) // held open, never read or answered
			mu.Unlock()
		}
	}()
	client := redis.NewClient(&redis.Options{
		Addr: l.Addr().String(), MaxRetries: -1, DialerRetries: 1,
		ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond,
	})
	t.Cleanup(func() {
		client.Close()
		l.Close()
		<-accepted
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return client
}

func TestCacheForget(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		c := newCache(t, be.store(t), CacheConfig{})
		openIn(t, c, "ep_1")
		c.Forget("ep_1", "ep_unknown")
		if got := c.Get("ep_1"); got != (Breaker{}) {
			t.Fatalf("Get after Forget = %+v, want the zero breaker", got)
		}
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if be.exists(t, "ep_1") {
			t.Fatal("Flush wrote a forgotten breaker")
		}
	})
}

func TestCacheConcurrentUpdates(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		c := newCache(t, s, CacheConfig{})
		const workers, perWorker = 16, 200
		ids := []string{"ep_0", "ep_1", "ep_2", "ep_3"}

		var wg sync.WaitGroup
		stop := make(chan struct{})
		flusherDone := make(chan error, 1)
		go func() { // flushes and warms race with the updates
			var err error
			for err == nil {
				select {
				case <-stop:
					flusherDone <- nil
					return
				default:
				}
				err = c.Flush(ctx)
				if err == nil {
					err = c.Warm(ctx, []string{"ep_4"})
				}
			}
			flusherDone <- err
		}()
		for w := range workers {
			wg.Go(func() {
				for i := range perWorker {
					id := ids[(w+i)%len(ids)]
					c.Record(id, false, at(time.Duration(i)*time.Millisecond))
					c.Allow(id, at(time.Duration(i)*time.Millisecond), 4, 0)
					c.Get(id)
				}
			})
		}
		wg.Wait()
		close(stop)
		if err := <-flusherDone; err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		stored, err := s.LoadMany(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		want := workers * perWorker / len(ids)
		for _, id := range ids {
			if got := c.Get(id); got.ConsecutiveFailures != want {
				t.Errorf("%s: %d failures in memory, want %d", id, got.ConsecutiveFailures, want)
			}
			if stored[id] != c.Get(id) {
				t.Errorf("%s: stored %+v, in memory %+v", id, stored[id], c.Get(id))
			}
		}
	})
}

func TestCacheStartStop(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		c := newCache(t, s, CacheConfig{FlushInterval: time.Millisecond})
		flushes := make(chan error, 1)
		c.flushed = func(err error) {
			select {
			case flushes <- err:
			default:
			}
		}
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		done := c.done
		if err := c.Start(ctx); err != nil { // a second Start does nothing
			t.Fatal(err)
		}
		if c.done != done {
			t.Fatal("second Start replaced the running loop")
		}

		want := openIn(t, c, "ep_1")
		deadline := time.After(10 * time.Second)
		for !be.exists(t, "ep_1") {
			select {
			case err := <-flushes:
				if err != nil {
					t.Fatal(err)
				}
			case <-deadline:
				t.Fatal("the flush loop never wrote the breaker")
			}
		}
		if got, _ := s.Load(ctx, "ep_1"); got != want {
			t.Fatalf("Load = %+v, want %+v", got, want)
		}

		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		default:
			t.Fatal("Stop returned before the flush loop did")
		}
		if err := c.Stop(ctx); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
	})
}

// Stop flushes what changed since the loop's last flush.
func TestCacheStopFlushes(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		c := newCache(t, s, CacheConfig{FlushInterval: time.Hour})
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		want := openIn(t, c, "ep_1")
		if err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Load(ctx, "ep_1"); err != nil || got != want {
			t.Fatalf("Load after Stop = %+v, %v; want %+v", got, err, want)
		}
	})
}

// The loop outlives the context given to Start, like every component's:
// only Stop ends it.
func TestCacheLoopOutlivesStartContext(t *testing.T) {
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	s, err := NewStore(StoreConfig{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	c := newCache(t, s, CacheConfig{FlushInterval: time.Millisecond})
	flushes := make(chan error, 1)
	c.flushed = func(err error) {
		select {
		case flushes <- err:
		default:
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	done := c.done
	cancel()
	// Two flushes: the first may have begun before the cancel.
	for range 2 {
		select {
		case err := <-flushes:
			if err != nil {
				t.Fatalf("a flush after Start's context ended failed: %v", err)
			}
		case <-done:
			t.Fatal("the flush loop ended with Start's context")
		case <-time.After(10 * time.Second):
			t.Fatal("no flush after Start's context ended")
		}
	}
	if err := c.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	default:
		t.Fatal("Stop returned before the flush loop did")
	}
}

func ExampleCache() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer client.Close()
	store, _ := NewStore(StoreConfig{Client: client})
	cache, _ := NewCache(CacheConfig{Store: store})
	ctx := context.Background()
	if err := cache.Start(ctx); err != nil {
		panic(err)
	}
	defer cache.Stop(ctx)

	// On partition assignment: pick up what the previous owner wrote.
	_ = cache.Warm(ctx, []string{"ep_1"})

	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for range 20 {
		if d := cache.Allow("ep_1", now, 4, 0); d.Allowed {
			cache.Record("ep_1", false, now) // the attempt failed
		}
	}
	d := cache.Allow("ep_1", now.Add(time.Minute), 4, 0)
	fmt.Println(cache.Get("ep_1").State, d.Allowed, d.Wait)
	// Output: open false 4m0s
}

// TestCacheResetClearsRedisEvenWhenNotLoaded checks that Reset wipes a
// disabled endpoint's record in Redis, loaded or not, so that a later owner
// warming it finds a closed breaker.
func TestCacheResetClearsRedisEvenWhenNotLoaded(t *testing.T) {
	eachRedis(t, func(t *testing.T, be backend) {
		ctx := context.Background()
		s := be.store(t)
		c1 := newCache(t, s, CacheConfig{})
		openIn(t, c1, "ep_1")
		if err := c1.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		c2 := newCache(t, s, CacheConfig{}) // never loaded ep_1
		c2.Reset("ep_1")
		if err := c2.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		c3 := newCache(t, s, CacheConfig{})
		if err := c3.Warm(ctx, []string{"ep_1"}); err != nil {
			t.Fatal(err)
		}
		if got := c3.Get("ep_1"); got != (Breaker{}) {
			t.Fatalf("after Reset the next owner sees %+v, want a closed breaker", got)
		}
	})
}
