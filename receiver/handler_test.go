package receiver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/receiver"
	"github.com/laneway/laneway/signing"
)

func newHandler(t *testing.T, cfg receiver.Config, app receiver.HandlerFunc) *receiver.Handler {
	t.Helper()
	h, err := receiver.NewHandler(cfg, app)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHandlerAnswers(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	signed := func(body []byte) *http.Request {
		return request(signedHeaders(t, "evt_1", c.Now(), body, secret), body)
	}
	big := bytes.Repeat([]byte("x"), 2048)
	tests := []struct {
		name    string
		req     *http.Request
		appErr  error
		status  int
		appCall bool
	}{
		{"valid", signedRequest(t, secret, "evt_1", "order:1", 1, c.Now()), nil, 200, true},
		{"application fails", signedRequest(t, secret, "evt_1", "order:1", 1, c.Now()), errors.New("db down"), 500, true},
		{"unsigned", request(nil, payload(t, "evt_1", "order:1", 1)), nil, 401, false},
		{"wrong secret", signedRequest(t, testSecret(2), "evt_1", "order:1", 1, c.Now()), nil, 401, false},
		{"6 minutes old", signedRequest(t, secret, "evt_1", "order:1", 1, c.Now().Add(-6*time.Minute)), nil, 401, false},
		{"6 minutes ahead", signedRequest(t, secret, "evt_1", "order:1", 1, c.Now().Add(6*time.Minute)), nil, 401, false},
		{"signed but not JSON", signed([]byte("hello")), nil, 400, false},
		{"signed but no entity", signed([]byte(`{"id":"evt_1","type":"t"}`)), nil, 400, false},
		{"over the cap", signed(big), nil, 413, false},
		{"GET", httptest.NewRequest(http.MethodGet, "/webhooks", nil), nil, 405, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := &recorder{fail: func(receiver.Delivery) error { return tt.appErr }}
			h := newHandler(t, receiver.Config{Secrets: []string{secret}, Now: c.Now, MaxBodyBytes: 1024}, app.handle)
			w := serve(h, tt.req)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d (%s)", w.Code, tt.status, w.Body)
			}
			if called := app.callCount() > 0; called != tt.appCall {
				t.Fatalf("application called: %v, want %v", called, tt.appCall)
			}
		})
	}
}

func TestHandlerPassesTheDelivery(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	app := &recorder{}
	h := newHandler(t, receiver.Config{Secrets: []string{secret}, Now: c.Now}, app.handle)
	if w := serve(h, signedRequest(t, secret, "evt_7", "order:9", 3, c.Now())); w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	want, _ := receiver.Parse(payload(t, "evt_7", "order:9", 3))
	if len(app.got) != 1 || app.got[0].ID != want.ID || app.got[0].Entity != want.Entity ||
		!bytes.Equal(app.got[0].Data, want.Data) || !app.got[0].Timestamp.Equal(want.Timestamp) {
		t.Fatalf("application got %+v, want %+v", app.got, want)
	}
}

func TestHandlerDropsDuplicatesOnlyAfterSuccess(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	failures := 2
	app := &recorder{fail: func(receiver.Delivery) error {
		if failures > 0 {
			failures--
			return errors.New("not yet")
		}
		return nil
	}}
	h := newHandler(t, receiver.Config{Secrets: []string{secret}, Now: c.Now}, app.handle)
	attempt := func() int {
		c.Advance(30 * time.Second) // each retry is signed afresh, as Laneway does
		return serve(h, signedRequest(t, secret, "evt_1", "order:1", 1, c.Now())).Code
	}
	for i, want := range []int{500, 500, 200, 200, 200} {
		if got := attempt(); got != want {
			t.Fatalf("attempt %d: status %d, want %d", i+1, got, want)
		}
	}
	// Two failures and one success reached the application; the two
	// redeliveries after the success did not.
	if n := app.callCount(); n != 3 {
		t.Fatalf("application called %d times, want 3", n)
	}
	if ids := app.ids(); !slices.Equal(ids, []string{"evt_1"}) {
		t.Fatalf("handled %v, want evt_1 once", ids)
	}
}

func TestHandlerDedupForgetsAfterTTL(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	app := &recorder{}
	h := newHandler(t, receiver.Config{Secrets: []string{secret}, Now: c.Now, DedupTTL: time.Hour}, app.handle)
	serve(h, signedRequest(t, secret, "evt_1", "order:1", 0, c.Now()))
	c.Advance(59 * time.Minute)
	serve(h, signedRequest(t, secret, "evt_1", "order:1", 0, c.Now()))
	if n := app.callCount(); n != 1 {
		t.Fatalf("within the TTL: application called %d times, want 1", n)
	}
	c.Advance(time.Minute)
	serve(h, signedRequest(t, secret, "evt_1", "order:1", 0, c.Now()))
	if n := app.callCount(); n != 2 {
		t.Fatalf("after the TTL: application called %d times, want 2", n)
	}
}

