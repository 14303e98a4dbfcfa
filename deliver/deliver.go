// Package deliver makes one HTTP delivery attempt of a webhook and says what
// its outcome means for the delivery: delivered, retry later, dead, or
// endpoint gone. It also holds the retry schedule (RetryPolicy).
//
// A Sender owns an HTTP client that dials only through an ssrf.Guard, never
// follows redirects, bounds the whole attempt with one deadline and reads at
// most a small part of the response body. Everything that is not a 2xx comes
// back as a typed error whose text is safe to log and to store as a dead
// letter's last error: it never contains the URL, the payload or a secret.
package deliver

import (
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
	"github.com/laneway/laneway/internal/security/ssrf"
	"github.com/laneway/laneway/signing"
)

// Config configures a Sender.
type Config struct {
	// Timeout bounds the whole attempt: DNS, connect, TLS, writing the
	// request and receiving the response headers (and the capped body read
	// after them). Default: 5 s, the delivery contract.
	Timeout time.Duration

	// MaxErrorBody is how much of a non-2xx response body is kept for the
	// error (and so for last_error). Default: 1024 bytes.
	MaxErrorBody int

	// Guard checks and dials target addresses. Default: a guard built from
	// AllowTargets.
	Guard *ssrf.Guard

	// AllowTargets opens exceptions in the default guard (ignored when Guard
	// is set). Default: none, so private and loopback targets are refused.
	AllowTargets []netip.Prefix

	// UserAgent is sent with every request. Default: "Laneway/1".
	UserAgent string

	// MaxIdleConnsPerHost is how many keep-alive connections to one host are
	// kept for reuse. Default: 64, above the usual per-endpoint concurrency
	// so that a busy endpoint does not reconnect for every delivery.
	MaxIdleConnsPerHost int

	// IdleConnTimeout closes keep-alive connections unused this long.
	// Default: 90 s.
	IdleConnTimeout time.Duration

	// TLSClientConfig configures TLS. Default: nil, Go's defaults and the
	// system roots.
	TLSClientConfig *tls.Config

	// Logger receives one debug line per attempt. Default: discards.
	Logger *slog.Logger

	// Now is the clock for durations, Retry-After dates and unset request
	// timestamps. Default: time.Now.
	Now func() time.Time
}

// Defaults for Config.
const (
	DefaultTimeout             = 5 * time.Second
	DefaultMaxErrorBody        = 1024
	DefaultUserAgent           = "Laneway/1"
	DefaultMaxIdleConnsPerHost = 64
	DefaultIdleConnTimeout     = 90 * time.Second
)

// drainLimit is how much of a response body is read past what we keep, so
// that a short body reaches its end and its connection can be reused. A
// longer body costs a new connection, which is cheaper than reading it.
const drainLimit = 4 << 10

func (c Config) withDefaults() (Config, error) {
	c.Timeout = valutil.PositiveOr(c.Timeout, DefaultTimeout)
	c.MaxErrorBody = valutil.PositiveOr(c.MaxErrorBody, DefaultMaxErrorBody)
	c.UserAgent = cmp.Or(c.UserAgent, DefaultUserAgent)
	c.MaxIdleConnsPerHost = valutil.PositiveOr(c.MaxIdleConnsPerHost, DefaultMaxIdleConnsPerHost)
	c.IdleConnTimeout = valutil.PositiveOr(c.IdleConnTimeout, DefaultIdleConnTimeout)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Now = timing.Clock(c.Now)
	if c.Guard == nil {
		g, err := ssrf.NewGuard(ssrf.Config{Allow: c.AllowTargets})
		if err != nil {
			return c, err
		}
		c.Guard = g
	}
	return c, nil
}

