package app_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/hooklog"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// The breaker tests below run two Laneway instances on one Kafka (same
// topics and groups) and one Redis. internal/app/breaker_test.go already covers one
// instance: the breaker holds a failing endpoint's retries and one probe
// closes it. These cover what needs two: the state handed over in Redis, and
// a Redis flush.

const sharedMaxConcurrency = 3

// TestBreakerSharedAcrossInstances: a failing endpoint's breaker opens after
// the threshold; during the pause nothing reaches the receiver; when the
// pause ends at most max_concurrency probes go out and, failing, re-open it
// for a doubled pause. The owning instance then stops while the breaker is
// open: the other instance, the new owner, honours the state it finds in
// Redis (no attempt before its paused_until, no more than max_concurrency in
// flight), one success closes the breaker, and the whole backlog arrives in
// per-entity order with nothing dead-lettered.
func TestBreakerSharedAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("two-instance test")
	}
	const (
		threshold  = 5
		firstPause = 3 * time.Second
		maxPause   = 2 * firstPause
	)
	for _, b := range sharedBreakerBackends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rig := startBreakerRig(t, b, breaker.Config{Threshold: threshold, FirstPause: firstPause, MaxPause: maxPause})
			values := rig.publish(t, 6, 1, 4) // 6 entities, revisions 1-4

			s1 := rig.waitBreaker(t, 30*time.Second, "the breaker to open", func(br breaker.Breaker) bool {
				return br.State == breaker.Open
			})
			if s1.ConsecutiveFailures < threshold || s1.Pause != firstPause {
				t.Errorf("breaker opened as %+v, want %d+ failures and a %v pause", s1, threshold, firstPause)
			}
			if n := len(rig.rc.Requests(nil)); n < threshold {
				t.Errorf("breaker opened after %d attempts, threshold %d", n, threshold)
			}
			owner, other := rig.owner(t)
			t.Logf("breaker open at %s until %s; owner is instance %s", stamp(s1.OpenedAt), stamp(s1.PausedUntil), owner.name)

			// The probe round after the first pause fails (the receiver
			// still answers 503) and re-opens the breaker, pause doubled.
			s2 := rig.waitBreaker(t, firstPause+30*time.Second, "the failed probe round to re-open the breaker", func(br breaker.Breaker) bool {
				return br.State == breaker.Open && br.PausedUntil.After(s1.PausedUntil)
			})
			if s2.Pause != maxPause || !s2.OpenedAt.Equal(s1.OpenedAt) {
				t.Errorf("breaker after a failed probe round %+v, want pause %v and opened_at kept", s2, maxPause)
			}

			// During the first pause: only attempts already in flight when
			// it opened (at most max_concurrency-1 besides the one that
			// opened it) may still arrive, and none late in the pause.
			during := rig.rc.Requests(func(rq fleet.Request) bool {
				return rq.At.After(s1.OpenedAt) && rq.At.Before(s1.PausedUntil)
			})
			if len(during) > sharedMaxConcurrency-1 {
				t.Errorf("%d attempts arrived during the pause %s-%s: %s", len(during), stamp(s1.OpenedAt), stamp(s1.PausedUntil), describeRequests(during))
			}
			for _, rq := range during {
				if rq.At.After(s1.OpenedAt.Add(firstPause / 2)) {
					t.Errorf("attempt at %s, in the middle of the pause %s-%s", stamp(rq.At), stamp(s1.OpenedAt), stamp(s1.PausedUntil))
				}
			}
			// Stop the owner while the breaker is open; the receiver works
			// again from now on, so an early attempt by the new owner would
			// be delivered (and seen).
			if left := time.Until(s2.PausedUntil); left < 2*time.Second {
				t.Fatalf("only %v of the second pause left before the handover: the scenario is too slow to tell anything", left)
			}
			rig.failing.Store(false)
			stopStart := time.Now()
			stopApp(t, owner.app)
			stopped := time.Now()
			// The stopped owner's last flush leaves the open breaker in
			// Redis (unless the new owner has acted already and written its
			// own).
			handed, err := rig.store.Load(context.Background(), rig.ep.ID)
			newOwnerActed := len(rig.rc.Requests(func(rq fleet.Request) bool { return rq.At.After(stopStart) })) > 0
			if err != nil || (!newOwnerActed && (handed.State != breaker.Open || !handed.PausedUntil.Equal(s2.PausedUntil))) {
				t.Errorf("breaker in Redis after the owner stopped: %+v (%v), want it open until %s", handed, err, stamp(s2.PausedUntil))
			}
			t.Logf("instance %s stopped in %v; pause ends in %v", owner.name, stopped.Sub(stopStart).Round(time.Millisecond), time.Until(s2.PausedUntil).Round(time.Millisecond))

			// The probe round, up to the stop (the new owner may start before
			// Stop returns): at most max_concurrency probes,
			// and the first failure ended the round (open again until s2).
			probes := rig.rc.Requests(func(rq fleet.Request) bool { return !rq.At.Before(s1.PausedUntil) && rq.At.Before(stopStart) })
			if len(probes) == 0 || len(probes) > sharedMaxConcurrency {
				t.Errorf("%d probes after the first pause, want 1 to %d: %s", len(probes), sharedMaxConcurrency, describeRequests(probes))
			}
			t.Logf("first probe round: %d probes, at most %d in flight", len(probes), maxInFlightOf(probes))

			rig.waitDelivered(t, values, time.Minute)
			early := rig.rc.Requests(func(rq fleet.Request) bool { return rq.At.After(stopStart) && rq.At.Before(s2.PausedUntil) })
			if len(early) > 0 {
				t.Errorf("the new owner (instance %s) sent %d attempts before the breaker's paused_until %s it could read in Redis: %s",
					other.name, len(early), stamp(s2.PausedUntil), describeRequests(early))
			}
			after := rig.rc.Requests(func(rq fleet.Request) bool { return rq.At.After(stopStart) })
			if len(after) > 0 {
				t.Logf("new owner: first attempt %v after the pause ended, %d attempts, at most %d in flight",
					after[0].At.Sub(s2.PausedUntil).Round(time.Millisecond), len(after), maxInFlightOf(after))
			}
			rig.checkEnd(t, other.app)
		})
	}
}

