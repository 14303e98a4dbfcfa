package receiver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/laneway/laneway/receiver"
)

const feedToken = "lwf_test-token"

// testDeadline bounds every wait of these tests.
const testDeadline = 10 * time.Second

// failure is an answer the fake gives instead of serving a request.
type failure struct {
	status     int
	retryAfter string
	body       string
	hangup     bool   // close the connection without answering
	after      func() // called once the answer is written
}

func (fl failure) write(w http.ResponseWriter) {
	defer func() {
		if fl.after != nil {
			fl.after()
		}
	}()
	if fl.hangup {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	if fl.retryAfter != "" {
		w.Header().Set("Retry-After", fl.retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(fl.status)
	_, _ = w.Write([]byte(fl.body))
}

// fakeFeed serves the feed API's contract for the pull endpoint ep_1 (and
// answers 409 for the push endpoint ep_push). Cursor "c<n>" is the
// position after sequence n.
type fakeFeed struct {
	srv *httptest.Server
	// parked receives each time a read starts waiting for events.
	parked chan struct{}

	mu        sync.Mutex
	seqs      []int64 // retained sequences, ascending; gaps are coalesced revisions
	thin      bool
	oldest    int64 // position of the oldest retained event's predecessor
	acked     int64
	acks      []string
	reads     []url.Values
	readTimes []time.Time
	requests  int
	failReads []failure
	failAcks  []failure
	appended  chan struct{} // closed (and replaced) by each append
}

func newFakeFeed(t *testing.T, seqs ...int64) *fakeFeed {
	f := &fakeFeed{parked: make(chan struct{}, 16), seqs: seqs, appended: make(chan struct{})}
	f.srv = httptest.NewServer(f)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	f.mu.Unlock()
	switch {
	case r.Header.Get("Authorization") != "Bearer "+feedToken:
		answer(w, http.StatusUnauthorized, `{"error":"missing or invalid feed token"}`)
	case strings.HasPrefix(r.URL.Path, "/v1/feed/ep_push"):
		answer(w, http.StatusConflict, `{"error":"endpoint is not a pull endpoint"}`)
	case r.Method == http.MethodGet && r.URL.Path == "/v1/feed/ep_1":
		f.read(w, r)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/feed/ep_1/ack":
		f.ack(w, r)
	default:
		answer(w, http.StatusNotFound, `{"error":"endpoint not found"}`)
	}
}

func answer(w http.ResponseWriter, status int, body string) {
	failure{status: status, body: body}.write(w)
}

func cursorOf(n int64) string { return "c" + strconv.FormatInt(n, 10) }

func parseCursor(c string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimPrefix(c, "c"), 10, 64)
	return n, err == nil && strings.HasPrefix(c, "c")
}

// read serves GET /v1/feed/ep_1, holding it up to wait for an append.
func (f *fakeFeed) read(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	f.reads = append(f.reads, q)
	f.readTimes = append(f.readTimes, time.Now())
	fl, failed := pop(&f.failReads)
	from := max(f.acked, f.oldest)
	f.mu.Unlock()
	if failed {
		fl.write(w)
		return
	}
	if c := q.Get("cursor"); c != "" {
		n, ok := parseCursor(c)
		if !ok {
			answer(w, http.StatusBadRequest, `{"error":"cursor: not a cursor of this feed","field":"cursor"}`)
			return
		}
		from = n
	}
	limit, err := strconv.Atoi(q.Get("limit"))
	if err != nil {
		limit = 100
	}
	wait, _ := time.ParseDuration(q.Get("wait"))
	expire := time.NewTimer(wait)
	defer expire.Stop()
	for {
		f.mu.Lock()
		oldest, events, next, appended := f.oldest, f.after(from, limit), from, f.appended
		if len(events) > 0 {
			next = events[len(events)-1]
		}
		f.mu.Unlock()
		if from < oldest {
			answer(w, http.StatusGone, fmt.Sprintf(`{"error":"cursor is older than the retention","oldest_cursor":%q}`, cursorOf(oldest)))
			return
		}
		if len(events) > 0 || wait == 0 {
			f.page(w, events, next)
			return
		}
		f.parked <- struct{}{}
		select {
		case <-appended:
		case <-expire.C:
			wait = 0
		case <-r.Context().Done():
			return
		}
	}
}

// after returns up to limit sequences after position from.
func (f *fakeFeed) after(from int64, limit int) []int64 {
	i, _ := slices.BinarySearch(f.seqs, from+1)
	return slices.Clone(f.seqs[i:min(len(f.seqs), i+limit)])
}

func (f *fakeFeed) page(w http.ResponseWriter, seqs []int64, next int64) {
	events := make([]string, len(seqs))
	for i, s := range seqs {
		events[i] = wireEvent(s, f.thin)
	}
	answer(w, http.StatusOK, `{"events":[`+strings.Join(events, ",")+`],"next_cursor":"`+cursorOf(next)+`"}`)
}

// wireEvent is event seq as the feed API writes it.
func wireEvent(seq int64, thin bool) string {
	data := fmt.Sprintf(`,"data":{"n":%d,"note":"café ✓"}`, seq)
	if thin {
		data = ""
	}
	return fmt.Sprintf(`{"sequence":%d,"id":"evt-%d","type":"order.updated","timestamp":"2026-12-02T01:02:03Z",`+
		`"entity":{"id":"order:%d","revision":%d}%s}`, seq, seq, seq%3, seq, data)
}

// ack serves POST /v1/feed/ep_1/ack: monotonic, like the server's.
func (f *fakeFeed) ack(w http.ResponseWriter, r *http.Request) {
	var body struct{ Cursor string }
	err := json.NewDecoder(r.Body).Decode(&body)
	n, ok := parseCursor(body.Cursor)
	if err != nil || !ok {
		answer(w, http.StatusBadRequest, `{"error":"cursor: not a cursor of this feed","field":"cursor"}`)
		return
	}
	f.mu.Lock()
	fl, failed := pop(&f.failAcks)
	if !failed {
		f.acks = append(f.acks, body.Cursor)
		f.acked = max(f.acked, n)
	}
	acked := f.acked
	f.mu.Unlock()
	if failed {
		fl.write(w)
		return
	}
	answer(w, http.StatusOK, `{"acked_cursor":"`+cursorOf(acked)+`"}`)
}

func pop(fs *[]failure) (failure, bool) {
	if len(*fs) == 0 {
		return failure{}, false
	}
	fl := (*fs)[0]
	*fs = (*fs)[1:]
	return fl, true
}

// add appends events and wakes the waiting reads.
func (f *fakeFeed) add(seqs ...int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seqs = append(f.seqs, seqs...)
	close(f.appended)
	f.appended = make(chan struct{})
}

func (f *fakeFeed) ackList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.acks)
}

