package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/deadtopic"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestGoneDisablesTheStatusOnly answers 410 for an endpoint: the stage
// disables it through EndpointSource.Disable (status only, on the latest
// version), never writes the endpoint back whole, tells the notifier, and
// ends the endpoint's later deliveries as endpoint_disabled dead letters
// while other endpoints carry on. With the fake source the stage must call
// Disable(ctx, id, reason, at) once and never Put; with the real
// endpoint.Store an operator's rotation made while the 410 attempt was in
// flight must survive the disable.
func TestGoneDisablesTheStatusOnly(t *testing.T) {
	t.Run("fake_source", func(t *testing.T) {
		r := kfakeStageRig(t, 1)
		rc := goneReceiver(t, nil)
		eps := newFakeEndpoints(testEndpoint("ep-gone", rc.URL("/gone")), testEndpoint("ep-ok", rc.URL("/ok")))
		n := &fakeNotifier{}
		s := r.startStage(stageOpts{endpoints: eps, tweak: func(c *DeliveryConfig) { c.Notifier = n }})
		s.waitOwned(t, 0)
		before := time.Now()
		r.produce(0, testDelivery("evt-1", "ep-gone", "order:1", 1))
		waitCond(t, 30*time.Second, "the stage to disable ep-gone", func() (bool, string) {
			calls, _ := eps.calls()
			return len(calls) == 1, fmt.Sprintf("%d Disable calls", len(calls))
		})
		calls, _ := eps.calls()
		c := calls[0]
		if c.id != "ep-gone" || !strings.Contains(c.reason, "410") || c.at.Before(before.Add(-time.Second)) || c.at.After(time.Now()) || !c.changed || c.err != nil {
			t.Fatalf("Disable call %+v, want ep-gone, a reason naming the 410, a time within the test", c)
		}

		r.produce(0, testDelivery("evt-2", "ep-gone", "order:2", 1), testDelivery("evt-3", "ep-ok", "order:3", 1))
		letters := r.waitDeadLetters(30*time.Second, "the 410's and the disabled endpoint's dead letters", hasLetters(
			"evt-1:ep-gone", event.ReasonGone, "evt-2:ep-gone", event.ReasonEndpointDisabled))
		waitCond(t, 30*time.Second, "ep-ok's delivery", func() (bool, string) {
			return rc.answered("evt-3", http.StatusOK) == 1, fmt.Sprintf("%+v", rc.requests())
		})
		calls, puts := eps.calls()
		if len(puts) != 0 {
			t.Fatalf("the stage wrote whole endpoints back (Put): %+v", puts)
		}
		if len(calls) != 1 {
			t.Fatalf("%d Disable calls, want 1: %+v", len(calls), calls)
		}
		if got := rc.count("/gone"); got != 1 {
			t.Fatalf("ep-gone got %d requests, want 1 (the disabled endpoint's later delivery must not be attempted)", got)
		}
		if got := n.disabled(); len(got) != 1 || got[0].ID != "ep-gone" || got[0].Status != endpoint.StatusDisabled {
			t.Fatalf("notifier told %+v, want ep-gone disabled once", got)
		}
		if len(letters) != 2 {
			t.Fatalf("dead letters %s, want the two of ep-gone only", deadtopic.Describe(letters))
		}
	})

	t.Run("store", func(t *testing.T) {
		stageBackends(t, 1, func(t *testing.T, r *stageRig) {
			proceed := make(chan struct{})
			rc := goneReceiver(t, proceed)
			api, src := r.endpointStores(t)
			ctx := context.Background()
			gone, ok := testEndpoint("ep-gone", rc.URL("/gone")), testEndpoint("ep-ok", rc.URL("/ok"))
			for _, e := range []endpoint.Endpoint{gone, ok} {
				if err := api.Put(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			src.waitFor(t, func(s *endpoint.Store) bool { _, a := s.Get("ep-gone"); _, b := s.Get("ep-ok"); return a && b })
			n := &fakeNotifier{}
			s := r.startStage(stageOpts{endpoints: src, tweak: func(c *DeliveryConfig) { c.Notifier = n }})
			s.waitOwned(t, 0)
			r.produce(0, testDelivery("evt-1", "ep-gone", "order:1", 1))
			rc.next(t, 30*time.Second, "the attempt that will get 410")

			// While the attempt is out, the operator rotates the secret and
			// raises the concurrency through another instance's store.
			rotated := endpoint.NewSecret()
			if _, _, err := api.Update(ctx, "ep-gone", func(e endpoint.Endpoint) (endpoint.Endpoint, bool, error) {
				e.Secrets = append([]endpoint.Secret{{Value: rotated}}, e.Secrets...)
				e.MaxConcurrency = 7
				return e, true, nil
			}); err != nil {
				t.Fatal(err)
			}
			close(proceed)
			waitCond(t, 30*time.Second, "the stage's Disable to return", func() (bool, string) {
				calls := src.calls()
				return len(calls) == 1, fmt.Sprintf("%+v", calls)
			})
			if c := src.calls()[0]; !c.changed || c.err != nil || !strings.Contains(c.reason, "410") {
				t.Fatalf("Disable call %+v, want a change for the 410", c)
			}
			api.waitFor(t, func(s *endpoint.Store) bool {
				e, _ := s.Get("ep-gone")
				return e.Status == endpoint.StatusDisabled
			})
			got, _ := api.Get("ep-gone")
			if got.MaxConcurrency != 7 || len(got.Secrets) != 2 || got.Secrets[0].Value != rotated ||
				got.URL != gone.URL || got.Tenant != gone.Tenant || !got.CreatedAt.Equal(gone.CreatedAt) || !strings.Contains(got.DisabledReason, "410") {
				t.Fatalf("ep-gone after the disable: %+v; want the operator's rotation and concurrency kept, only the status changed", got)
			}
			// No record after the operator's lost the rotation: the stage
			// never wrote back the version it had read before.
			recs := r.endpointRecords(t, "ep-gone")
			rotatedAt := slices.IndexFunc(recs, func(e *endpoint.Endpoint) bool { return e != nil && e.MaxConcurrency == 7 })
			if rotatedAt < 0 {
				t.Fatalf("the operator's update is not in the topic")
			}
			for i, e := range recs[rotatedAt:] {
				if e == nil || e.MaxConcurrency != 7 || e.Secrets[0].Value != rotated {
					t.Fatalf("record %d of ep-gone after the rotation, %+v, undoes it", rotatedAt+i, e)
				}
			}
			if last := recs[len(recs)-1]; last.Status != endpoint.StatusDisabled {
				t.Fatalf("the last record of ep-gone is %+v, want it disabled", last)
			}

			r.produce(0, testDelivery("evt-2", "ep-gone", "order:2", 1), testDelivery("evt-3", "ep-ok", "order:3", 1))
			r.waitDeadLetters(30*time.Second, "the 410's and the disabled endpoint's dead letters", hasLetters(
				"evt-1:ep-gone", event.ReasonGone, "evt-2:ep-gone", event.ReasonEndpointDisabled))
			waitCond(t, 30*time.Second, "ep-ok's delivery", func() (bool, string) {
				return rc.answered("evt-3", http.StatusOK) == 1, fmt.Sprintf("%+v", rc.requests())
			})
			if got := n.disabled(); len(got) != 1 || got[0].ID != "ep-gone" {
				t.Fatalf("notifier told %+v, want ep-gone once", got)
			}
		})
	})
}

// TestGoneForADeletedEndpointDoesNotResurrectIt deletes the endpoint while
// its attempt is out and answers 410: Disable finds it deleted
// (endpoint.ErrNotFound), the stage logs that and goes on (no retry loop,
// no notification), nothing writes the endpoint back, and its later
// deliveries end as endpoint_deleted dead letters while other endpoints
// carry on.
func TestGoneForADeletedEndpointDoesNotResurrectIt(t *testing.T) {
	t.Run("fake_source", func(t *testing.T) {
		r := kfakeStageRig(t, 1)
		rc := goneReceiver(t, nil)
		eps := newFakeEndpoints(testEndpoint("ep-gone", rc.URL("/gone")), testEndpoint("ep-ok", rc.URL("/ok")))
		// The operator's delete lands between the 410 and the disable.
		eps.beforeDisable = func(id string) { eps.delete(id) }
		n := &fakeNotifier{}
		var clockReads atomic.Int64 // the wake loop reads the clock on every tick
		s := r.startStage(stageOpts{endpoints: eps, tweak: func(c *DeliveryConfig) {
			c.Notifier = n
			c.Now = func() time.Time { clockReads.Add(1); return time.Now() }
		}})
		s.waitOwned(t, 0)
		r.produce(0, testDelivery("evt-1", "ep-gone", "order:1", 1))
		waitCond(t, 30*time.Second, "the stage's Disable", func() (bool, string) {
			calls, _ := eps.calls()
			return len(calls) == 1, fmt.Sprintf("%+v", calls)
		})
		if calls, _ := eps.calls(); !errors.Is(calls[0].err, endpoint.ErrNotFound) {
			t.Fatalf("Disable call %+v, want ErrNotFound", calls[0])
		}
		r.produce(0, testDelivery("evt-2", "ep-gone", "order:2", 1), testDelivery("evt-3", "ep-ok", "order:3", 1))
		r.waitDeadLetters(30*time.Second, "the 410's and the deleted endpoint's dead letters", hasLetters(
			"evt-1:ep-gone", event.ReasonGone, "evt-2:ep-gone", event.ReasonEndpointDeleted))
		waitCond(t, 30*time.Second, "ep-ok's delivery", func() (bool, string) {
			return rc.answered("evt-3", http.StatusOK) == 1, fmt.Sprintf("%+v", rc.requests())
		})
		// A failed disable is retried by the wake loop: let it run a while.
		from := clockReads.Load()
		waitCond(t, 30*time.Second, "the wake loop to run on", func() (bool, string) {
			return clockReads.Load() >= from+50, ""
		})
		calls, puts := eps.calls()
		if len(puts) != 0 {
			t.Fatalf("the stage wrote a deleted endpoint back (Put): %+v", puts)
		}
		if len(calls) != 1 {
			t.Fatalf("%d Disable calls, want 1 (a deleted endpoint is not retried): %+v", len(calls), calls)
		}
		if _, ok := eps.Get("ep-gone"); ok {
			t.Fatal("the deleted endpoint exists again")
		}
		if got := n.disabled(); len(got) != 0 {
			t.Fatalf("notifier told %+v about a deleted endpoint", got)
		}
		if got := rc.count("/gone"); got != 1 {
			t.Fatalf("ep-gone got %d requests, want 1", got)
		}
	})

	t.Run("store", func(t *testing.T) {
		stageBackends(t, 1, func(t *testing.T, r *stageRig) {
			proceed := make(chan struct{})
			rc := goneReceiver(t, proceed)
			api, src := r.endpointStores(t)
			ctx := context.Background()
			for _, e := range []endpoint.Endpoint{testEndpoint("ep-gone", rc.URL("/gone")), testEndpoint("ep-ok", rc.URL("/ok"))} {
				if err := api.Put(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			src.waitFor(t, func(s *endpoint.Store) bool { _, a := s.Get("ep-gone"); _, b := s.Get("ep-ok"); return a && b })
			n := &fakeNotifier{}
			s := r.startStage(stageOpts{endpoints: src, tweak: func(c *DeliveryConfig) { c.Notifier = n }})
			s.waitOwned(t, 0)
			r.produce(0, testDelivery("evt-1", "ep-gone", "order:1", 1))
			rc.next(t, 30*time.Second, "the attempt that will get 410")
			if err := api.Delete(ctx, "ep-gone"); err != nil {
				t.Fatal(err)
			}
			close(proceed)
			waitCond(t, 30*time.Second, "the stage's Disable to return", func() (bool, string) {
				calls := src.calls()
				return len(calls) == 1, fmt.Sprintf("%+v", calls)
			})
			if c := src.calls()[0]; !errors.Is(c.err, endpoint.ErrNotFound) {
				t.Fatalf("Disable call %+v, want ErrNotFound", c)
			}
			r.produce(0, testDelivery("evt-2", "ep-gone", "order:2", 1), testDelivery("evt-3", "ep-ok", "order:3", 1))
			r.waitDeadLetters(30*time.Second, "the 410's and the deleted endpoint's dead letters", hasLetters(
				"evt-1:ep-gone", event.ReasonGone, "evt-2:ep-gone", event.ReasonEndpointDeleted))
			waitCond(t, 30*time.Second, "ep-ok's delivery", func() (bool, string) {
				return rc.answered("evt-3", http.StatusOK) == 1, fmt.Sprintf("%+v", rc.requests())
			})
			recs := r.endpointRecords(t, "ep-gone")
			if last := recs[len(recs)-1]; last != nil {
				t.Fatalf("the last record of ep-gone is %+v: the deleted endpoint was written back", last)
			}
			if len(recs) != 2 {
				t.Fatalf("ep-gone has %d records, want its Put and its tombstone only", len(recs))
			}
			for _, st := range []*recordingStore{api, src} {
				if _, ok := st.Get("ep-gone"); ok {
					t.Fatal("a store shows the deleted endpoint again")
				}
			}
			if got := n.disabled(); len(got) != 0 {
				t.Fatalf("notifier told %+v about a deleted endpoint", got)
			}
			if len(src.calls()) != 1 {
				t.Fatalf("Disable retried for a deleted endpoint: %+v", src.calls())
			}
		})
	})
}

// TestFailedDisableDoesNotMisclassifyLaterFailures answers 410 to one
// delivery while the endpoint store cannot write (issue #13, item 15): the
// disable fails, and is tried again until it lands. Meanwhile the endpoint
// is still active, so the lane's later deliveries are attempted and their
// failures end as what they are (max_attempts after 5 answers of 503),
// never as endpoint_disabled. Once the store writes again the disable
// lands (once, with the 410's reason), and only then do the endpoint's
// deliveries die as endpoint_disabled, without a request.
func TestFailedDisableDoesNotMisclassifyLaterFailures(t *testing.T) {
	stageBackends(t, 1, func(t *testing.T, r *stageRig) {
		rc := newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
			if req.Header.Get("webhook-id") == "evt-gone" {
				w.WriteHeader(http.StatusGone)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		})
		eps := newFakeEndpoints(testEndpoint("ep-1", rc.URL("/ep-1")))
		var storeDown atomic.Bool
		storeDown.Store(true)
		eps.disableFails = func() error {
			if storeDown.Load() {
				return errors.New("endpoint store unavailable")
			}
			return nil
		}
		failedDisables := func() int {
			calls, _ := eps.calls()
			n := 0
			for _, c := range calls {
				if c.err != nil {
					n++
				}
			}
			return n
		}
		s := r.startStage(stageOpts{endpoints: eps})
		s.waitOwned(t, 0)
		r.produce(0, testDelivery("evt-gone", "ep-1", "order:gone", 1))
		waitCond(t, 30*time.Second, "the 410's disable to fail", func() (bool, string) {
			return failedDisables() >= 1, fmt.Sprintf("%d failed Disable calls", failedDisables())
		})

		r.produce(0, testDelivery("evt-2", "ep-1", "order:2", 1), testDelivery("evt-3", "ep-1", "order:3", 1))
		letters := r.waitDeadLetters(30*time.Second, "the 410's and the later failures' dead letters", hasLetters(
			"evt-gone:ep-1", event.ReasonGone, "evt-2:ep-1", event.ReasonMaxAttempts, "evt-3:ep-1", event.ReasonMaxAttempts))
		for _, l := range letters {
			if l.Reason == event.ReasonEndpointDisabled {
				t.Fatalf("dead letter %s is endpoint_disabled while the endpoint is active: %s", l.ID, deadtopic.Describe(letters))
			}
		}
		for _, id := range []string{"evt-2", "evt-3"} {
			if got := rc.answered(id, http.StatusServiceUnavailable); got != 5 {
				t.Fatalf("%s was attempted %d times, want the retry policy's 5", id, got)
			}
		}
		if e, _ := eps.Get("ep-1"); e.Status != endpoint.StatusActive {
			t.Fatalf("ep-1 is %s with every Disable failed", e.Status)
		}

		waitCond(t, 30*time.Second, "the failed disable to be tried again", func() (bool, string) {
			return failedDisables() >= 2, fmt.Sprintf("%d failed Disable calls", failedDisables())
		})
		storeDown.Store(false)
		waitCond(t, 30*time.Second, "the disable to land", func() (bool, string) {
			e, _ := eps.Get("ep-1")
			return e.Status == endpoint.StatusDisabled, string(e.Status)
		})
		calls, puts := eps.calls()
		if len(puts) != 0 {
			t.Fatalf("the stage wrote whole endpoints back (Put): %+v", puts)
		}
		landed := 0
		for _, c := range calls {
			if c.id != "ep-1" || !strings.Contains(c.reason, "410") {
				t.Fatalf("Disable call %+v, want ep-1 with the 410's reason", c)
			}
			if c.err == nil {
				landed++
			}
		}
		if landed != 1 {
			t.Fatalf("%d Disable calls landed, want 1: %+v", landed, calls)
		}

		r.produce(0, testDelivery("evt-4", "ep-1", "order:4", 1))
		r.waitDeadLetters(30*time.Second, "the disabled endpoint's dead letter", hasLetters("evt-4:ep-1", event.ReasonEndpointDisabled))
		if got := rc.answered("evt-4", http.StatusServiceUnavailable); got != 0 {
			t.Fatalf("evt-4 was attempted %d times after the endpoint was disabled", got)
		}
	})
}

// goneReceiver answers 410 on /gone (the first request once proceed is
// closed, when it is not nil) and 200 elsewhere.
func goneReceiver(t *testing.T, proceed chan struct{}) *receiver {
	return newReceiver(t, func(w http.ResponseWriter, req *http.Request, _ int) {
		if req.URL.Path != "/gone" {
			w.WriteHeader(http.StatusOK)
			return
		}
		if proceed != nil {
			select {
			case <-proceed:
			case <-req.Context().Done():
				return
			}
		}
		w.WriteHeader(http.StatusGone)
	})
}

func (rc *receiver) count(path string) int {
	n := 0
	for _, rq := range rc.requests() {
		if rq.Path == path {
			n++
		}
	}
	return n
}

// hasLetters is a condition on dead letters: each id (event:endpoint) is
// there with its reason (pairs of id, reason).
func hasLetters(pairs ...string) func([]event.DeadLetter) bool {
	return func(ls []event.DeadLetter) bool {
		for i := 0; i+1 < len(pairs); i += 2 {
			if !slices.ContainsFunc(ls, func(l event.DeadLetter) bool { return l.ID == pairs[i] && l.Reason == pairs[i+1] }) {
				return false
			}
		}
		return true
	}
}

type fakeNotifier struct {
	mu  sync.Mutex
	got []endpoint.Endpoint
}

func (n *fakeNotifier) EndpointDisabled(ep endpoint.Endpoint, _ string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, ep)
}

func (n *fakeNotifier) disabled() []endpoint.Endpoint {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

// recordingStore is the real endpoint.Store, recording what its Disable
// returned (the stage sees it only as an EndpointSource).
type recordingStore struct {
	*endpoint.Store
	mu       sync.Mutex
	disables []disableCall
}

func (s *recordingStore) Disable(ctx context.Context, id, reason string, at time.Time) (endpoint.Endpoint, bool, error) {
	ep, changed, err := s.Store.Disable(ctx, id, reason, at)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disables = append(s.disables, disableCall{id: id, reason: reason, at: at, err: err, changed: changed})
	return ep, changed, err
}

func (s *recordingStore) calls() []disableCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.disables)
}

// waitFor waits until cond holds for the store's view.
func (s *recordingStore) waitFor(t *testing.T, cond func(*endpoint.Store) bool) {
	t.Helper()
	waitCond(t, 30*time.Second, "the endpoint store to catch up", func() (bool, string) {
		return cond(s.Store), fmt.Sprintf("%+v", s.List())
	})
}

// endpointStores starts two stores on the rig's endpoints topic: the
// operator's (as the API of another instance) and the stage's.
func (r *stageRig) endpointStores(t *testing.T) (api, stage *recordingStore) {
	t.Helper()
	start := func() *recordingStore {
		st, err := endpoint.NewStore(endpoint.StoreConfig{Brokers: r.brokers, Topic: r.tops.Endpoints, Logger: testenv.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := st.Start(ctx); err != nil {
			t.Fatal(err)
		}
		testenv.StopOnCleanup(t, st.Stop)
		return &recordingStore{Store: st}
	}
	return start(), start()
}

// endpointRecords reads the endpoints topic and returns the values of id's
// records in order (nil for a tombstone).
func (r *stageRig) endpointRecords(t *testing.T, id string) []*endpoint.Endpoint {
	t.Helper()
	var out []*endpoint.Endpoint
	for _, rec := range r.readAll(r.tops.Endpoints) {
		if string(rec.Key) != id {
			continue
		}
		if rec.Value == nil {
			out = append(out, nil)
			continue
		}
		var e endpoint.Endpoint
		if err := json.Unmarshal(rec.Value, &e); err != nil {
			t.Fatalf("endpoint record at %d: %v", rec.Offset, err)
		}
		out = append(out, &e)
	}
	return out
}