func TestHandlerDropsStaleRevisions(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	app := &recorder{fail: func(d receiver.Delivery) error {
		if d.ID == "evt_fail" {
			return errors.New("refused")
		}
		return nil
	}}
	h := newHandler(t, receiver.Config{Secrets: []string{secret}, Now: c.Now}, app.handle)
	steps := []struct {
		id       string
		revision int64
		status   int
	}{
		{"evt_a", 5, 200},
		{"evt_b", 4, 200},    // stale: dropped
		{"evt_c", 5, 200},    // equal revision, new event: handled
		{"evt_fail", 9, 500}, // failed: must not advance the revision
		{"evt_d", 6, 200},    // so 6 is not stale
		{"evt_e", 5, 200},    // stale now
		{"evt_f", 0, 200},    // no revision: never stale
		{"evt_a", 5, 200},    // stale and a duplicate
	}
	for _, s := range steps {
		if w := serve(h, signedRequest(t, secret, s.id, "order:1", s.revision, c.Now())); w.Code != s.status {
			t.Fatalf("%s rev %d: status %d, want %d", s.id, s.revision, w.Code, s.status)
		}
	}
	if got, want := app.ids(), []string{"evt_a", "evt_c", "evt_d", "evt_f"}; !slices.Equal(got, want) {
		t.Fatalf("handled %v, want %v", got, want)
	}
	// Another entity is not held back by order:1's revisions.
	serve(h, signedRequest(t, secret, "evt_g", "order:2", 1, c.Now()))
	if got := app.ids(); got[len(got)-1] != "evt_g" {
		t.Fatalf("order:2 rev 1 was not handled: %v", got)
	}
}

// A second copy of a webhook-id that arrives while the first is being handled
// gets 409, so that Laneway retries it instead of it being lost if the first
// then fails.
func TestHandlerConcurrentCopyIsDeferred(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	entered, release := make(chan struct{}), make(chan struct{})
	var calls int
	app := func(ctx context.Context, d receiver.Delivery) error {
		calls++ // only ever one call in flight here
		if calls == 1 {
			close(entered)
			<-release
		}
		return nil
	}
	h := newHandler(t, receiver.Config{Secrets: []string{secret}, Now: c.Now}, app)
	first := make(chan int)
	go func() { first <- serve(h, signedRequest(t, secret, "evt_1", "order:1", 1, c.Now())).Code }()
	<-entered
	if w := serve(h, signedRequest(t, secret, "evt_1", "order:1", 1, c.Now())); w.Code != http.StatusConflict {
		t.Fatalf("copy during handling: status %d, want 409", w.Code)
	}
	close(release)
	if code := <-first; code != 200 {
		t.Fatalf("first: status %d", code)
	}
	if w := serve(h, signedRequest(t, secret, "evt_1", "order:1", 1, c.Now())); w.Code != 200 || calls != 1 {
		t.Fatalf("copy after handling: status %d, %d calls; want 200 and 1 call", w.Code, calls)
	}
}

func TestHandlerReleasesClaimWhenApplicationPanics(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	calls := 0
	app := func(context.Context, receiver.Delivery) error {
		calls++
		if calls == 1 {
			panic("bug")
		}
		return nil
	}
	h := newHandler(t, receiver.Config{Secrets: []string{secret}, Now: c.Now}, app)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not reach net/http")
			}
		}()
		serve(h, signedRequest(t, secret, "evt_1", "order:1", 1, c.Now()))
	}()
	if w := serve(h, signedRequest(t, secret, "evt_1", "order:1", 1, c.Now())); w.Code != 200 || calls != 2 {
		t.Fatalf("retry after a panic: status %d, %d calls; want 200 and 2", w.Code, calls)
	}
}

func TestHandlerConcurrentDeliveries(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	app := &recorder{}
	h := newHandler(t, receiver.Config{Secrets: []string{secret}, Now: c.Now}, app.handle)
	const copies, entities = 8, 16
	reqs := make([]*http.Request, 0, copies*entities)
	for e := range entities {
		id := "evt_" + strconv.Itoa(e)
		for range copies {
			reqs = append(reqs, signedRequest(t, secret, id, "order:"+strconv.Itoa(e), int64(e+1), c.Now()))
		}
	}
	codes := make([]int, len(reqs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() {
			<-start
			codes[i] = serve(h, r).Code
		})
	}
	close(start)
	wg.Wait()
	for i, code := range codes {
		if code != 200 && code != http.StatusConflict {
			t.Fatalf("request %d: status %d", i, code)
		}
	}
	ids := app.ids()
	slices.Sort(ids)
	if len(ids) != entities || len(slices.Compact(ids)) != entities {
		t.Fatalf("handled %v, want each of %d events exactly once", ids, entities)
	}
}

