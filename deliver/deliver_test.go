package deliver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/security/ssrf"
	"github.com/laneway/laneway/signing"
)

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}

func testSecret(b byte) string {
	return signing.SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

func newSender(t testing.TB, cfg deliver.Config) *deliver.Sender {
	t.Helper()
	if cfg.Guard == nil && cfg.AllowTargets == nil {
		cfg.AllowTargets = loopback
	}
	s, err := deliver.NewSender(cfg)
	if err != nil {
		t.Fatalf("NewSender: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// newRequest signs with two secrets, as during a rotation.
func newRequest(t testing.TB, url string) deliver.Request {
	t.Helper()
	signer, err := signing.NewSigner([]string{testSecret(1), testSecret(2)})
	if err != nil {
		t.Fatal(err)
	}
	return deliver.Request{
		URL:       url,
		MsgID:     "evt_0001",
		Timestamp: time.Now(), // the official library checks against the real clock
		Body:      []byte(`{"type":"order.updated","data":{"total":42}}`),
		Signer:    signer,
	}
}

func newServer(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// releaseAtCleanup closes release when the test ends. Call it after starting
// the server whose handlers wait on release: cleanups run last-in first-out,
// so the handlers return before the server's Close waits for them.
func releaseAtCleanup(t *testing.T, release chan struct{}) {
	t.Cleanup(func() { close(release) })
}

func asError[E error](t *testing.T, err error) E {
	t.Helper()
	var target E
	if !errors.As(err, &target) {
		t.Fatalf("err = %v (%T), want %T", err, err, target)
	}
	return target
}

func TestSendDeliveredAndVerifiedByOfficialLibrary(t *testing.T) {
	type received struct {
		method string
		header http.Header
		body   []byte
	}
	got := make(chan received, 1)
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- received{r.Method, r.Header.Clone(), body}
		w.WriteHeader(http.StatusAccepted)
	})
	req := newRequest(t, srv.URL+"/hooks")
	res := newSender(t, deliver.Config{}).Send(t.Context(), req)

	if res.Err != nil || res.StatusCode != http.StatusAccepted || res.Outcome() != deliver.Delivered {
		t.Fatalf("Send = %+v, want a delivered 202", res)
	}
	if res.Duration <= 0 {
		t.Errorf("Duration = %v, want > 0", res.Duration)
	}
	r := <-got
	if r.method != http.MethodPost || !bytes.Equal(r.body, req.Body) {
		t.Fatalf("server got %s %q, want POST %q", r.method, r.body, req.Body)
	}
	if ct, ua := r.header.Get("Content-Type"), r.header.Get("User-Agent"); ct != "application/json" || ua != "Laneway/1" {
		t.Errorf("Content-Type %q, User-Agent %q", ct, ua)
	}
	if id := r.header.Get("webhook-id"); id != req.MsgID {
		t.Errorf("webhook-id = %q, want %q", id, req.MsgID)
	}
	if key := r.header.Get("Idempotency-Key"); key != req.MsgID {
		t.Errorf("Idempotency-Key = %q, want the webhook-id %q", key, req.MsgID)
	}
	for i, secret := range []string{testSecret(1), testSecret(2)} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(r.body, r.header); err != nil {
			t.Errorf("official library rejects the delivery with secret #%d: %v", i, err)
		}
	}
}

func TestSendIPv6Loopback(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	if res := newSender(t, deliver.Config{}).Send(t.Context(), newRequest(t, srv.URL)); res.Err != nil {
		t.Fatalf("Send to %s with ::1/128 allowed: %v", srv.URL, res.Err)
	}
	res := newSender(t, deliver.Config{AllowTargets: loopback[:1]}).Send(t.Context(), newRequest(t, srv.URL))
	asError[*ssrf.BlockedError](t, res.Err)
}

func TestSendStatusErrorKeepsCappedBody(t *testing.T) {
	// A recognisable body longer than any cap, so a wrong slice shows.
	var long strings.Builder
	for i := 0; long.Len() < 5000; i++ {
		long.WriteString(strconv.Itoa(i) + ",")
	}
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, long.String())
	})
	for _, tc := range []struct {
		maxErrorBody, wantLen int
	}{{0, 1024}, {10, 10}} {
		res := newSender(t, deliver.Config{MaxErrorBody: tc.maxErrorBody}).Send(t.Context(), newRequest(t, srv.URL))
		se := asError[*deliver.StatusError](t, res.Err)
		if se.Code != 500 || res.StatusCode != 500 || res.Outcome() != deliver.Retry {
			t.Errorf("got %+v, %v; want a 500 to retry", se, res.Outcome())
		}
		if se.Body != long.String()[:tc.wantLen] {
			t.Errorf("MaxErrorBody %d: Body = %q (len %d), want the first %d bytes", tc.maxErrorBody, se.Body, len(se.Body), tc.wantLen)
		}
	}
}

