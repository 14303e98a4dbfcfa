package app_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/hooklog"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestAppStopWhileKafkaIsUnreachable runs the whole service on a kfake
// cluster of its own, lets an endpoint answer 413 only once that cluster is
// closed (so the delivery stage holds a dead letter Kafka will never
// acknowledge) and stops the app: Stop must return in bounded time (the
// delivery stage's RevokeTimeout + 20 s, plus the 10 s group leave the app
// adds once its clients are closed). Before the owner rewrite the delivery
// stage waited forever for the dead letter's produce callback.
func TestAppStopWhileKafkaIsUnreachable(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	mr := miniredis.RunT(t)
	b := testenv.Backend{Name: "kfake", Brokers: cluster.ListenAddrs(), RedisURL: "redis://" + mr.Addr() + "/0"}
	f, err := fleet.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	const attemptTimeout = 2 * time.Second // RevokeTimeout = 4 s
	events := hooklog.New[engine.Event]()
	a, stopped := startStoppableApp(t, b, func(c *app.Config) { c.AttemptTimeout, c.OnEvent = attemptTimeout, events.Add })
	api := newAPI(t, a.HTTPAddr())

	release := make(chan struct{})
	arrived := make(chan string, 10)
	ep := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(1)})
	if _, err := f.Add(1, ep.Secret, func(w http.ResponseWriter, r *http.Request, _ int) {
		id := r.Header.Get("webhook-id")
		arrived <- id
		if id == "ok-1" {
			w.WriteHeader(http.StatusOK)
			return
		}
		select { // answered once Kafka is gone
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusRequestEntityTooLarge)
	}); err != nil {
		t.Fatal(err)
	}
	awaitArrival := func(want string) {
		t.Helper()
		select {
		case got := <-arrived:
			if got != want {
				t.Fatalf("request for %s arrived, want %s", got, want)
			}
		case <-time.After(time.Minute):
			t.Fatalf("no request for %s", want)
		}
	}
	publishTo(t, a.Brokers(), a.Topics().Events, [][]byte{envelope("ok-1", "acme", "order:1", 1)})
	awaitArrival("ok-1")
	publishTo(t, a.Brokers(), a.Topics().Events, [][]byte{envelope("too-large-1", "acme", "order:2", 1)})
	awaitArrival("too-large-1")

	cluster.Close()
	close(release)
	events.Wait(t, 30*time.Second, "the 413 to be classified (its dead letter is then issued)", func(e engine.Event) bool {
		return e.Kind == engine.EventAttempt && e.Endpoint == ep.ID && e.Reason == "dead"
	})
	if n := counterSum(t, a, "laneway_delivery_attempts_total"); n != 2 {
		t.Fatalf("%v attempts counted, want 2 (ok-1 delivered, too-large-1 dead)", n)
	}
	if n := counterSum(t, a, "laneway_dead_letters_total"); n != 0 {
		t.Fatalf("%v dead letters acknowledged by a closed cluster", n)
	}

	bound := attemptTimeout + 2*time.Second + 20*time.Second + 10*time.Second
	start := time.Now()
	go stopped.stop(a)
	select {
	case <-stopped.done:
		t.Logf("app.Stop with Kafka gone and a dead letter out took %v (bound %v)", time.Since(start).Round(time.Millisecond), bound)
	case <-time.After(bound):
		t.Fatalf("app.Stop has not returned within %v with Kafka unreachable", bound)
	}
}

// appStop stops an app once: a test that gave up on a hanging Stop must
// not call it again (concurrently) in its cleanup.
type appStop struct {
	started atomic.Bool
	done    chan struct{}
}

func (s *appStop) stop(a *app.App) {
	if s.started.Swap(true) {
		return
	}
	_ = a.Stop(context.Background()) // Kafka is gone: the stops report it; how long Stop takes is the test
	close(s.done)
}

// startStoppableApp is startApp, with the app's own retry policy and lane
// buffer, whose cleanup stops the app only if the test has not started a
// Stop itself.
func startStoppableApp(t *testing.T, b testenv.Backend, tweak func(*app.Config)) (*app.App, *appStop) {
	t.Helper()
	cfg := appConfig(t, b, "stop")
	cfg.Retry, cfg.LaneBuffer = deliver.RetryPolicy{}, 0 // the app's own
	if tweak != nil {
		tweak(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := app.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start laneway: %v", err)
	}
	s := &appStop{done: make(chan struct{})}
	t.Cleanup(func() { s.stop(a) })
	return a, s
}
