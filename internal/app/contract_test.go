package app_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestInvalidRecordIsDeadLettered writes a record that is not an event
// between two valid ones: it becomes an invalid_event dead letter with the
// raw bytes, and both valid events are still delivered.
func TestInvalidRecordIsDeadLettered(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		f, a, api := scenario(t, b, nil)
		ep := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(1)})
		recv, _ := f.Add(1, ep.Secret, nil)

		garbage := []byte(`{"type": "order.updated", "tenant": "acme"` + "\xff")
		publish(t, a, "order:1", envelope("before", "acme", "order:1", 1), garbage, envelope("after", "acme", "order:1", 2))
		waitForTotal(t, f, 2, time.Minute)
		if got := recv.Receipts(); got[0].MsgID != "before" || got[1].MsgID != "after" {
			t.Errorf("deliveries = %+v, want before then after", got)
		}
		dls := readDeadLetters(t, a, 1, func(dl event.DeadLetter) bool { return dl.Reason == event.ReasonInvalidEvent })
		if string(dls[0].Raw) != string(garbage) || dls[0].Detail == "" {
			t.Errorf("dead letter = %+v, want the raw record and a reason", dls[0])
		}
	})
}

// TestDeliveryContract drives endpoints through retry, 410 and 413 and
// checks the outcome of each on the real pipeline.
func TestDeliveryContract(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		f, a, api := scenario(t, b, nil)

		// Endpoint 1 fails each delivery's first attempt: everything still
		// arrives, in order, on the second.
		flaky := api.createEndpoint(map[string]any{"tenant": "flaky", "url": f.URL(1)})
		flakyRecv, _ := f.Add(1, flaky.Secret, func(w http.ResponseWriter, _ *http.Request, attempt int) {
			if attempt == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		gone := api.createEndpoint(map[string]any{"tenant": "gone", "url": f.URL(2)})
		_, _ = f.Add(2, gone.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusGone) })
		large := api.createEndpoint(map[string]any{"tenant": "large", "url": f.URL(3)})
		_, _ = f.Add(3, large.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		})

		var values [][]byte
		for i := 1; i <= 5; i++ {
			values = append(values, envelope(fmt.Sprintf("flaky-%d", i), "flaky", "order:9", int64(i)))
		}
		publish(t, a, "order:9", values...)
		publish(t, a, "order:gone", envelope("gone-1", "gone", "order:gone", 1))
		publish(t, a, "order:large", envelope("large-1", "large", "order:large", 1))

		waitForTotal(t, f, 5, time.Minute)
		checkOrder(t, flaky.ID, flakyRecv.Receipts())

		dls := readDeadLetters(t, a, 2, func(dl event.DeadLetter) bool {
			return dl.EndpointID == gone.ID || dl.EndpointID == large.ID
		})
		reasons := map[string]string{}
		for _, dl := range dls {
			reasons[dl.EndpointID] = dl.Reason
			if dl.Delivery == nil || dl.Delivery.Attempts != 1 || dl.Delivery.LastError == "" {
				t.Errorf("dead letter %+v lacks payload, attempts or last error", dl)
			}
		}
		if reasons[gone.ID] != event.ReasonGone || reasons[large.ID] != event.ReasonTooLarge {
			t.Errorf("dead-letter reasons = %v", reasons)
		}
		waitForEndpointStatus(t, a, gone.ID, "disabled")
	})
}

// TestLiveConcurrencyChange raises max_concurrency while the lane is busy:
// the running lane uses the new limit without a restart.
func TestLiveConcurrencyChange(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		f, a, api := scenario(t, b, nil)
		ep := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(1), "max_concurrency": 1})

		release := make(chan struct{})
		var once sync.Once
		defer once.Do(func() { close(release) })
		arrived := make(chan struct{}, 100)
		recv, _ := f.Add(1, ep.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
			arrived <- struct{}{}
			<-release
			w.WriteHeader(http.StatusOK)
		})
		for i := range 10 {
			publish(t, a, fmt.Sprintf("order:%d", i), envelope(fmt.Sprintf("e-%d", i), "acme", fmt.Sprintf("order:%d", i), 1))
		}
		waitArrivals(t, arrived, 1)
		if code, out := api.do("PATCH", "/v1/endpoints/"+ep.ID, map[string]any{"max_concurrency": 4}); code != http.StatusOK {
			t.Fatalf("patch: %d %s", code, out)
		}
		waitArrivals(t, arrived, 3) // 4 in flight at once, with the first one still held
		if m := recv.MaxInFlight(); m != 4 {
			t.Errorf("max in flight after raising the limit = %d, want 4", m)
		}
		once.Do(func() { close(release) })
		waitForTotal(t, f, 10, time.Minute)
		if m := recv.MaxInFlight(); m > 4 {
			t.Errorf("max in flight = %d, limit 4", m)
		}
	})
}

func waitArrivals(t *testing.T, arrived <-chan struct{}, n int) {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for range n {
		select {
		case <-arrived:
		case <-timeout.C:
			t.Fatalf("fewer than %d requests arrived", n)
		}
	}
}