// TestBreakerSharedRedisFlush: Redis holds no truth. The breaker of a
// failing endpoint opens; Redis is flushed partway (FLUSHALL on the private
// miniredis; on the real Redis, which other packages' tests share, FLUSHDB of
// a database only this test uses); more events arrive; the owner stops while
// its breaker is open. The other instance takes over with no state to read:
// its breaker starts closed (probes start early, which the contract
// accepts), opens again after a fresh streak of threshold failures, holds
// the pause, and one success closes it. Nothing is lost: every event is
// delivered, in per-entity order, none dead-lettered.
func TestBreakerSharedRedisFlush(t *testing.T) {
	if testing.Short() {
		t.Skip("two-instance test")
	}
	const (
		threshold  = 5
		firstPause = 8 * time.Second
	)
	for _, b := range sharedBreakerBackends(t) {
		t.Run(b.Name, func(t *testing.T) {
			rig := startBreakerRig(t, b, breaker.Config{Threshold: threshold, FirstPause: firstPause, MaxPause: firstPause})
			values := rig.publish(t, 6, 1, 2)

			s1 := rig.waitBreaker(t, 30*time.Second, "the breaker to open", func(br breaker.Breaker) bool {
				return br.State == breaker.Open
			})
			owner, other := rig.owner(t)
			// Let the attempts in flight at the open finish and reach Redis,
			// so that the owner has nothing left to write after the flush
			// (until its pause ends).
			s1 = rig.waitBreaker(t, 10*time.Second, "every failure recorded in Redis", func(br breaker.Breaker) bool {
				failed := rig.rc.Requests(func(rq fleet.Request) bool { return rq.Status == http.StatusServiceUnavailable })
				return br.State == breaker.Open && br.ConsecutiveFailures == len(failed) && len(rig.rc.Requests(nil)) == len(failed)
			})
			rig.flushRedis(t, b)
			if br, err := rig.store.Load(context.Background(), rig.ep.ID); err != nil || br != (breaker.Breaker{}) {
				t.Fatalf("breaker after the flush: %+v, %v", br, err)
			}
			t.Logf("breaker opened at %s until %s by instance %s after %d failures; Redis flushed",
				stamp(s1.OpenedAt), stamp(s1.PausedUntil), owner.name, s1.ConsecutiveFailures)

			// More events while the endpoint is paused and Redis is empty.
			values = append(values, rig.publish(t, 6, 3, 4)...)
			rig.waitParked(t, owner, len(values))

			if left := time.Until(s1.PausedUntil); left < time.Second {
				t.Fatalf("only %v of the pause left before the handover: the scenario is too slow to tell anything", left)
			}
			stopStart := time.Now()
			stopApp(t, owner.app)
			// The new owner may have written a streak of its own by now,
			// but the old owner's open breaker must not be back.
			if br, err := rig.store.Load(context.Background(), rig.ep.ID); err != nil || (br.State == breaker.Open && br.OpenedAt.Equal(s1.OpenedAt)) {
				t.Fatalf("the stopped owner wrote its breaker back after the flush: %+v, %v", br, err)
			}

			// The new owner starts closed: a fresh streak opens the breaker
			// again, for the first pause, not a doubled one.
			s2 := rig.waitBreaker(t, 30*time.Second, "the new owner to open the breaker", func(br breaker.Breaker) bool {
				return br.State == breaker.Open
			})
			if !s2.OpenedAt.After(stopStart) || s2.Pause != firstPause || s2.ConsecutiveFailures < threshold {
				t.Errorf("breaker opened by the new owner: %+v, want a fresh streak of %d+ failures after %s and a %v pause",
					s2, threshold, stamp(stopStart), firstPause)
			}
			t.Logf("new owner (instance %s): first attempt %v after the stop began (the flushed pause ran until %s); breaker open again at %s until %s",
				other.name, firstAfter(rig.rc.Requests(nil), stopStart), stamp(s1.PausedUntil), stamp(s2.OpenedAt), stamp(s2.PausedUntil))

			// It holds the pause; the receiver recovers, and the first probe
			// closes the breaker.
			rig.failing.Store(false)
			rig.waitDelivered(t, values, time.Minute)
			late := rig.rc.Requests(func(rq fleet.Request) bool {
				return rq.At.After(s2.OpenedAt.Add(firstPause/2)) && rq.At.Before(s2.PausedUntil)
			})
			if len(late) > 0 {
				t.Errorf("%d attempts during the new owner's pause %s-%s: %s", len(late), stamp(s2.OpenedAt), stamp(s2.PausedUntil), describeRequests(late))
			}
			rig.checkEnd(t, other.app)
		})
	}
}