func TestSendCapDoesNotSplitRunes(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "a"+strings.Repeat("é", 10)) // é is 2 bytes: byte 10 cuts one
	})
	res := newSender(t, deliver.Config{MaxErrorBody: 10}).Send(t.Context(), newRequest(t, srv.URL))
	se := asError[*deliver.StatusError](t, res.Err)
	if want := "a" + strings.Repeat("é", 4); se.Body != want {
		t.Fatalf("Body = %q, want %q", se.Body, want)
	}
}

func TestSendTimeoutWhenServerHangs(t *testing.T) {
	release := make(chan struct{})
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // lets the server notice the client hanging up
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	releaseAtCleanup(t, release)
	const timeout = 200 * time.Millisecond
	res := newSender(t, deliver.Config{Timeout: timeout}).Send(t.Context(), newRequest(t, srv.URL))
	te := asError[*deliver.TimeoutError](t, res.Err)
	if te.After != timeout || res.Outcome() != deliver.Retry || res.StatusCode != 0 {
		t.Errorf("got %+v status %d outcome %v", te, res.StatusCode, res.Outcome())
	}
	if res.Duration < timeout || res.Duration > timeout+2*time.Second {
		t.Errorf("Duration = %v, want just over %v", res.Duration, timeout)
	}
}

// A server that trickles its headers a byte at a time defeats per-read
// timeouts; the attempt's single deadline must still cut it.
func TestSendTimeoutCutsTricklingHeaders(t *testing.T) {
	release := make(chan struct{})
	var trickled atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		buf.WriteString("HTTP/1.1 200 OK\r\nX-Slow: ")
		buf.Flush()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-release:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte("a")); err != nil {
				return
			}
			trickled.Add(1)
		}
	})
	releaseAtCleanup(t, release)
	const timeout = 300 * time.Millisecond
	res := newSender(t, deliver.Config{Timeout: timeout}).Send(t.Context(), newRequest(t, srv.URL))
	asError[*deliver.TimeoutError](t, res.Err)
	if res.Duration > timeout+2*time.Second {
		t.Errorf("Duration = %v: the trickle was not cut at %v", res.Duration, timeout)
	}
	if trickled.Load() == 0 {
		t.Error("the server never trickled a byte: the test did not exercise a slow header")
	}
}

func TestSendConnectionResetIsTransportError(t *testing.T) {
	var hits atomic.Int64
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0) // close with RST
		conn.Close()
	})
	res := newSender(t, deliver.Config{}).Send(t.Context(), newRequest(t, srv.URL))
	asError[*deliver.TransportError](t, res.Err)
	if res.Outcome() != deliver.Retry {
		t.Errorf("Outcome = %v, want retry", res.Outcome())
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("server saw %d requests, want 1: a POST must not be replayed by the transport", n)
	}
}

