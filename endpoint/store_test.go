package endpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/endpoint"
	"github.com/laneway/laneway/internal/testenv"
	"github.com/laneway/laneway/topics"
)

func backends(t *testing.T) []testenv.Backend {
	out := []testenv.Backend{testenv.Kfake(t)}
	if b, ok := testenv.RealKafka(); ok {
		out = append(out, b)
	}
	return out
}

func newStore(t *testing.T, b testenv.Backend, topic string) *endpoint.Store {
	t.Helper()
	s, err := endpoint.NewStore(endpoint.StoreConfig{Brokers: b.Brokers, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

func TestStoreFollowsTheConfigTopic(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.Name, func(t *testing.T) {
			ns := testenv.Unique("store")
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tc := topics.Config{Events: ns + ".ev", Deliveries: ns + ".de", Parked: ns + ".pa", Dead: ns + ".dl", Endpoints: ns + ".ep"}
			if err := topics.Ensure(ctx, kadm.NewClient(cl), tc); err != nil {
				t.Fatal(err)
			}

			writer := newStore(t, b, tc.Endpoints)
			follower := newStore(t, b, tc.Endpoints)
			ep := endpoint.Endpoint{ID: "ep_1", Tenant: "acme", URL: "https://example.com", MaxConcurrency: 4, Status: endpoint.StatusActive,
				EventTypes: []string{"order.updated"}}
			if err := writer.Put(ctx, ep); err != nil {
				t.Fatal(err)
			}
			if got, ok := writer.Get("ep_1"); !ok || got.URL != ep.URL {
				t.Fatalf("writer does not read its own write: %+v %v", got, ok)
			}
			if ids := writer.Subscribers(nil, "acme", "order.updated"); len(ids) != 1 || ids[0] != "ep_1" {
				t.Errorf("subscribers = %v", ids)
			}
			if ids := writer.Subscribers(nil, "acme", "payment.approved"); len(ids) != 0 {
				t.Errorf("unsubscribed type matched: %v", ids)
			}
			waitFor(t, follower, func(s *endpoint.Store) bool { _, ok := s.Get("ep_1"); return ok })

			// A store started later loads the state from the topic.
			late := newStore(t, b, tc.Endpoints)
			if _, ok := late.Get("ep_1"); !ok {
				t.Error("a new store did not load the existing endpoint")
			}
			if err := writer.Delete(ctx, "ep_1"); err != nil {
				t.Fatal(err)
			}
			if _, ok := writer.Get("ep_1"); ok {
				t.Error("deleted endpoint still visible to the writer")
			}
			if err := writer.Delete(ctx, "ep_1"); err != endpoint.ErrNotFound {
				t.Errorf("second delete: %v, want ErrNotFound", err)
			}
			waitFor(t, follower, func(s *endpoint.Store) bool { _, ok := s.Get("ep_1"); return !ok })
		})
	}
}

func waitFor(t *testing.T, s *endpoint.Store, cond func(*endpoint.Store) bool) {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		changed := s.Changed()
		if cond(s) {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatal("condition not reached")
		}
	}
}