func firstAfter(reqs []fleet.Request, at time.Time) time.Duration {
	for _, rq := range reqs {
		if rq.At.After(at) {
			return rq.At.Sub(at).Round(time.Millisecond)
		}
	}
	return -1
}

// sharedBreakerBackends are kfake (both instances on one in-process cluster
// and one miniredis) and, when configured, the real broker with a Redis
// database of this test's own, so that flushing it touches nobody else.
func sharedBreakerBackends(t *testing.T) []testenv.Backend {
	backends := []testenv.Backend{testenv.Kfake(t)}
	if b, ok := testenv.RealKafka(); ok {
		u, err := url.Parse(b.RedisURL)
		if err != nil {
			t.Fatalf("%s: %v", testenv.RedisEnv, err)
		}
		u.Path = "/13"
		b.RedisURL = u.String()
		backends = append(backends, b)
	} else {
		t.Logf("%s not set: skipping the real-broker run", testenv.KafkaEnv)
	}
	return backends
}

type instance struct {
	name string
	app  *app.App
}

type breakerRig struct {
	apps    []instance
	events  *hooklog.Log[instanceEvent] // both instances' engine events
	api     apiClient
	rc      *fleet.Recorder
	ep      createdEndpoint
	rdb     *redis.Client
	store   *breaker.Store
	failing atomic.Bool
	brokers []string
}