func (f *fakeFeed) readCursors() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var cs []string
	for _, q := range f.reads {
		cs = append(cs, q.Get("cursor"))
	}
	return cs
}

// readAt returns the query and the arrival time of the i-th read.
func (f *fakeFeed) readAt(i int) (url.Values, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[i], f.readTimes[i]
}

func (f *fakeFeed) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func (f *fakeFeed) config() receiver.FeedConfig {
	return receiver.FeedConfig{BaseURL: f.srv.URL + "/", EndpointID: "ep_1", Token: feedToken,
		BackoffMin: time.Millisecond, BackoffMax: time.Millisecond}
}

func newFeed(t *testing.T, cfg receiver.FeedConfig) *receiver.Feed {
	t.Helper()
	feed, err := receiver.NewFeed(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return feed
}

// waitFor receives from ch or fails the test at the deadline.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testDeadline):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// running is a Run in a goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(feed *receiver.Feed, h receiver.FeedHandlerFunc) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- feed.Run(ctx, h) }()
	return r
}

// stop cancels the Run and returns its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	return waitFor(t, r.done, "Run to return")
}

// collector is a handler that records sequences and reports each on seen.
type collector struct {
	mu   sync.Mutex
	got  []receiver.FeedEvent
	seen chan int64
}

func newCollector() *collector { return &collector{seen: make(chan int64, 100)} }

