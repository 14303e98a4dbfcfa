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
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/laneway/laneway/signing"
	"github.com/laneway/laneway/ssrf"
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

const (
	// drainLimit is how much of a response body is read past what we keep,
	// so that a short body reaches EOF and its connection can be reused. A
	// longer body costs a new connection, which is cheaper than reading it.
	drainLimit = 4 << 10
	// maxResponseHeaderBytes stops an endpoint from making us buffer
	// megabytes of headers.
	maxResponseHeaderBytes = 64 << 10
)

func (c Config) withDefaults() (Config, error) {
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxErrorBody <= 0 {
		c.MaxErrorBody = DefaultMaxErrorBody
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.MaxIdleConnsPerHost <= 0 {
		c.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if c.IdleConnTimeout <= 0 {
		c.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
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
type Sender struct {
	cfg       Config
	transport *http.Transport
	client    *http.Client
}

// NewSender builds a Sender.
func NewSender(cfg Config) (*Sender, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		// No Proxy: a proxy would resolve the name itself, past the guard.
		DialContext:            cfg.Guard.DialContext,
		TLSClientConfig:        cfg.TLSClientConfig,
		TLSHandshakeTimeout:    cfg.Timeout,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        cfg.IdleConnTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// We never read bodies beyond a cap, so compression only adds work
		// (and a decompression bomb to think about).
		DisableCompression: true,
	}
	client := &http.Client{
		Transport: transport,
		// A 3xx is the receiver's answer, and a failure: following it would
		// send the signed payload somewhere the customer did not configure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Sender{cfg: cfg, transport: transport, client: client}, nil
}

// Close closes idle connections. In-flight attempts are not interrupted.
func (s *Sender) Close() { s.transport.CloseIdleConnections() }

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
	// *RequestError, *FeedError or *CanceledError. Classify turns it into an
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
	ctx, cancel := context.WithTimeout(parent, s.cfg.Timeout)
	defer cancel()
	httpReq, err := s.newRequest(ctx, r)
	if err != nil {
		return Result{Err: err}
	}
	resp, err := s.client.Do(httpReq)
	if err != nil {
		return Result{Err: s.roundTripError(parent, ctx, err)}
	}
	defer resp.Body.Close() // runs before cancel: the body is read under the deadline
	return s.readResponse(resp)
}

func (s *Sender) newRequest(ctx context.Context, r Request) (*http.Request, error) {
	if r.Signer == nil {
		return nil, &RequestError{Reason: "no signing secrets"}
	}
	if r.MsgID == "" {
		return nil, &RequestError{Reason: "no message id"}
	}
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		// err quotes the URL, which may carry a token: keep it out.
		return nil, &RequestError{Reason: "invalid URL"}
	}
	if u := httpReq.URL; (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &RequestError{Reason: "URL must be absolute http or https"}
	}
	ts := r.Timestamp
	if ts.IsZero() {
		ts = s.cfg.Now()
	}
	h := httpReq.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", s.cfg.UserAgent)
	r.Signer.SetHeaders(h, r.MsgID, ts, r.Body)
	// The key is the webhook-id, for receivers that dedupe by this header.
	// It is set under its lower-case name on purpose: net/http treats a
	// request carrying "Idempotency-Key" (canonical) as replayable and
	// resends it at once whenever a reused connection fails after the
	// request was written, once per pooled connection, an immediate retry
	// the contract rules out (the receiver may have acted on it). Header
	// names are case-insensitive on the wire, so receivers see the same
	// header, and net/http still resends the safe case: a stale pooled
	// connection to which nothing was written.
	h["idempotency-key"] = []string{r.MsgID}
	return httpReq, nil
}

// roundTripError turns a client error into one of the typed errors. ctx is
// the attempt's context, parent the caller's.
func (s *Sender) roundTripError(parent, ctx context.Context, err error) error {
	var blocked *ssrf.BlockedError
	if errors.As(err, &blocked) {
		return blocked
	}
	if parent.Err() != nil && !errors.Is(parent.Err(), context.DeadlineExceeded) {
		return &CanceledError{Cause: context.Cause(parent)}
	}
	inner := withoutURL(err)
	var netErr net.Error
	if ctx.Err() != nil || (errors.As(inner, &netErr) && netErr.Timeout()) {
		return &TimeoutError{After: s.cfg.Timeout}
	}
	return &TransportError{Err: inner}
}

// withoutURL strips the *url.Error layers the client adds: they quote the
// URL, and with it any token in its query.
func withoutURL(err error) error {
	for {
		var ue *url.Error
		if !errors.As(err, &ue) {
			return err
		}
		err = ue.Err
	}
}

func (s *Sender) readResponse(resp *http.Response) Result {
	res := Result{StatusCode: resp.StatusCode}
	switch code := resp.StatusCode; {
	case code < 200:
		// Only 101 Switching Protocols reaches us (net/http consumes the
		// other 1xx), and with an Upgrade header its body is the raw
		// connection, which the attempt's deadline no longer covers: a
		// receiver that upgrades and then goes quiet would hold the attempt
		// forever. No 1xx has a body worth keeping, so it is not read.
		res.Err = &StatusError{Code: code}
		return res
	case code >= 200 && code < 300:
		drain(resp.Body)
		return res
	case code >= 300 && code < 400:
		drain(resp.Body)
		res.Err = &RedirectError{Code: code, Location: capString(resp.Header.Get("Location"), s.cfg.MaxErrorBody)}
	default:
		body := readCapped(resp.Body, s.cfg.MaxErrorBody)
		drain(resp.Body)
		res.Err = &StatusError{Code: code, Body: body}
	}
	if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), s.cfg.Now()); ok {
		res.RetryAfter = d
	}
	return res
}

// readCapped reads at most limit bytes. A read error (the deadline, a reset)
// just ends the body: the status code already decided the outcome.
func readCapped(r io.Reader, limit int) string {
	buf := make([]byte, limit)
	n, _ := io.ReadFull(r, buf)
	if n == limit {
		return string(trimPartialRune(buf[:n]))
	}
	return string(buf[:n])
}

func drain(r io.Reader) { _, _ = io.CopyN(io.Discard, r, drainLimit) }

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