func TestSendErrorsLeakNoSecrets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused

	const token, payload = "TOKEN-abc123", "PAYLOAD-xyz789"
	req := newRequest(t, "http://"+addr+"/hook?token="+token)
	req.Body = []byte(`{"card":"` + payload + `"}`)
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	res := newSender(t, deliver.Config{Logger: logger}).Send(t.Context(), req)

	te := asError[*deliver.TransportError](t, res.Err)
	if !errors.Is(te, syscall.ECONNREFUSED) {
		t.Errorf("err = %v, want connection refused", te)
	}
	secretKey := strings.TrimPrefix(testSecret(1), signing.SecretPrefix)
	for _, leak := range []string{token, payload, secretKey} {
		if strings.Contains(res.Err.Error(), leak) {
			t.Errorf("error %q contains %q", res.Err, leak)
		}
		if strings.Contains(logs.String(), leak) {
			t.Errorf("log %q contains %q", logs.String(), leak)
		}
	}
	if !strings.Contains(logs.String(), `"outcome":"retry"`) || !strings.Contains(logs.String(), addr) {
		t.Errorf("log line lacks outcome or host: %s", logs.String())
	}
}

func TestSendRedirectIsNotFollowed(t *testing.T) {
	for _, code := range []int{301, 302, 303, 307, 308} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			var followed atomic.Int64
			mux := http.NewServeMux()
			mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/elsewhere", code)
			})
			mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { followed.Add(1) })
			srv := newServer(t, mux.ServeHTTP)

			res := newSender(t, deliver.Config{}).Send(t.Context(), newRequest(t, srv.URL+"/hook"))
			re := asError[*deliver.RedirectError](t, res.Err)
			if re.Code != code || re.Location != "/elsewhere" || res.Outcome() != deliver.Retry {
				t.Errorf("got %+v outcome %v, want code %d to /elsewhere, retry", re, res.Outcome(), code)
			}
			if n := followed.Load(); n != 0 {
				t.Errorf("redirect target requested %d times", n)
			}
		})
	}
}

func TestSendStatusOutcomes(t *testing.T) {
	tests := []struct {
		code int
		want deliver.Outcome
	}{
		{200, deliver.Delivered},
		{204, deliver.Delivered},
		{299, deliver.Delivered},
		{400, deliver.Retry},
		{401, deliver.Retry},
		{404, deliver.Retry},
		{410, deliver.Gone},
		{413, deliver.Dead},
		{429, deliver.Retry},
		{500, deliver.Retry},
		{502, deliver.Retry},
	}
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.URL.Query().Get("code"))
		w.WriteHeader(code)
	})
	s := newSender(t, deliver.Config{})
	for _, tc := range tests {
		res := s.Send(t.Context(), newRequest(t, srv.URL+"?code="+strconv.Itoa(tc.code)))
		if res.StatusCode != tc.code || res.Outcome() != tc.want {
			t.Errorf("HTTP %d: status %d outcome %v (err %v), want %v", tc.code, res.StatusCode, res.Outcome(), res.Err, tc.want)
		}
	}
}

func TestSendRetryAfter(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name       string
		code       int
		retryAfter string
		want       time.Duration
	}{
		{"429 delta-seconds", 429, "120", 120 * time.Second},
		{"503 HTTP-date", 503, now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"503 garbage", 503, "soon", 0},
		{"2xx ignored", 200, "120", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", tc.retryAfter)
				w.WriteHeader(tc.code)
			})
			s := newSender(t, deliver.Config{Now: func() time.Time { return now }})
			res := s.Send(t.Context(), newRequest(t, srv.URL))
			if res.StatusCode != tc.code || res.RetryAfter != tc.want {
				t.Fatalf("status %d RetryAfter %v, want %d and %v", res.StatusCode, res.RetryAfter, tc.code, tc.want)
			}
		})
	}
}