func (c *collector) handle(_ context.Context, ev receiver.FeedEvent) error {
	c.mu.Lock()
	c.got = append(c.got, ev)
	c.mu.Unlock()
	c.seen <- ev.Sequence
	return nil
}

func (c *collector) sequences() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var s []int64
	for _, ev := range c.got {
		s = append(s, ev.Sequence)
	}
	return s
}

func TestFeedRunHandsOverEveryEventInOrderAndAcksEachPage(t *testing.T) {
	f := newFakeFeed(t, 1, 2, 3, 4, 5)
	cfg := f.config()
	cfg.Limit, cfg.Wait = 2, 3*time.Second
	feed := newFeed(t, cfg)
	c := newCollector()
	r := start(feed, c.handle)
	waitFor(t, f.parked, "the read after the last page to wait")
	if err := r.stop(t); err != context.Canceled {
		t.Fatalf("Run = %v, want context.Canceled itself", err)
	}
	if got := c.sequences(); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("handled %v, want 1..5 in order", got)
	}
	if got := f.ackList(); !slices.Equal(got, []string{"c2", "c4", "c5"}) {
		t.Fatalf("acks %v, want one per page", got)
	}
	if got := f.readCursors(); !slices.Equal(got, []string{"", "c2", "c4", "c5"}) {
		t.Fatalf("read from %q, want the server's position, then each next_cursor", got)
	}
	if q, _ := f.readAt(0); q.Get("limit") != "2" || q.Get("wait") != "3s" {
		t.Fatalf("query %v, want limit=2 wait=3s", q)
	}
	if got := feed.Cursor(); got != "c5" {
		t.Fatalf("Cursor = %q, want c5", got)
	}
	want := receiver.FeedEvent{Sequence: 1, ID: "evt-1", Type: "order.updated",
		Timestamp: time.Date(2026, 12, 2, 1, 2, 3, 0, time.UTC),
		Entity:    receiver.Entity{ID: "order:1", Revision: 1}, Data: json.RawMessage(`{"n":1,"note":"café ✓"}`)}
	if got := c.got[0]; got.Sequence != want.Sequence || got.ID != want.ID || got.Type != want.Type ||
		!got.Timestamp.Equal(want.Timestamp) || got.Entity != want.Entity || string(got.Data) != string(want.Data) {
		t.Fatalf("first event %+v, want %+v", got, want)
	}
}

func TestFeedLongPollHandsOverAnAppendedEventAtOnce(t *testing.T) {
	f := newFakeFeed(t)
	cfg := f.config()
	cfg.Wait = receiver.MaxFeedWait // the event must come long before the wait ends
	c := newCollector()
	r := start(newFeed(t, cfg), c.handle)
	waitFor(t, f.parked, "the first read to wait")
	f.add(1)
	if seq := waitFor(t, c.seen, "the appended event"); seq != 1 {
		t.Fatalf("handled %d, want 1", seq)
	}
	if got := f.readCursors(); len(got) != 1 {
		t.Fatalf("%d reads before the event was handled, want the one held open", len(got))
	}
	waitFor(t, f.parked, "the next read to wait")
	if err := r.stop(t); err != context.Canceled {
		t.Fatalf("Run = %v", err)
	}
	if got := f.ackList(); !slices.Equal(got, []string{"c1"}) {
		t.Fatalf("acks %v, want c1", got)
	}
}

