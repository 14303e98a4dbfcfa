package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// publish writes raw values to the events topic keyed by key.
func publish(t *testing.T, a *app.App, key string, values ...[]byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...), kgo.DefaultProduceTopic(a.Topics().Events))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Key: []byte(key), Value: v})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

func envelope(id, tenant, entity string, revision int64) []byte {
	b, _ := json.Marshal(event.Envelope{
		ID: id, Type: "order.updated", Tenant: tenant, Entity: entity, Revision: revision,
		OccurredAt: time.Now().UTC(), Data: json.RawMessage(`{}`),
	})
	return b
}

// readDeadLetters reads the dead-letter topic until match has seen want
// letters or the deadline passes.
func readDeadLetters(t *testing.T, a *app.App, want int, match func(event.DeadLetter) bool) []event.DeadLetter {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.Brokers()...), kgo.ConsumeTopics(a.Topics().Dead),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []event.DeadLetter
	for len(out) < want {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("found %d of %d dead letters: %+v", len(out), want, out)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			var dl event.DeadLetter
			if json.Unmarshal(r.Value, &dl) == nil && match(dl) {
				out = append(out, dl)
			}
		})
	}
	return out
}

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

func waitForEndpointStatus(t *testing.T, a *app.App, id, want string) {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		changed := a.Endpoints().Changed()
		if ep, _ := a.Endpoints().Get(id); ep.Status == want {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			ep, _ := a.Endpoints().Get(id)
			t.Fatalf("endpoint %s status %q, want %q", id, ep.Status, want)
		}
	}
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
