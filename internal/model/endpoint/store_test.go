package endpoint_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

func newStore(t *testing.T, b testenv.Backend, topic string) *endpoint.Store {
	t.Helper()
	return sealedStore(t, b, topic, nil)
}

func TestStoreFollowsTheConfigTopic(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
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

// configTopic creates a fresh endpoints topic on b and returns its name.
func configTopic(t *testing.T, b testenv.Backend) string {
	t.Helper()
	ns := testenv.Unique("disable")
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
	return tc.Endpoints
}

// engineAndAPI returns the stores of two instances (the engine's and the
// API's) on a fresh topic, once the API has written testEndpoint and the
// engine has read it.
func engineAndAPI(t *testing.T, b testenv.Backend) (topic string, engine, api *endpoint.Store) {
	t.Helper()
	topic = configTopic(t, b)
	engine, api = newStore(t, b, topic), newStore(t, b, topic)
	if err := api.Put(context.Background(), testEndpoint()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, engine, func(s *endpoint.Store) bool { _, ok := s.Get("ep_1"); return ok })
	return topic, engine, api
}

// records returns how many records the topic has had (its end offset).
func records(t *testing.T, b testenv.Backend, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

var disabledAt = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func testEndpoint() endpoint.Endpoint {
	return endpoint.Endpoint{ID: "ep_1", Tenant: "acme", URL: "https://example.com/hook", MaxConcurrency: 4,
		Status: endpoint.StatusActive, Secrets: []endpoint.Secret{{Value: endpoint.NewSecret()}},
		CreatedAt: disabledAt.Add(-time.Hour), UpdatedAt: disabledAt.Add(-time.Hour)}
}

// rotate returns e with a new secret first and the old ones expiring, and a
// new URL: the edits a Disable must keep.
func rotate(e endpoint.Endpoint) endpoint.Endpoint {
	old := slices.Clone(e.Secrets)
	for i := range old {
		old[i].ExpiresAt = disabledAt.Add(24 * time.Hour)
	}
	e.Secrets = append([]endpoint.Secret{{Value: endpoint.NewSecret()}}, old...)
	e.URL = "https://example.com/rotated"
	e.UpdatedAt = disabledAt.Add(-time.Minute)
	return e
}

// wantDisabled checks that got is edited disabled for reason: every field
// but the three Disable sets is edited's.
func wantDisabled(t *testing.T, got, edited endpoint.Endpoint, reason string) {
	t.Helper()
	want := edited
	want.Status, want.DisabledReason, want.UpdatedAt = endpoint.StatusDisabled, reason, disabledAt
	if !equal(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func equal(a, b endpoint.Endpoint) bool {
	return a.ID == b.ID && a.Tenant == b.Tenant && a.URL == b.URL && slices.Equal(a.EventTypes, b.EventTypes) &&
		a.MaxConcurrency == b.MaxConcurrency && slices.EqualFunc(a.Secrets, b.Secrets, func(x, y endpoint.Secret) bool {
		return x.Value == y.Value && x.ExpiresAt.Equal(y.ExpiresAt)
	}) && a.Status == b.Status && a.DisabledReason == b.DisabledReason && a.Paused == b.Paused &&
		a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}

// everywhere checks that every store, and one started now, holds want for
// ep_1 (or nothing, when want is nil).
func everywhere(t *testing.T, b testenv.Backend, topic string, want *endpoint.Endpoint, stores ...*endpoint.Store) {
	t.Helper()
	stores = append(stores, newStore(t, b, topic))
	for i, s := range stores {
		waitFor(t, s, func(s *endpoint.Store) bool {
			got, ok := s.Get("ep_1")
			if want == nil {
				return !ok
			}
			return ok && got.Status == want.Status && got.URL == want.URL && got.DisabledReason == want.DisabledReason
		})
		got, ok := s.Get("ep_1")
		if want == nil {
			continue
		}
		if !ok || !equal(got, *want) {
			t.Fatalf("store %d holds %+v (%v), want %+v", i, got, ok, *want)
		}
	}
}

// The engine read the endpoint before its attempt; an operator rotated the
// secret and changed the URL through another instance since. Disable keeps
// both.
func TestDisableKeepsChangesMadeAfterTheRead(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			topic, engine, api := engineAndAPI(t, b)
			read, _ := engine.Get("ep_1")
			edited := rotate(read)
			if err := api.Put(ctx, edited); err != nil {
				t.Fatal(err)
			}
			// engine may not have read the rotation yet: Disable catches up.
			got, changed, err := engine.Disable(ctx, "ep_1", "endpoint answered 410 Gone", disabledAt)
			if err != nil || !changed {
				t.Fatalf("Disable = %v, %v", changed, err)
			}
			wantDisabled(t, got, edited, "endpoint answered 410 Gone")
			everywhere(t, b, topic, &got, engine, api)
		})
	}
}

// Another writer's change lands between Disable's read and its write (the
// case a catch-up cannot prevent): Disable's record overwrites it, then
// Disable writes again on top of that change.
func TestDisableRepairsAChangeRacingItsWrite(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			topic, engine, api := engineAndAPI(t, b)
			read, _ := api.Get("ep_1")
			edited := rotate(read)
			writes := 0
			endpoint.SetBeforeWrite(engine, func() {
				if writes++; writes == 1 {
					if err := api.Put(ctx, edited); err != nil {
						t.Error(err)
					}
				}
			})
			got, changed, err := engine.Disable(ctx, "ep_1", "failing for 5 days", disabledAt)
			if err != nil || !changed {
				t.Fatalf("Disable = %v, %v", changed, err)
			}
			if writes != 2 {
				t.Fatalf("Disable wrote %d times, want 2 (the stale write and its repair)", writes)
			}
			wantDisabled(t, got, edited, "failing for 5 days")
			everywhere(t, b, topic, &got, engine, api)
		})
	}
}