// The receiver offers 10 MB; we must take about 1 KiB and hang up, not read
// it all. Small socket buffers on both sides keep the kernel from absorbing
// the body for us, so the bytes the server managed to write measure what
// was read.
func TestSendDoesNotReadLargeBody(t *testing.T) {
	const size = 10 << 20
	written := make(chan int64, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(http.StatusInternalServerError)
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		var n int64
		for n < size {
			m, err := w.Write(chunk)
			n += int64(m)
			if err != nil {
				break
			}
		}
		written <- n
	}))
	srv.Config.ConnState = func(c net.Conn, state http.ConnState) {
		if state == http.StateNew {
			c.(*net.TCPConn).SetWriteBuffer(16 << 10)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	dialer := &net.Dialer{}
	guard, err := ssrf.NewGuard(ssrf.Config{Allow: loopback, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err == nil {
			c.(*net.TCPConn).SetReadBuffer(16 << 10)
		}
		return c, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	res := newSender(t, deliver.Config{Guard: guard}).Send(t.Context(), newRequest(t, srv.URL))
	se := asError[*deliver.StatusError](t, res.Err)
	if len(se.Body) != 1024 {
		t.Errorf("kept %d bytes of the body, want 1024", len(se.Body))
	}
	select {
	case n := <-written:
		if n >= 1<<20 {
			t.Errorf("server wrote %d of %d bytes before we hung up: the body was read", n, size)
		}
		t.Logf("server wrote %d bytes", n)
	case <-time.After(10 * time.Second):
		t.Fatal("server still writing 10 s after Send returned: the connection was not closed")
	}
}

func TestSendRefusesLoopbackUnlessAllowed(t *testing.T) {
	var hits atomic.Int64
	srv := newServer(t, func(http.ResponseWriter, *http.Request) { hits.Add(1) })
	res := newSender(t, deliver.Config{AllowTargets: []netip.Prefix{}}).Send(t.Context(), newRequest(t, srv.URL))
	be := asError[*ssrf.BlockedError](t, res.Err)
	if be.Addr != netip.MustParseAddr("127.0.0.1") || res.Outcome() != deliver.Retry || res.StatusCode != 0 {
		t.Errorf("got %+v outcome %v status %d", be, res.Outcome(), res.StatusCode)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("server reached %d times", n)
	}
}

func TestSendReusesConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Both bodies exceed what is kept (the 2xx keeps none, the error
		// 1 KiB) but fit in what is drained, so the connection is reusable.
		body := strings.Repeat("b", 2000)
		if r.URL.Query().Has("fail") {
			w.WriteHeader(http.StatusInternalServerError)
		}
		io.WriteString(w, body)
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s := newSender(t, deliver.Config{})
	for _, q := range []string{"", "?fail", "", "?fail", ""} {
		if res := s.Send(t.Context(), newRequest(t, srv.URL+q)); res.StatusCode == 0 {
			t.Fatalf("Send%s: %v", q, res.Err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for 5 sequential deliveries, want 1 (keep-alive)", n)
	}
}

func TestSendRequestErrors(t *testing.T) {
	var hits atomic.Int64
	srv := newServer(t, func(http.ResponseWriter, *http.Request) { hits.Add(1) })
	tests := []struct {
		name   string
		modify func(*deliver.Request)
	}{
		{"no signer", func(r *deliver.Request) { r.Signer = nil }},
		{"unparsable URL", func(r *deliver.Request) { r.URL = "http://[::1/?token=SECRET" }},
		{"relative URL", func(r *deliver.Request) { r.URL = "/hook?token=SECRET" }},
		{"ftp URL", func(r *deliver.Request) { r.URL = "ftp://127.0.0.1/?token=SECRET" }},
	}
	s := newSender(t, deliver.Config{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := newRequest(t, srv.URL)
			tc.modify(&req)
			res := s.Send(t.Context(), req)
			asError[*deliver.RequestError](t, res.Err)
			if strings.Contains(res.Err.Error(), "SECRET") || res.Outcome() != deliver.Retry {
				t.Errorf("err %q, outcome %v", res.Err, res.Outcome())
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("server reached %d times by invalid requests", n)
	}
}

func TestSendCanceledByCaller(t *testing.T) {
	srv := newServer(t, func(http.ResponseWriter, *http.Request) {})
	ctx, cancel := context.WithCancelCause(t.Context())
	shutdown := errors.New("shutting down")
	cancel(shutdown)
	res := newSender(t, deliver.Config{}).Send(ctx, newRequest(t, srv.URL))
	ce := asError[*deliver.CanceledError](t, res.Err)
	if !errors.Is(ce, shutdown) || res.Outcome() != deliver.Canceled {
		t.Errorf("got %v outcome %v, want the cancel cause and canceled", ce, res.Outcome())
	}
}

func TestNewSenderRejectsInvalidAllowTargets(t *testing.T) {
	if _, err := deliver.NewSender(deliver.Config{AllowTargets: []netip.Prefix{{}}}); err == nil {
		t.Fatal("NewSender accepted an invalid prefix")
	}
}

func BenchmarkSend(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(noContent))
	b.Cleanup(srv.Close)
	benchmarkSend(b, newSender(b, deliver.Config{}), srv.URL+"/hooks")
}

// BenchmarkSendHTTPS is BenchmarkSend over TLS: what a kept connection's
// reuse check costs where tls.Conn holds its own buffers.
func BenchmarkSendHTTPS(b *testing.B) {
	srv := httptest.NewTLSServer(http.HandlerFunc(noContent))
	b.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	benchmarkSend(b, newSender(b, deliver.Config{TLSClientConfig: &tls.Config{RootCAs: roots}}), srv.URL+"/hooks")
}

func noContent(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

// benchmarkSend makes attempts to url, on the kept connection after the
// first.
func benchmarkSend(b *testing.B, s *deliver.Sender, url string) {
	req := newRequest(b, url)
	ctx := b.Context()
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Send(ctx, req); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
}

func TestSendHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	trusting := newSender(t, deliver.Config{TLSClientConfig: &tls.Config{RootCAs: roots}})
	if res := trusting.Send(t.Context(), newRequest(t, srv.URL)); res.Err != nil {
		t.Fatalf("Send over TLS: %v", res.Err)
	}
	// Default roots do not know the test CA: a TLS failure, retried.
	res := newSender(t, deliver.Config{}).Send(t.Context(), newRequest(t, srv.URL))
	te := asError[*deliver.TransportError](t, res.Err)
	var unknownCA x509.UnknownAuthorityError
	if !errors.As(te, &unknownCA) || res.Outcome() != deliver.Retry {
		t.Errorf("err = %v, outcome %v; want an unknown-authority TLS error, retry", te, res.Outcome())
	}
}

// TestResetAfterTheRequestIsNotResentAtOnce: a receiver that reads a
// delivery and then resets a reused keep-alive connection gets exactly one
// request for that attempt. net/http would resend a request it considers
// idempotent at once, on another connection; the contract says retries
// wait their delay (and the receiver may have acted on it).
func TestResetAfterTheRequestIsNotResentAtOnce(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if requests.Add(1) == 1 {
			w.WriteHeader(http.StatusNoContent) // the first one leaves a pooled connection
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.SetLinger(0) // close with RST
		}
		conn.Close()
	}))
	defer srv.Close()
	s := newSender(t, deliver.Config{Timeout: 2 * time.Second})
	if res := s.Send(context.Background(), newRequest(t, srv.URL)); res.Err != nil {
		t.Fatalf("first attempt: %v", res.Err)
	}
	res := s.Send(context.Background(), newRequest(t, srv.URL))
	if res.Err == nil {
		t.Fatal("the reset attempt succeeded")
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("the receiver got %d requests for two attempts: the reset one was resent at once", n)
	}
}