// Sender makes delivery attempts. It is safe for concurrent use; build one
// per process with NewSender so that connections are pooled.
//
// It speaks HTTP/1.1 itself rather than through net/http: an attempt writes
// its request and reads the response on its own goroutine, with one
// deadline on the connection, where net/http's transport hands every
// request to two goroutines of the connection and back (the largest part
// of a delivery's CPU, measured in docs/benchmarks.md). HTTP/2 is not
// offered: a webhook is one small request per delivery, and per-endpoint
// concurrency maps onto connections one to one.
type Sender struct {
	cfg     Config
	targets targetCache
	pool    *connPool
	heads   sync.Pool // *[]byte request buffers
}

// NewSender builds a Sender.
func NewSender(cfg Config) (*Sender, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if !validHeaderValue(cfg.UserAgent) {
		return nil, errors.New("deliver: UserAgent holds control characters")
	}
	base := &tls.Config{}
	if cfg.TLSClientConfig != nil {
		base = cfg.TLSClientConfig.Clone()
	}
	base.NextProtos = []string{"http/1.1"}
	if base.ClientSessionCache == nil {
		// Resumed sessions make a reconnect to a busy endpoint cheap.
		base.ClientSessionCache = tls.NewLRUClientSessionCache(0)
	}
	s := &Sender{cfg: cfg, targets: targetCache{base: base}, pool: newConnPool(cfg.MaxIdleConnsPerHost, cfg.IdleConnTimeout)}
	s.heads.New = func() any { b := make([]byte, 0, 1024); return &b }
	return s, nil
}

// Close closes idle connections. In-flight attempts are not interrupted;
// their connections are closed when they end.
func (s *Sender) Close() { s.pool.close() }

// Request is one delivery attempt.
type Request struct {
	URL       string          // the endpoint's http(s) URL
	MsgID     string          // webhook-id: the event id, stable across attempts
	Timestamp time.Time       // webhook-timestamp; zero means Config.Now()
	Body      []byte          // the JSON payload
	Signer    *signing.Signer // the endpoint's current secrets
}

// Result is what one attempt came to.
type Result struct {
	// Err is nil on a 2xx and a typed error otherwise: *StatusError,
	// *RedirectError, *TimeoutError, *TransportError, *ssrf.BlockedError,
	// *RequestError, *MessageError, *FeedError or *CanceledError. Classify turns it into an
	// Outcome.
	Err error
	// StatusCode is the response status, 0 if there was no response.
	StatusCode int
	// Duration is the attempt's wall time.
	Duration time.Duration
	// RetryAfter is the delay a non-2xx response asked for in Retry-After,
	// 0 if none. Pass it to RetryPolicy.Delay.
	RetryAfter time.Duration
}

// Outcome classifies r.Err.
func (r Result) Outcome() Outcome { return Classify(r.Err) }

// Send makes one attempt: a signed JSON POST bounded by Config.Timeout (or
// ctx, if it ends sooner).
func (s *Sender) Send(ctx context.Context, req Request) Result {
	start := s.cfg.Now()
	res := s.attempt(ctx, req)
	res.Duration = s.cfg.Now().Sub(start)
	s.logAttempt(ctx, req, res)
	return res
}

func (s *Sender) attempt(parent context.Context, r Request) Result {
	if err := checkRequest(r); err != nil {
		return Result{Err: err}
	}
	t, err := s.targets.get(r.URL)
	if err != nil {
		return Result{Err: err}
	}
	if parent.Err() != nil {
		return Result{Err: s.exchangeError(parent, parent.Err())}
	}
	deadline := time.Now().Add(s.cfg.Timeout)
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = s.cfg.Now()
	}
	buf := s.heads.Get().(*[]byte)
	defer s.heads.Put(buf)
	*buf = s.appendHead((*buf)[:0], t, r, ts)
	head, body := *buf, r.Body
	if len(body) <= inlineBodyLimit {
		*buf = append(*buf, body...)
		head, body = *buf, nil
	}
	for pooled := true; ; pooled = false {
		c, err := s.connect(parent, t, deadline, pooled)
		if err != nil {
			return Result{Err: s.exchangeError(parent, err)}
		}
		res, unsent := s.exchange(parent, c, head, body, deadline)
		if !unsent {
			return res
		}
		// A reused connection took none of the request (the server had
		// closed it): nothing was sent, so a fresh connection may carry it.
	}
}