// failingStore fails the operations named in failOn, and records whether the
// context it was given had ended.
type failingStore struct {
	receiver.DedupStore
	receiver.RevisionStore
	failOn        string
	mu            sync.Mutex
	doneCtxEnded  bool
	doneCalled    bool
	advanceCalled bool
}

func newFailingStore(c *clock, failOn string) *failingStore {
	return &failingStore{
		DedupStore:    receiver.NewMemoryDedup(receiver.MemoryDedupConfig{Now: c.Now}),
		RevisionStore: receiver.NewMemoryRevisions(receiver.MemoryRevisionsConfig{Now: c.Now}),
		failOn:        failOn,
	}
}

func (f *failingStore) fail(op string) error {
	if f.failOn == op {
		return errors.New(op + ": connection refused")
	}
	return nil
}

func (f *failingStore) Claim(ctx context.Context, id, token string, ttl time.Duration) (receiver.ClaimResult, error) {
	if err := f.fail("claim"); err != nil {
		return 0, err
	}
	return f.DedupStore.Claim(ctx, id, token, ttl)
}

func (f *failingStore) Done(ctx context.Context, id string, ttl time.Duration) error {
	f.mu.Lock()
	f.doneCalled, f.doneCtxEnded = true, ctx.Err() != nil
	f.mu.Unlock()
	if err := f.fail("done"); err != nil {
		return err
	}
	return f.DedupStore.Done(ctx, id, ttl)
}

func (f *failingStore) Stale(ctx context.Context, entity string, rev int64) (bool, error) {
	if err := f.fail("stale"); err != nil {
		return false, err
	}
	return f.RevisionStore.Stale(ctx, entity, rev)
}

func (f *failingStore) Advance(ctx context.Context, entity string, rev int64) error {
	f.mu.Lock()
	f.advanceCalled = true
	f.mu.Unlock()
	if err := f.fail("advance"); err != nil {
		return err
	}
	return f.RevisionStore.Advance(ctx, entity, rev)
}

func TestHandlerStoreFailures(t *testing.T) {
	tests := []struct {
		failOn  string
		status  int
		appCall bool
	}{
		{"claim", 503, false},  // cannot tell a duplicate: let Laneway retry
		{"stale", 503, false},  // cannot tell a stale update: same
		{"done", 200, true},    // the application acted: a 5xx would only resend it
		{"advance", 200, true}, // same
		{"release", 200, true}, // not reached on success
		{"nothing", 200, true}, // control
	}
	for _, tt := range tests {
		t.Run(tt.failOn, func(t *testing.T) {
			c := newClock()
			secret := testSecret(1)
			store := newFailingStore(c, tt.failOn)
			var logs bytes.Buffer
			app := &recorder{}
			h := newHandler(t, receiver.Config{
				Secrets: []string{secret}, Now: c.Now, Dedup: store, Revisions: store,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			}, app.handle)
			w := serve(h, signedRequest(t, secret, "evt_1", "order:1", 1, c.Now()))
			if w.Code != tt.status || (app.callCount() > 0) != tt.appCall {
				t.Fatalf("status %d, application called %v; want %d, %v", w.Code, app.callCount() > 0, tt.status, tt.appCall)
			}
			if wantLog := tt.failOn == "claim" || tt.failOn == "stale" || tt.failOn == "done" || tt.failOn == "advance"; wantLog != strings.Contains(logs.String(), "connection refused") {
				t.Fatalf("store error logged: %v, want %v; logs:\n%s", !wantLog, wantLog, logs.String())
			}
		})
	}
}