func TestFeedHandlerErrorLeavesThePageUnacknowledged(t *testing.T) {
	f := newFakeFeed(t, 1, 2, 3)
	feed := newFeed(t, f.config())
	boom := errors.New("database down")
	var handled []int64
	err := feed.Run(context.Background(), func(_ context.Context, ev receiver.FeedEvent) error {
		handled = append(handled, ev.Sequence)
		if ev.Sequence == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "event 2 (evt-2)") {
		t.Fatalf("Run = %v, want the handler's error naming event 2", err)
	}
	if !slices.Equal(handled, []int64{1, 2}) || len(f.ackList()) != 0 || feed.Cursor() != "" {
		t.Fatalf("handled %v, acks %v, cursor %q; want 1 and 2, no ack, the start cursor", handled, f.ackList(), feed.Cursor())
	}

	// Run again: the page is read again from the start.
	c := newCollector()
	r := start(feed, c.handle)
	waitFor(t, f.parked, "the read after the page")
	if err := r.stop(t); err != context.Canceled {
		t.Fatalf("second Run = %v", err)
	}
	if got := c.sequences(); !slices.Equal(got, []int64{1, 2, 3}) || !slices.Equal(f.ackList(), []string{"c3"}) {
		t.Fatalf("second Run handled %v, acks %v; want 1..3 and c3", got, f.ackList())
	}
}

func TestFeedStartsAtItsCursorAndNoAckSendsNone(t *testing.T) {
	f := newFakeFeed(t, 1, 2, 3, 4, 5)
	cfg := f.config()
	cfg.Cursor, cfg.NoAck = "c3", true
	feed := newFeed(t, cfg)
	if feed.Cursor() != "c3" {
		t.Fatalf("Cursor before the first read = %q, want c3", feed.Cursor())
	}
	c := newCollector()
	r := start(feed, c.handle)
	waitFor(t, f.parked, "the read after the page")
	if err := r.stop(t); err != context.Canceled {
		t.Fatalf("Run = %v", err)
	}
	if got := c.sequences(); !slices.Equal(got, []int64{4, 5}) || feed.Cursor() != "c5" {
		t.Fatalf("handled %v, cursor %q; want 4, 5 and c5", got, feed.Cursor())
	}
	if got := f.readCursors(); got[0] != "c3" || len(f.ackList()) != 0 {
		t.Fatalf("read from %q, acks %v; want c3 first and no ack", got, f.ackList())
	}
}

func TestFeedRetriesTransientFailures(t *testing.T) {
	f := newFakeFeed(t, 1, 2)
	f.failReads = []failure{
		{status: 503, body: `{"error":"feed store unavailable"}`},
		{hangup: true},
		{status: 429, retryAfter: "0"},
		{status: 502, body: "<html>bad gateway</html>"},
	}
	f.failAcks = []failure{{status: 500, body: `{"error":"oops"}`}, {hangup: true}}
	c := newCollector()
	r := start(newFeed(t, f.config()), c.handle)
	waitFor(t, f.parked, "the read after the page")
	if err := r.stop(t); err != context.Canceled {
		t.Fatalf("Run = %v", err)
	}
	if got := c.sequences(); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("handled %v, want 1 and 2 once each", got)
	}
	if got := f.ackList(); !slices.Equal(got, []string{"c2"}) {
		t.Fatalf("acks %v, want c2 after two failed attempts", got)
	}
	if got := f.readCursors(); len(got) != 6 {
		t.Fatalf("%d reads, want 4 failed, 1 served, 1 waiting", len(got))
	}
}

func TestFeedHonoursRetryAfterUpToBackoffMax(t *testing.T) {
	f := newFakeFeed(t, 1)
	f.failReads = []failure{{status: 429, retryAfter: "1"}}
	cfg := f.config()
	cfg.BackoffMax = 5 * time.Second
	c := newCollector()
	r := start(newFeed(t, cfg), c.handle)
	waitFor(t, c.seen, "the event")
	_, first := f.readAt(0)
	_, second := f.readAt(1)
	if gap := second.Sub(first); gap < time.Second {
		t.Fatalf("retried after %v, want the Retry-After's 1s", gap)
	}
	r.stop(t)

	// An hour's Retry-After is cut to BackoffMax (1 ms): the test ends.
	f = newFakeFeed(t, 1)
	f.failReads = []failure{{status: 503, retryAfter: "3600"}}
	c = newCollector()
	r = start(newFeed(t, f.config()), c.handle)
	waitFor(t, c.seen, "the event after a capped Retry-After")
	r.stop(t)
}

