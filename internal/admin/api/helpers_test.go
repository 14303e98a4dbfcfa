package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
)

// fakeStore is an in-memory EndpointStore.
type fakeStore struct {
	mu        sync.Mutex
	endpoints map[string]endpoint.Endpoint
	putErr    error
	listPanic bool
}

func newFakeStore() *fakeStore { return &fakeStore{endpoints: map[string]endpoint.Endpoint{}} }

func (f *fakeStore) Get(id string) (endpoint.Endpoint, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.endpoints[id]
	return e, ok
}

func (f *fakeStore) List() []endpoint.Endpoint {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.listPanic {
		panic("fake store: List exploded")
	}
	out := make([]endpoint.Endpoint, 0, len(f.endpoints))
	for _, e := range f.endpoints {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b endpoint.Endpoint) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (f *fakeStore) Put(_ context.Context, e endpoint.Endpoint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.putErr != nil {
		return f.putErr
	}
	f.endpoints[e.ID] = e
	return nil
}

func (f *fakeStore) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.endpoints, id)
	return nil
}

func (f *fakeStore) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.endpoints)
}

// fakePublisher records published envelopes. When entered and release are
// set, Publish signals entered and then waits on release, which lets a test
// hold a request in the middle of publishing.
type fakePublisher struct {
	mu      sync.Mutex
	calls   []event.Envelope
	err     error
	entered chan struct{}
	release chan struct{}
}

const fakePartition = 7

func (f *fakePublisher) Publish(ctx context.Context, env event.Envelope) (int32, int64, error) {
	if f.entered != nil {
		f.entered <- struct{}{}
		select {
		case <-f.release:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return 0, 0, f.err
	}
	f.calls = append(f.calls, env)
	return fakePartition, int64(100 + len(f.calls)), nil
}

func (f *fakePublisher) published() []event.Envelope {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakePublisher) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// clock is a settable clock for Config.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// syncBuffer is a log sink safe for concurrent handlers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

const testToken = "test-admin-token"

type harness struct {
	t     *testing.T
	srv   *httptest.Server
	store *fakeStore
	pub   *fakePublisher
	mr    *miniredis.Miniredis
	clock *clock
	logs  *syncBuffer
	token string
}

// newHarness starts a server with a fake store and publisher, miniredis
// for idempotency, a fixed clock, sequential ids and a Debug logger.
// mutate may change the config before New.
func newHarness(t *testing.T, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{t: t, store: newFakeStore(), pub: &fakePublisher{}, clock: &clock{now: t0}, logs: &syncBuffer{}}
	h.mr = miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: h.mr.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	var ids atomic.Int64
	cfg := Config{
		Endpoints: h.store,
		Publisher: h.pub,
		Redis:     rdb,
		Logger:    slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Now:       h.clock.Now,
		NewID:     func() string { return strconv.FormatInt(ids.Add(1), 10) },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	h.token = cfg.AdminToken
	s, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.srv = httptest.NewServer(s.Handler())
	t.Cleanup(h.srv.Close)
	return h
}

type response struct {
	status int
	header http.Header
	body   []byte
}

// json decodes the body into a map, failing the test if it is not JSON.
func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response is not a JSON object: %v: %q", err, r.body)
	}
	return m
}

// do sends a request with the harness's admin token (if any) and the given
// extra headers as name, value pairs.
func (h *harness) do(method, path, body string, headers ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if body != "" || method == http.MethodPost { // as every client must, without a token
		req.Header.Set("Content-Type", "application/json")
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return h.roundTrip(req)
}

// roundTrip sends req and reads the whole response.
func (h *harness) roundTrip(req *http.Request) response {
	h.t.Helper()
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

func wantStatus(t *testing.T, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status = %d, want %d; body %s", r.status, want, r.body)
	}
}

func wantJSONContent(t *testing.T, r response) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
}

var errBroker = errors.New("broker unavailable")