// An operator disabled the endpoint (with another reason and a new URL)
// between Disable's read and write: Disable puts the operator's value back
// and reports that it changed nothing.
func TestDisableRestoresARacingDisable(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			topic, engine, api := engineAndAPI(t, b)
			read, _ := api.Get("ep_1")
			operator := rotate(read)
			operator.Status, operator.DisabledReason = endpoint.StatusDisabled, "by the operator"
			once := sync.OnceFunc(func() {
				if err := api.Put(ctx, operator); err != nil {
					t.Error(err)
				}
			})
			endpoint.SetBeforeWrite(engine, once)
			got, changed, err := engine.Disable(ctx, "ep_1", "endpoint answered 410 Gone", disabledAt)
			if err != nil || changed {
				t.Fatalf("Disable = %v, %v; want unchanged", changed, err)
			}
			if !equal(got, operator) {
				t.Fatalf("got %+v, want the operator's %+v", got, operator)
			}
			everywhere(t, b, topic, &operator, engine, api)
		})
	}
}

// A deleted endpoint stays deleted: whether the delete came before Disable
// (nothing is written) or between its read and its write (its record is
// followed by a tombstone), and an unknown id is not created.
func TestDisableDoesNotResurrectADeletedEndpoint(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			t.Run("deleted before", func(t *testing.T) {
				topic, engine, api := engineAndAPI(t, b)
				if err := api.Delete(ctx, "ep_1"); err != nil {
					t.Fatal(err)
				}
				n := records(t, b, topic)
				if _, _, err := engine.Disable(ctx, "ep_1", "gone", disabledAt); !errors.Is(err, endpoint.ErrNotFound) {
					t.Fatalf("Disable of a deleted endpoint: %v, want ErrNotFound", err)
				}
				if _, _, err := engine.Disable(ctx, "ep_unknown", "gone", disabledAt); !errors.Is(err, endpoint.ErrNotFound) {
					t.Fatalf("Disable of an unknown endpoint: %v, want ErrNotFound", err)
				}
				if m := records(t, b, topic); m != n {
					t.Fatalf("Disable wrote %d records for a deleted and an unknown endpoint", m-n)
				}
				everywhere(t, b, topic, nil, engine, api)
			})
			t.Run("deleted during", func(t *testing.T) {
				topic, engine, api := engineAndAPI(t, b)
				endpoint.SetBeforeWrite(engine, sync.OnceFunc(func() {
					if err := api.Delete(ctx, "ep_1"); err != nil {
						t.Error(err)
					}
				}))
				if _, _, err := engine.Disable(ctx, "ep_1", "gone", disabledAt); !errors.Is(err, endpoint.ErrNotFound) {
					t.Fatalf("Disable racing a delete: %v, want ErrNotFound", err)
				}
				if _, ok := engine.Get("ep_1"); ok {
					t.Fatal("the endpoint is back after Disable returned")
				}
				everywhere(t, b, topic, nil, engine, api)
			})
		})
	}
}

// Disabling a disabled endpoint writes nothing and keeps the first reason.
func TestDisableTwiceWritesOnce(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			topic := configTopic(t, b)
			s := newStore(t, b, topic)
			if err := s.Put(ctx, testEndpoint()); err != nil {
				t.Fatal(err)
			}
			first, changed, err := s.Disable(ctx, "ep_1", "endpoint answered 410 Gone", disabledAt)
			if err != nil || !changed {
				t.Fatalf("first Disable = %v, %v", changed, err)
			}
			n := records(t, b, topic)
			second, changed, err := s.Disable(ctx, "ep_1", "failing for 5 days", disabledAt.Add(time.Hour))
			if err != nil || changed {
				t.Fatalf("second Disable = %v, %v; want unchanged", changed, err)
			}
			if !equal(second, first) {
				t.Fatalf("second Disable returned %+v, want the first's %+v", second, first)
			}
			if m := records(t, b, topic); m != n {
				t.Fatalf("second Disable wrote %d records", m-n)
			}
		})
	}
}

// Two instances disable the same endpoint at once: exactly one of them
// disables it, its reason stays, and the endpoint's other fields are kept.
func TestConcurrentDisables(t *testing.T) {
	t.Parallel()
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx := context.Background()
			topic := configTopic(t, b)
			stores := []*endpoint.Store{newStore(t, b, topic), newStore(t, b, topic)}
			ep := testEndpoint()
			if err := stores[0].Put(ctx, ep); err != nil {
				t.Fatal(err)
			}
			reasons := []string{"endpoint answered 410 Gone", "failing for 5 days"}
			type result struct {
				e       endpoint.Endpoint
				changed bool
				err     error
			}
			results := make([]result, len(stores))
			var wg sync.WaitGroup
			for i, s := range stores {
				wg.Go(func() {
					e, changed, err := s.Disable(ctx, "ep_1", reasons[i], disabledAt)
					results[i] = result{e, changed, err}
				})
			}
			wg.Wait()
			winner := -1
			for i, r := range results {
				if r.err != nil {
					t.Fatalf("store %d: %v", i, r.err)
				}
				if r.changed {
					if winner >= 0 {
						t.Fatal("both stores report that they disabled the endpoint")
					}
					winner = i
				}
			}
			if winner < 0 {
				t.Fatal("neither store disabled the endpoint")
			}
			want := results[winner].e
			wantDisabled(t, want, ep, reasons[winner])
			for i, r := range results {
				if !equal(r.e, want) {
					t.Errorf("store %d returned %+v, want %+v", i, r.e, want)
				}
			}
			everywhere(t, b, topic, &want, stores...)
		})
	}
}