func TestFeedCursorExpired(t *testing.T) {
	f := newFakeFeed(t, 11, 12)
	f.oldest = 10
	cfg := f.config()
	cfg.Cursor = "c3"
	feed := newFeed(t, cfg)
	called := false
	err := feed.Run(context.Background(), func(context.Context, receiver.FeedEvent) error { called = true; return nil })
	var expired *receiver.CursorExpiredError
	if !errors.As(err, &expired) || expired.Cursor != "c3" || expired.Oldest != "c10" {
		t.Fatalf("Run = %v, want a *CursorExpiredError from c3 naming c10", err)
	}
	if called || f.requestCount() != 1 || feed.Cursor() != "c3" {
		t.Fatalf("handler called %v, %d requests, cursor %q; want none, 1 (no retry), c3", called, f.requestCount(), feed.Cursor())
	}
	if !strings.Contains(err.Error(), "c10") {
		t.Fatalf("message %q does not name the oldest cursor", err)
	}
}

func TestFeedErrorsThatRetryingCannotFix(t *testing.T) {
	unchanged := func(*receiver.FeedConfig) {}
	tests := []struct {
		name       string
		change     func(*receiver.FeedConfig)
		fail       []failure
		status     int
		field, msg string
	}{
		{"revoked token", func(c *receiver.FeedConfig) { c.Token = "lwf_revoked" }, nil, 401, "", "revoked"},
		{"unknown endpoint", func(c *receiver.FeedConfig) { c.EndpointID = "ep_missing" }, nil, 404, "", "no endpoint ep_missing"},
		{"push endpoint", func(c *receiver.FeedConfig) { c.EndpointID = "ep_push" }, nil, 409, "", "not a pull endpoint"},
		{"bad cursor", func(c *receiver.FeedConfig) { c.Cursor = "bogus" }, nil, 400, "cursor", "(field: cursor)"},
		{"no feeds served", unchanged, []failure{{status: 501, body: `{"error":"feeds are not served by this instance"}`}}, 501, "", "not served"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeFeed(t, 1)
			f.failReads = tt.fail
			cfg := f.config()
			tt.change(&cfg)
			err := newFeed(t, cfg).Run(context.Background(), func(context.Context, receiver.FeedEvent) error { return nil })
			var fe *receiver.FeedError
			if !errors.As(err, &fe) || fe.StatusCode != tt.status || fe.Field != tt.field || fe.Transient() {
				t.Fatalf("Run = %#v, want a permanent *FeedError %d", err, tt.status)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("message %q lacks %q", err, tt.msg)
			}
			if n := f.requestCount(); n != 1 {
				t.Fatalf("%d requests, want 1: no retry", n)
			}
		})
	}
}

func TestFeedEventsIteratorAcksOnlyPagesItWentPast(t *testing.T) {
	f := newFakeFeed(t, 1, 2, 5, 6) // 3 and 4 were superseded
	f.thin = true
	cfg := f.config()
	cfg.Limit = 2
	feed := newFeed(t, cfg)
	var got []int64
	for ev, err := range feed.Events(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Data != nil {
			t.Fatalf("thin event %d has data %s", ev.Sequence, ev.Data)
		}
		got = append(got, ev.Sequence)
		if ev.Sequence == 5 {
			break
		}
	}
	if !slices.Equal(got, []int64{1, 2, 5}) {
		t.Fatalf("iterated %v, want 1, 2, 5", got)
	}
	if acks := f.ackList(); !slices.Equal(acks, []string{"c2"}) || feed.Cursor() != "c2" {
		t.Fatalf("acks %v, cursor %q; want only the first page's c2", acks, feed.Cursor())
	}
}