// Laneway stops waiting after 5 s and its request context ends, but an
// application that finished must still be remembered, or the retry would
// make it act twice.
func TestHandlerRemembersAfterTheSenderGaveUp(t *testing.T) {
	c := newClock()
	secret := testSecret(1)
	store := newFailingStore(c, "")
	ctx, cancel := context.WithCancel(context.Background())
	app := func(context.Context, receiver.Delivery) error {
		cancel() // the sender hangs up while the application works
		return nil
	}
	h := newHandler(t, receiver.Config{Secrets: []string{secret}, Now: c.Now, Dedup: store, Revisions: store}, app)
	serve(h, signedRequest(t, secret, "evt_1", "order:1", 1, c.Now()).WithContext(ctx))
	if !store.doneCalled || store.doneCtxEnded || !store.advanceCalled {
		t.Fatalf("Done called %v with an ended context %v, Advance called %v; want Done on a live context and Advance",
			store.doneCalled, store.doneCtxEnded, store.advanceCalled)
	}
	res, _ := store.Claim(context.Background(), "evt_1", "t", time.Minute)
	if res != receiver.AlreadyDone {
		t.Fatalf("evt_1 is %v after success, want already_done", res)
	}
}

func TestNewHandlerRefusesBadConfig(t *testing.T) {
	app := func(context.Context, receiver.Delivery) error { return nil }
	if _, err := receiver.NewHandler(receiver.Config{Secrets: []string{testSecret(1)}}, nil); err == nil {
		t.Error("NewHandler accepted a nil application")
	}
	if _, err := receiver.NewHandler(receiver.Config{}, app); err == nil {
		t.Error("NewHandler accepted no secrets")
	}
	for _, cfg := range []receiver.Config{
		{Secrets: []string{testSecret(1)}, DedupTTL: -time.Second},
		{Secrets: []string{testSecret(1)}, ClaimTTL: -time.Second},
		{Secrets: []string{"whsec_!!"}},
	} {
		if _, err := receiver.NewHandler(cfg, app); err == nil {
			t.Errorf("NewHandler accepted %+v", cfg)
		}
	}
}

// TestLanewaySenderIsAccepted sends with Laneway's own sender, as the
// delivery stage does, so that the two sides of the contract are tested
// against each other: headers, body, Idempotency-Key and rotation.
func TestLanewaySenderIsAccepted(t *testing.T) {
	c := newClock()
	oldSecret, newSecret := testSecret(1), testSecret(2)
	app := &recorder{}
	h := newHandler(t, receiver.Config{Secrets: []string{newSecret}, Now: c.Now}, app.handle)
	var idempotencyKeys []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		idempotencyKeys = append(idempotencyKeys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()

	sender, err := deliver.NewSender(deliver.Config{
		AllowTargets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Now: c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	signer, err := signing.NewSigner([]string{oldSecret, newSecret}) // mid-rotation
	if err != nil {
		t.Fatal(err)
	}
	d := event.Delivery{EventID: "evt_42", EndpointID: "ep_1", Type: "order.updated", Entity: "order:1", Revision: 3,
		OccurredAt: c.Now(), Data: []byte(`{"a":1}`)}
	body, err := d.Body()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the second is a replay: acknowledged, not handled
		res := sender.Send(context.Background(), deliver.Request{URL: srv.URL + "/webhooks", MsgID: d.EventID, Body: body, Signer: signer})
		if res.Err != nil || res.Outcome() != deliver.Delivered {
			t.Fatalf("send %d: %v (%v)", i+1, res.Err, res.Outcome())
		}
	}
	if got := app.ids(); !slices.Equal(got, []string{"evt_42"}) {
		t.Fatalf("handled %v, want evt_42 once", got)
	}
	if !slices.Equal(idempotencyKeys, []string{"evt_42", "evt_42"}) {
		t.Fatalf("Idempotency-Key %v, want the webhook-id", idempotencyKeys)
	}
	got := app.got[0]
	if got.Type != d.Type || got.Entity.ID != d.Entity || got.Entity.Revision != d.Revision || string(got.Data) != `{"a":1}` {
		t.Fatalf("application got %+v", got)
	}
}

// The answers must mean to Laneway what the package documentation says: 413
// dead-letters, every other refusal is retried.
func TestHandlerAnswersAsLanewayClassifiesThem(t *testing.T) {
	c := newClock()
	h := newHandler(t, receiver.Config{Secrets: []string{testSecret(1)}, Now: c.Now, MaxBodyBytes: 16},
		func(context.Context, receiver.Delivery) error { return nil })
	w := serve(h, signedRequest(t, testSecret(1), "evt_1", "order:1", 1, c.Now()))
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", w.Code)
	}
	for code, want := range map[int]deliver.Outcome{
		400: deliver.Retry, 401: deliver.Retry, 405: deliver.Retry, 409: deliver.Retry,
		413: deliver.Dead, 500: deliver.Retry, 503: deliver.Retry,
	} {
		if got := deliver.Classify(&deliver.StatusError{Code: code}); got != want {
			t.Errorf("Laneway classifies %d as %v, want %v", code, got, want)
		}
	}
}
