package app_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/hooklog"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestBreakerPausesAFailingEndpoint makes an endpoint fail until its
// breaker has been open for a while: the breaker holds its attempts (a few
// probes instead of a retry every 50 ms), parks the lane, and once the
// endpoint answers again one probe closes it and everything arrives in
// order. The breaker state goes through Redis (the real one on the real
// backend).
func TestBreakerPausesAFailingEndpoint(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		events := hooklog.New[engine.Event]()
		f, a, api := scenario(t, b, func(c *app.Config) {
			c.OnEvent = events.Add
			c.Breaker = breaker.Config{Threshold: 3, FirstPause: 700 * time.Millisecond, MaxPause: 1400 * time.Millisecond}
			c.Retry = deliver.RetryPolicy{Base: 50 * time.Millisecond, Min: 50 * time.Millisecond, Max: 100 * time.Millisecond,
				MaxAttempts: 10000, MaxAge: time.Hour}
		})
		ep := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(1), "max_concurrency": 2})
		var failing atomic.Bool
		var failures atomic.Int64
		failing.Store(true)
		recv, _ := f.Add(1, ep.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
			if failing.Load() {
				failures.Add(1)
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		var values [][]byte
		for i := range 6 {
			values = append(values, envelope(fmt.Sprintf("b-%d", i), "acme", fmt.Sprintf("order:%d", i%3), int64(i/3+1)))
		}
		publishTo(t, a.Brokers(), a.Topics().Events, values)

		breakerEvent := func(kind engine.EventKind) func(engine.Event) bool {
			return func(e engine.Event) bool { return e.Kind == kind && e.Endpoint == ep.ID }
		}
		events.Wait(t, 30*time.Second, "the breaker to open", breakerEvent(engine.EventBreakerOpened))
		if v, ok := endpointGauge(t, a, "laneway_endpoint_breaker_open", ep.ID); !ok || v != 1 {
			t.Errorf("laneway_endpoint_breaker_open = %v (shown %t) once the breaker opened, want 1", v, ok)
		}
		// Keep failing for two more pauses: without the breaker that is
		// ~40 retries at this retry delay; with it, one or two probe rounds.
		time.Sleep(2 * time.Second) // shapes the scenario; nothing waits on it
		failing.Store(false)
		waitUntil(t, f, time.Minute, "every event after recovery", func() bool { return distinctIDs(recv.Receipts()) >= len(values) })
		if n := failures.Load(); n > 12 {
			t.Errorf("%d failed attempts: the breaker did not hold the endpoint's retries", n)
		}
		checkOrder(t, ep.ID, recv.Receipts())
		events.Wait(t, 30*time.Second, "a probe to close the breaker", breakerEvent(engine.EventBreakerClosed))
		if v, ok := endpointGauge(t, a, "laneway_endpoint_breaker_open", ep.ID); !ok || v != 0 {
			t.Errorf("laneway_endpoint_breaker_open = %v (shown %t) once the breaker closed, want 0", v, ok)
		}
	})
}