func TestFeedRunStopsWhenTheContextEndsDuringABackoff(t *testing.T) {
	f := newFakeFeed(t)
	failed := make(chan struct{})
	f.failReads = []failure{{status: 503, after: func() { close(failed) }}}
	cfg := f.config()
	cfg.BackoffMin, cfg.BackoffMax = time.Hour, time.Hour
	r := start(newFeed(t, cfg), newCollector().handle)
	waitFor(t, failed, "the failed read")
	if err := r.stop(t); err != context.Canceled {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}

func TestFeedFetchAndAck(t *testing.T) {
	f := newFakeFeed(t, 1, 2)
	feed := newFeed(t, f.config())
	ctx := context.Background()
	page, err := feed.Fetch(ctx, "", 0)
	if err != nil || len(page.Events) != 2 || page.NextCursor != "c2" {
		t.Fatalf("Fetch = %+v, %v", page, err)
	}
	if q, _ := f.readAt(0); q.Has("wait") || q.Get("limit") != "100" {
		t.Fatalf("Fetch without a wait sent %v, want limit=100 and no wait", q)
	}
	page, err = feed.Fetch(ctx, "c2", 0)
	if err != nil || len(page.Events) != 0 || page.NextCursor != "c2" {
		t.Fatalf("Fetch at the end = %+v, %v; want no events, the same cursor", page, err)
	}
	if err := feed.Ack(ctx, "c2"); err != nil || !slices.Equal(f.ackList(), []string{"c2"}) {
		t.Fatalf("Ack = %v, acks %v", err, f.ackList())
	}
	if feed.Cursor() != "" {
		t.Fatalf("Fetch moved Cursor to %q", feed.Cursor())
	}
	if _, err := feed.Fetch(ctx, "", time.Minute); err == nil {
		t.Fatal("Fetch accepted a wait over MaxFeedWait")
	}
}

func TestFeedIsFollowedByOneLoopAtATime(t *testing.T) {
	f := newFakeFeed(t)
	feed := newFeed(t, f.config())
	r := start(feed, newCollector().handle)
	waitFor(t, f.parked, "the first Run to wait")
	err := feed.Run(context.Background(), func(context.Context, receiver.FeedEvent) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "already being followed") {
		t.Fatalf("second Run = %v", err)
	}
	r.stop(t)
}

func TestNewFeedRefusesABadConfig(t *testing.T) {
	good := receiver.FeedConfig{BaseURL: "http://laneway:8080", EndpointID: "ep_1", Token: feedToken}
	tests := []struct {
		name   string
		change func(*receiver.FeedConfig)
		want   string
	}{
		{"no base URL", func(c *receiver.FeedConfig) { c.BaseURL = "" }, "needs BaseURL"},
		{"no endpoint", func(c *receiver.FeedConfig) { c.EndpointID = "" }, "EndpointID"},
		{"no token", func(c *receiver.FeedConfig) { c.Token = "" }, "Token"},
		{"admin token", func(c *receiver.FeedConfig) { c.Token = "admin-secret" }, "not a feed consumer token"},
		{"relative URL", func(c *receiver.FeedConfig) { c.BaseURL = "laneway:8080" }, "http(s)://host"},
		{"limit", func(c *receiver.FeedConfig) { c.Limit = 1001 }, "Limit"},
		{"negative limit", func(c *receiver.FeedConfig) { c.Limit = -1 }, "Limit"},
		{"wait", func(c *receiver.FeedConfig) { c.Wait = 31 * time.Second }, "Wait"},
		{"negative timeout", func(c *receiver.FeedConfig) { c.RequestTimeout = -1 }, "negative"},
		{"backoff order", func(c *receiver.FeedConfig) { c.BackoffMin = time.Minute; c.BackoffMax = time.Second }, "BackoffMin"},
	}
	for _, tt := range tests {
		cfg := good
		tt.change(&cfg)
		if _, err := receiver.NewFeed(cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one naming %q", tt.name, err, tt.want)
		}
	}
	if _, err := receiver.NewFeed(good); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	if err := newFeed(t, good).Run(context.Background(), nil); err == nil {
		t.Fatal("Run accepted a nil handler")
	}
}