// startBreakerRig starts the receiver (failing: 503 after 150 ms, then 2xx
// after 20 ms, so that concurrent attempts overlap), two instances sharing Kafka and Redis, and
// one endpoint with max_concurrency 3.
func startBreakerRig(t *testing.T, b testenv.Backend, bc breaker.Config) *breakerRig {
	t.Helper()
	rig := &breakerRig{events: hooklog.New[instanceEvent]()}
	rig.failing.Store(true)
	rig.rc = startRecorder(t, func(w http.ResponseWriter, r *http.Request, _ *fleet.Request) {
		if rig.failing.Load() {
			select {
			case <-time.After(150 * time.Millisecond): // holds the attempt open, not a synchronisation
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		select { // a little latency, so that concurrent deliveries overlap
		case <-time.After(20 * time.Millisecond):
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	})
	opts, err := redis.ParseURL(b.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	rig.rdb = redis.NewClient(opts)
	t.Cleanup(func() { _ = rig.rdb.Close() })
	if rig.store, err = breaker.NewStore(breaker.StoreConfig{Client: rig.rdb}); err != nil {
		t.Fatal(err)
	}

	ns := testenv.Unique("brk")
	for _, name := range []string{"a", "b"} {
		a := startApp(t, b, func(c *app.Config) {
			shareCluster(c, ns, name)
			c.RedisURL = b.RedisURL
			c.SessionTimeout = 6 * time.Second
			c.Breaker = bc
			c.OnEvent = func(e engine.Event) { rig.events.Add(instanceEvent{instance: name, Event: e}) }
			c.Retry = deliver.RetryPolicy{Base: 50 * time.Millisecond, Min: 50 * time.Millisecond, Max: 100 * time.Millisecond,
				MaxAttempts: 1_000_000, MaxAge: time.Hour}
		})
		rig.apps = append(rig.apps, instance{name: name, app: a})
	}
	first := rig.apps[0].app
	rig.brokers = first.Brokers()
	// Both stages of both instances own partitions before anything is
	// published, so no rebalance moves the endpoint by surprise.
	waitForGroupMembers(t, rig.brokers, first.DeliveriesGroup(), 2)
	waitForGroupMembers(t, rig.brokers, topics.GroupsFor(ns).Fanout, 2)
	rig.api = newAPI(t, first.HTTPAddr())
	rig.ep = rig.api.createEndpoint(map[string]any{"tenant": "brk", "url": rig.rc.URL("/hook"), "max_concurrency": sharedMaxConcurrency})
	setSecret(t, rig.rc, rig.ep.Secret)
	// Both instances must know the endpoint before deliveries reach them.
	for _, in := range rig.apps {
		waitForAPIStatus(t, newAPI(t, in.app.HTTPAddr()), rig.ep.ID, "active")
	}
	return rig
}

// publish sends revisions from..to of entities brk:0..n-1, interleaved, and
// returns their event ids.
func (rig *breakerRig) publish(t *testing.T, entities int, from, to int64) []string {
	t.Helper()
	var values [][]byte
	var ids []string
	for rev := from; rev <= to; rev++ {
		for e := range entities {
			id := fmt.Sprintf("brk-%d-%d", e, rev)
			values = append(values, envelope(id, "brk", fmt.Sprintf("brk:%d", e), rev))
			ids = append(ids, id)
		}
	}
	publishTo(t, rig.brokers, rig.apps[0].app.Topics().Events, values)
	return ids
}

// waitBreaker polls the breaker the instances keep in Redis (written behind,
// every second) until cond holds.
func (rig *breakerRig) waitBreaker(t *testing.T, timeout time.Duration, what string, cond func(breaker.Breaker) bool) breaker.Breaker {
	t.Helper()
	deadline := time.Now().Add(timeout)
	poll := time.NewTicker(25 * time.Millisecond)
	defer poll.Stop()
	for {
		br, err := rig.store.Load(context.Background(), rig.ep.ID)
		if err == nil && cond(br) {
			return br
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; breaker %+v (%v)", timeout, what, br, err)
		}
		<-poll.C
	}
}

// instanceEvent is what an instance's engine did.
type instanceEvent struct {
	instance string
	engine.Event
}

// owner returns the instance that owns the endpoint (the one that opened
// its breaker) and the other one.
func (rig *breakerRig) owner(t *testing.T) (owner, other instance) {
	t.Helper()
	opened := func(e instanceEvent) bool { return e.Kind == engine.EventBreakerOpened && e.Endpoint == rig.ep.ID }
	first := rig.events.Wait(t, 10*time.Second, "an instance to open the endpoint's breaker", opened)
	for _, e := range rig.events.All() {
		if opened(e) && e.instance != first.instance {
			t.Fatalf("instances %s and %s both opened the endpoint's breaker, want exactly one owner", first.instance, e.instance)
		}
	}
	if rig.apps[0].name == first.instance {
		return rig.apps[0], rig.apps[1]
	}
	return rig.apps[1], rig.apps[0]
}

// waitParked waits until the owner has parked the endpoint's backlog of n
// deliveries (its lane is parked while the breaker is open), so the
// deliveries published after the flush are in Kafka, not in its memory:
// the fan-outs wrote all n, and the owner committed their deliveries
// partition past the last (its commit passes a parked delivery once the
// parked copy is written).
func (rig *breakerRig) waitParked(t *testing.T, owner instance, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	written, partitions, end := 0, map[int32]bool{}, int64(0)
	last := rig.events.Wait(t, time.Until(deadline), fmt.Sprintf("the fan-out to write %d deliveries", n), func(e instanceEvent) bool {
		if e.Kind == engine.EventFannedOut {
			written += e.Count
			partitions[e.Partition] = true
			end = max(end, e.Offset)
		}
		return written >= n
	})
	if len(partitions) != 1 {
		t.Fatalf("the endpoint's deliveries went to partitions %v, want one", partitions)
	}
	rig.events.Wait(t, time.Until(deadline), fmt.Sprintf("instance %s to commit partition %d past its %d deliveries (offset %d)", owner.name, last.Partition, n, end),
		func(e instanceEvent) bool {
			return e.instance == owner.name && e.Kind == engine.EventCommitted && e.Partition == last.Partition && e.Offset >= end
		})
}

func (rig *breakerRig) flushRedis(t *testing.T, b testenv.Backend) {
	t.Helper()
	ctx := context.Background()
	var err error
	if b.Name == "real" {
		err = rig.rdb.FlushDB(ctx).Err() // a database of this test's own
	} else {
		err = rig.rdb.FlushAll(ctx).Err()
	}
	if err != nil {
		t.Fatalf("flush redis: %v", err)
	}
}

// waitDelivered waits until every event id got a 2xx.
func (rig *breakerRig) waitDelivered(t *testing.T, ids []string, timeout time.Duration) {
	t.Helper()
	waitRecorded(t, rig.rc, timeout, fmt.Sprintf("all %d events delivered", len(ids)), func() bool {
		got := rig.rc.Delivered()
		for _, id := range ids {
			if _, ok := got[id]; !ok {
				return false
			}
		}
		return true
	})
}

// checkEnd checks what must hold once everything arrived: per-entity order,
// the concurrency limit, no dead letters, and a closed breaker in Redis.
func (rig *breakerRig) checkEnd(t *testing.T, survivor *app.App) {
	t.Helper()
	reqs := rig.rc.Requests(nil)
	checkRecordedOrder(t, reqs)
	maxInFlight, bad, overlaps := rig.rc.Stats()
	if maxInFlight > sharedMaxConcurrency {
		t.Errorf("receiver saw %d requests in flight, max_concurrency %d", maxInFlight, sharedMaxConcurrency)
	}
	if len(overlaps) > 0 {
		t.Errorf("two deliveries of one entity in flight at once: %v", overlaps)
	}
	if bad > 0 {
		t.Errorf("%d requests failed signature verification", bad)
	}
	if n := recordsIn(t, rig.brokers, survivor.Topics().Dead); n != 0 {
		t.Errorf("%d dead letters, want none", n)
	}
	rig.waitBreaker(t, 10*time.Second, "the breaker to be closed in Redis", func(br breaker.Breaker) bool {
		return br.State == "" || br.State == breaker.Closed && br.ConsecutiveFailures == 0
	})
}

func maxInFlightOf(reqs []fleet.Request) int {
	m := 0
	for _, rq := range reqs {
		m = max(m, rq.InFlight)
	}
	return m
}

// describeRequests lists the first few requests.
func describeRequests(reqs []fleet.Request) string {
	s := ""
	for i, rq := range reqs {
		if i == 6 {
			return s + fmt.Sprintf("and %d more", len(reqs)-i)
		}
		s += fmt.Sprintf("[%s %s r%d status %d, %d in flight] ", stamp(rq.At), rq.Entity, rq.Revision, rq.Status, rq.InFlight)
	}
	return s
}

func stamp(t time.Time) string { return t.Format("15:04:05.000") }
