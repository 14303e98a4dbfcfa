package receiver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults and limits of FeedConfig. The limits are the feed API's: a read
// outside them is refused, so NewFeed refuses them first.
const (
	// DefaultFeedLimit is the API's default page size.
	DefaultFeedLimit = 100
	// MaxFeedLimit is the largest page the API serves.
	MaxFeedLimit = 1000
	// DefaultFeedWait holds a read open long enough that an idle consumer
	// costs one request per 25 s, and short enough to come back before the
	// usual 30 s idle timeout of proxies and load balancers.
	DefaultFeedWait = 25 * time.Second
	// MaxFeedWait is the longest the API holds a read.
	MaxFeedWait = 30 * time.Second
	// DefaultFeedRequestTimeout bounds a request beyond its wait.
	DefaultFeedRequestTimeout = 30 * time.Second
	// DefaultFeedBackoffMin is the first pause after a transient failure.
	DefaultFeedBackoffMin = 500 * time.Millisecond
	// DefaultFeedBackoffMax caps the pauses, so that a consumer notices a
	// recovered Laneway within half a minute.
	DefaultFeedBackoffMax = 30 * time.Second
	// FeedTokenPrefix starts every feed consumer token. The admin token
	// does not read feeds.
	FeedTokenPrefix = "lwf_"
)

// maxFeedPageBytes caps a page read into memory: 1,000 events of Laneway's
// largest (256 KiB of data each) fit, a runaway answer does not.
const maxFeedPageBytes = 512 << 20

// FeedConfig configures a Feed. BaseURL, EndpointID and Token are required.
type FeedConfig struct {
	// BaseURL is the Laneway API, e.g. "https://laneway.example.com".
	BaseURL string
	// EndpointID is the pull endpoint whose feed is read ("ep_…").
	EndpointID string
	// Token is one of the endpoint's consumer tokens ("lwf_…"), as
	// Laneway showed it when it was created.
	Token string

	// HTTPClient sends the requests. Its Timeout, if any, must exceed
	// Wait, or every long poll fails. Default: a client that follows no
	// redirect, so the token is only ever sent to BaseURL.
	HTTPClient *http.Client
	// RequestTimeout bounds each request beyond the time the server may
	// hold it (Wait). Default: DefaultFeedRequestTimeout (30 s).
	RequestTimeout time.Duration

	// Limit is the most events a page holds, 1 to MaxFeedLimit.
	// Default: DefaultFeedLimit (100).
	Limit int
	// Wait is how long the server holds a read that finds nothing new,
	// up to MaxFeedWait: new events are then handed over as soon as they
	// are appended. Default: DefaultFeedWait (25 s).
	Wait time.Duration

	// Cursor is where Run starts: a NextCursor or Feed.Cursor value the
	// application kept. Empty starts at the position acknowledged on the
	// server, or at the oldest retained event when there is none.
	Cursor string
	// NoAck stops Run from acknowledging handled pages on the server. An
	// application that stores Feed.Cursor with its own writes (and sets
	// Cursor from it on start) needs no server-side position.
	NoAck bool

	// BackoffMin and BackoffMax bound the pause before a transient
	// failure is retried; the pause doubles from BackoffMin up to
	// BackoffMax, jittered so that consumers do not retry in step. A 429
	// or 503 answer's Retry-After is waited instead, up to BackoffMax.
	// Defaults: DefaultFeedBackoffMin (500 ms), DefaultFeedBackoffMax (30 s).
	BackoffMin, BackoffMax time.Duration

	// Logger gets a warning per retried failure. Default: discards.
	Logger *slog.Logger
}