func checkRequest(r Request) error {
	switch {
	case r.Signer == nil:
		return &RequestError{Reason: "no signing secrets"}
	case r.MsgID == "":
		return &MessageError{Reason: "no message id"}
	case !validHeaderValue(r.MsgID):
		return &MessageError{Reason: "message id holds control characters"}
	}
	return nil
}

// connect returns an idle connection to t (when pooled) or dials a new one
// through the guard.
func (s *Sender) connect(ctx context.Context, t *target, deadline time.Time, pooled bool) (*conn, error) {
	if pooled {
		if c := s.pool.get(t.poolID, time.Now()); c != nil {
			return c, nil
		}
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	nc, err := s.cfg.Guard.DialContext(dctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	if t.tls == nil {
		return newConn(nc, nil, t.poolID), nil
	}
	rec := &recordConn{Conn: nc}
	tc := tls.Client(rec, t.tls)
	if err := tc.HandshakeContext(dctx); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return newConn(tc, rec, t.poolID), nil
}

// exchange writes the request on c and reads the response; c goes back to
// the pool if it can carry another request, and is closed otherwise.
// unsent reports a reused connection that took no byte of the request.
func (s *Sender) exchange(parent context.Context, c *conn, head, body []byte, deadline time.Time) (res Result, unsent bool) {
	res, unsent, reusable := s.exchangeOn(parent, c, head, body, deadline)
	if reusable {
		s.pool.put(c, time.Now())
	} else {
		c.close()
	}
	return res, unsent
}

func (s *Sender) exchangeOn(parent context.Context, c *conn, head, body []byte, deadline time.Time) (res Result, unsent, reusable bool) {
	if err := setDeadlines(c.nc, deadline, len(body) > 0); err != nil {
		return Result{Err: &TransportError{Err: err}}, false, false
	}
	stopWatch := s.watch(parent, c)
	n, werr := writeRequest(c, head, body)
	if werr != nil && n == 0 && c.reused && parent.Err() == nil {
		stopWatch()
		return Result{}, true, false
	}
	// After a failed write the server may still have answered (a 413 for
	// a body it would not take, then a close, or then no more reading
	// until the write ran out of time): its answer decides.
	h, err := readHead(c.br)
	if err != nil {
		stopWatch()
		if werr != nil {
			err = fmt.Errorf("writing the request: %w", werr)
		}
		return Result{Err: s.exchangeError(parent, describeReadError(err))}, false, false
	}
	read := s.resultOf(c.br, h)
	// A watch that fired may have cut the connection: it cannot be reused.
	// Nor can one holding bytes past the response, in the bufio reader or
	// (checked last, as it costs most) inside tls.Conn: they would be read
	// as the next request's answer.
	watched := stopWatch()
	return read.Result, false, watched && read.complete && werr == nil && !h.close && c.br.Buffered() == 0 && !c.tlsPending()
}

// writeShare is the part of an attempt's remaining time that writing a
// large body may take, in tenths. A receiver that answers early and stops
// reading (a 413 for a body too large, the connection kept open) leaves the
// write stuck on full socket buffers; its answer is already there, and the
// last tenth of the time is left to read it. Only a receiver that takes
// over nine tenths of the time to read a request and still answers in time
// loses by it.
const writeShare = 9

// setDeadlines gives the exchange on nc its deadline and, when the body is
// written apart from the head (larger than inlineBodyLimit), the write its
// share of the time before it. A request that rides in one write of at
// most inlineBodyLimit and its head goes into the socket buffers at once,
// given the receive window of any usual receiver, so it keeps one deadline:
// a second one costs a second runtime timer, about 1 % of an attempt on a
// kept connection.
func setDeadlines(nc net.Conn, deadline time.Time, bodyApart bool) error {
	if err := nc.SetDeadline(deadline); err != nil || !bodyApart {
		return err
	}
	return nc.SetWriteDeadline(deadline.Add(-time.Until(deadline) * (10 - writeShare) / 10))
}

// watch ends c's exchange when parent is canceled (the deadline covers the
// attempt's own limit). The returned stop reports whether the watch had not
// fired, so that c is still fit for reuse.
func (s *Sender) watch(parent context.Context, c *conn) (stop func() bool) {
	if parent.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(parent, c.interrupt)
}

// writeRequest writes head and body (body empty when it rode in head).
func writeRequest(c *conn, head, body []byte) (int64, error) {
	if len(body) == 0 {
		n, err := c.nc.Write(head)
		return int64(n), err
	}
	bufs := net.Buffers{head, body}
	return bufs.WriteTo(c.nc)
}

// exchangeError turns a dial, TLS, write or read error into one of the
// typed errors.
func (s *Sender) exchangeError(parent context.Context, err error) error {
	var blocked *ssrf.BlockedError
	if errors.As(err, &blocked) {
		return blocked
	}
	if parent.Err() != nil && !errors.Is(parent.Err(), context.DeadlineExceeded) {
		return &CanceledError{Cause: context.Cause(parent)}
	}
	var netErr net.Error
	if parent.Err() != nil || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return &TimeoutError{After: s.cfg.Timeout}
	}
	return &TransportError{Err: err}
}

// readResult is an attempt's result and whether the response was read to
// its end.
type readResult struct {
	Result
	complete bool
}

func (s *Sender) resultOf(br *bufio.Reader, h respHead) readResult {
	res := readResult{Result: Result{StatusCode: h.code}}
	switch code := h.code; {
	case code < 200:
		// 101 Switching Protocols: what follows is another protocol's,
		// which the attempt's deadline would no longer cover. No 1xx has a
		// body worth keeping, so nothing is read and the connection goes.
		res.Err = &StatusError{Code: code}
		return res
	case code < 300:
		_, res.complete = readBody(br, h, 0)
		return res
	case code < 400:
		_, res.complete = readBody(br, h, 0)
		res.Err = &RedirectError{Code: code, Location: capString(h.location, s.cfg.MaxErrorBody)}
	default:
		var body string
		body, res.complete = readBody(br, h, s.cfg.MaxErrorBody)
		res.Err = &StatusError{Code: code, Body: body}
	}
	if d, ok := ParseRetryAfter(h.retryAfter, s.cfg.Now()); ok {
		res.RetryAfter = d
	}
	return res
}

// readCapped reads at most limit bytes and returns them and how many it
// read. A read error (the deadline, a reset) just ends the body: the status
// code already decided the outcome.
func readCapped(r io.Reader, limit int) (string, int) {
	buf := make([]byte, limit)
	n, _ := io.ReadFull(r, buf)
	if n == limit {
		return string(trimPartialRune(buf[:n])), n
	}
	return string(buf[:n]), n
}

func capString(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	return string(trimPartialRune([]byte(s[:limit])))
}

// trimPartialRune drops a UTF-8 sequence cut short by the cap, so a capped
// text body does not end in a broken character.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

func (s *Sender) logAttempt(ctx context.Context, r Request, res Result) {
	if !s.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	host := ""
	if u, err := url.Parse(r.URL); err == nil {
		host = u.Host // never the path or query: they may carry tokens
	}
	attrs := []slog.Attr{
		slog.String("msg_id", r.MsgID),
		slog.String("host", host),
		slog.String("outcome", res.Outcome().String()),
		slog.Int("status", res.StatusCode),
		slog.Duration("duration", res.Duration),
	}
	if res.Err != nil {
		attrs = append(attrs, slog.String("error", res.Err.Error()))
	}
	if res.RetryAfter > 0 {
		attrs = append(attrs, slog.Duration("retry_after", res.RetryAfter))
	}
	s.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "delivery attempt", attrs...)
}