func (c FeedConfig) withDefaults() (FeedConfig, error) {
	switch {
	case c.BaseURL == "", c.EndpointID == "", c.Token == "":
		return c, constError("receiver: FeedConfig needs BaseURL, EndpointID and Token")
	case !strings.HasPrefix(c.Token, FeedTokenPrefix):
		return c, constError("receiver: FeedConfig.Token is not a feed consumer token (" + FeedTokenPrefix + "…); the admin token cannot read feeds")
	case c.Limit < 0 || c.Limit > MaxFeedLimit:
		return c, fmt.Errorf("receiver: FeedConfig.Limit %d is outside 1..%d", c.Limit, MaxFeedLimit)
	case c.Wait < 0 || c.Wait > MaxFeedWait:
		return c, fmt.Errorf("receiver: FeedConfig.Wait %v is outside 0..%v", c.Wait, MaxFeedWait)
	case c.RequestTimeout < 0 || c.BackoffMin < 0 || c.BackoffMax < 0:
		return c, constError("receiver: negative FeedConfig duration")
	}
	c.Limit = cmp.Or(c.Limit, DefaultFeedLimit)
	c.Wait = orDefault(c.Wait, DefaultFeedWait)
	c.RequestTimeout = orDefault(c.RequestTimeout, DefaultFeedRequestTimeout)
	c.BackoffMin = orDefault(c.BackoffMin, DefaultFeedBackoffMin)
	c.BackoffMax = orDefault(c.BackoffMax, DefaultFeedBackoffMax)
	if c.BackoffMin > c.BackoffMax {
		return c, fmt.Errorf("receiver: FeedConfig.BackoffMin %v is over BackoffMax %v", c.BackoffMin, c.BackoffMax)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// FeedEvent is one event of a pull endpoint's feed.
type FeedEvent struct {
	// Sequence orders the feed: it increases by one from each event to the
	// next, never repeats and leaves no gap. After a Laneway crash an event
	// may appear again at a higher sequence under the same ID.
	Sequence int64 `json:"sequence"`
	// ID is the event id, the same as a push delivery's webhook-id.
	ID string `json:"id"`
	// Type is the event type, e.g. "order.updated".
	Type string `json:"type"`
	// Timestamp is when the event occurred.
	Timestamp time.Time `json:"timestamp"`
	// Entity is the entity the event is about and its revision.
	Entity Entity `json:"entity"`
	// Data is the event's data; nil for an endpoint with thin payloads.
	Data json.RawMessage `json:"data,omitempty"`
}

// FeedPage is one read of a feed.
type FeedPage struct {
	Events []FeedEvent `json:"events"`
	// NextCursor is where the next read starts. It equals the cursor read
	// from when nothing followed it.
	NextCursor string `json:"next_cursor"`
}

// FeedHandlerFunc handles one event of a feed. A nil error moves on to the
// next event; an error stops Run before the event's page is acknowledged.
type FeedHandlerFunc func(ctx context.Context, ev FeedEvent) error

// Feed reads a pull endpoint's feed: Run (or Events) follows it, Fetch and
// Ack are its single requests. Cursor may be called at any time, from any
// goroutine; one Run or Events loop at a time may follow a Feed.
type Feed struct {
	cfg     FeedConfig
	url     string // the feed's GET address, without a query
	mu      sync.Mutex
	cursor  string
	running atomic.Bool
}

// NewFeed checks cfg and returns a Feed that starts at cfg.Cursor. It makes
// no request.
func NewFeed(cfg FeedConfig) (*Feed, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(strings.TrimSuffix(cfg.BaseURL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("receiver: FeedConfig.BaseURL %q is not an http(s)://host address", cfg.BaseURL)
	}
	base.RawQuery, base.Fragment = "", ""
	return &Feed{cfg: cfg, url: base.String() + "/v1/feed/" + url.PathEscape(cfg.EndpointID), cursor: cfg.Cursor}, nil
}

// Cursor is the position after the last page whose events were all
// handled: start a Feed there (FeedConfig.Cursor) to go on where this one
// stopped. Until a page is read it is FeedConfig.Cursor.
func (f *Feed) Cursor() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cursor
}

func (f *Feed) setCursor(c string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cursor = c
}

// Run follows the feed from Cursor and calls h for each event, in order,
// one at a time. Once h returned nil for every event of a page, Cursor
// moves past the page and the page is acknowledged on the server (unless
// NoAck). Reads long-poll, so a new event reaches h as soon as it is
// appended. Transient failures (network, 429, 5xx) are retried without end.
//
// Run returns ctx.Err() when ctx ends, h's error (wrapped) when h fails, a
// *CursorExpiredError when the cursor is older than the feed's retention,
// and a *FeedError that retrying cannot fix: a refused token, which is
// also the answer for an unknown or push endpoint (401), a refused cursor
// (400) or a Laneway that serves no feeds (501).
// After an error, the page being handled is read again by the next Run:
// delivery is at least once, and h should be idempotent (FeedEvent.ID).
func (f *Feed) Run(ctx context.Context, h FeedHandlerFunc) error {
	if h == nil {
		return constError("receiver: Feed.Run needs a handler func")
	}
	for ev, err := range f.Events(ctx) {
		if err != nil {
			return err
		}
		if err := h(ctx, ev); err != nil {
			return fmt.Errorf("receiver: feed handler failed on event %d (%s): %w", ev.Sequence, ev.ID, err)
		}
	}
	return nil // not reached: Events ends only with an error
}

// Events follows the feed as Run does, as an iterator. An event counts as
// handled when the loop body goes on to the next one, so a page is
// acknowledged once the loop asked for the event after its last; a break
// leaves the page unacknowledged and Cursor before it. The iterator ends
// with one (zero FeedEvent, error) pair, the errors being Run's.
func (f *Feed) Events(ctx context.Context) iter.Seq2[FeedEvent, error] {
	return func(yield func(FeedEvent, error) bool) {
		if !f.running.CompareAndSwap(false, true) {
			yield(FeedEvent{}, constError("receiver: the Feed is already being followed"))
			return
		}
		defer f.running.Store(false)
		if err := f.follow(ctx, yield); err != errStopped {
			yield(FeedEvent{}, err)
		}
	}
}

// errStopped says that the loop over Events broke.
const errStopped = constError("receiver: stopped by the caller")

// follow reads page after page and yields their events. It returns only
// with an error, errStopped when yield asked to stop.
func (f *Feed) follow(ctx context.Context, yield func(FeedEvent, error) bool) error {
	for {
		cursor := f.Cursor()
		var page FeedPage
		err := f.retry(ctx, "read", func() (err error) {
			page, err = f.Fetch(ctx, cursor, f.cfg.Wait)
			return err
		})
		if err != nil {
			return err
		}
		for _, ev := range page.Events {
			if err := ctx.Err(); err != nil {
				return err
			}
			if !yield(ev, nil) {
				return errStopped
			}
		}
		f.setCursor(page.NextCursor)
		if len(page.Events) > 0 && !f.cfg.NoAck {
			if err := f.ackHandled(ctx, page.NextCursor); err != nil {
				return err
			}
		}
	}
}

// ackHandled acknowledges a handled page. The attempt in progress outlives
// ctx: the events are handled, and a lost ack would only make a consumer
// that starts from the server's position read the page again.
func (f *Feed) ackHandled(ctx context.Context, cursor string) error {
	ackCtx := context.WithoutCancel(ctx)
	return f.retry(ctx, "ack", func() error { return f.Ack(ackCtx, cursor) })
}

// Fetch reads one page after cursor ("" for the server's acknowledged
// position), holding the read up to wait (0 to MaxFeedWait) when nothing
// follows the cursor. It neither retries nor moves Cursor. Its errors are
// ctx's, a *CursorExpiredError and a *FeedError.
func (f *Feed) Fetch(ctx context.Context, cursor string, wait time.Duration) (FeedPage, error) {
	if wait < 0 || wait > MaxFeedWait {
		return FeedPage{}, fmt.Errorf("receiver: feed wait %v is outside 0..%v", wait, MaxFeedWait)
	}
	q := url.Values{"limit": {strconv.Itoa(f.cfg.Limit)}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var page FeedPage
	if err := f.do(ctx, http.MethodGet, f.url+"?"+q.Encode(), nil, wait, &page); err != nil {
		var fe *FeedError
		if errors.As(err, &fe) && fe.StatusCode == http.StatusGone {
			return FeedPage{}, &CursorExpiredError{Cursor: cursor, Oldest: fe.oldest}
		}
		return FeedPage{}, err
	}
	if page.NextCursor == "" {
		return FeedPage{}, &FeedError{StatusCode: http.StatusOK, Message: "the answer has no next_cursor"}
	}
	return page, nil
}

// Ack stores cursor as the endpoint's position on the server, where a
// reader without a cursor starts. An older cursor than the stored one
// changes nothing. It does not retry. Its errors are ctx's and a *FeedError.
func (f *Feed) Ack(ctx context.Context, cursor string) error {
	body, err := json.Marshal(struct {
		Cursor string `json:"cursor"`
	}{cursor})
	if err != nil {
		return err
	}
	return f.do(ctx, http.MethodPost, f.url+"/ack", body, 0, nil)
}

// do sends one request with the consumer token and decodes a 2xx answer
// into out (unless nil). The request may take wait plus RequestTimeout.
func (f *Feed) do(ctx context.Context, method, u string, body []byte, wait time.Duration, out any) error {
	reqCtx, cancel := context.WithTimeout(ctx, wait+f.cfg.RequestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(reqCtx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.cfg.Token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "laneway-receiver")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.cfg.HTTPClient.Do(req)
	if err != nil {
		return f.unreachable(ctx, method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxFeedPageBytes+1))
	switch {
	case err != nil:
		return f.unreachable(ctx, method, err)
	case len(raw) > maxFeedPageBytes:
		return &FeedError{StatusCode: resp.StatusCode, Message: "the answer is over " + strconv.Itoa(maxFeedPageBytes) + " bytes"}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return apiFeedError(f.cfg.EndpointID, resp, raw)
	case out == nil:
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return &FeedError{StatusCode: resp.StatusCode, Message: "the answer is not the feed's JSON: " + err.Error()}
	}
	return nil
}

// unreachable is the error of a request that got no complete answer:
// ctx's own error when ctx ended, so that callers can compare it.
func (f *Feed) unreachable(ctx context.Context, method string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the URL
	}
	return &FeedError{Message: method + " " + f.url + ": " + err.Error(), Err: err}
}

// retry calls op until it succeeds, fails in a way retrying cannot fix, or
// ctx ends.
func (f *Feed) retry(ctx context.Context, what string, op func() error) error {
	for attempt := 0; ; attempt++ {
		err := op()
		var fe *FeedError
		if err == nil || !errors.As(err, &fe) || !fe.Transient() {
			return err
		}
		pause := f.backoff(attempt, fe.RetryAfter)
		f.cfg.Logger.WarnContext(ctx, "laneway feed: "+what+" failed, retrying",
			slog.String("endpoint_id", f.cfg.EndpointID), slog.String("error", err.Error()), slog.Duration("retry_in", pause))
		if err := sleep(ctx, pause); err != nil {
			return err
		}
	}
}

// backoff is the pause before retry number attempt+1: the server's
// Retry-After when it gave one, else BackoffMin doubled per attempt, capped
// at BackoffMax, of which a random half is taken off ("equal jitter").
func (f *Feed) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, f.cfg.BackoffMax)
	}
	d := f.cfg.BackoffMin
	for i := 0; i < attempt && d < f.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, f.cfg.BackoffMax)
	return d/2 + rand.N(d/2+1)
}

// sleep waits for d, or returns ctx's error when ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
