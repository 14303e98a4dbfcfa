package deliver_test

// Hostile receivers, over real loopback TCP: receivers that never answer,
// trickle bytes, send endless bodies or headers, redirect, or upgrade the
// connection. Every attempt must end within the whole-call limit, read no
// more than the caps, and hang up.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/security/ssrf"
)

// rawServer is a TCP listener on 127.0.0.1 that hands each connection to
// handle in its own goroutine. Cleanup closes the listener and every
// connection, then waits for the handlers, so a handler may block on its
// connection for as long as it likes.
type rawServer struct {
	ln       net.Listener
	addr     string
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newRawServer(t testing.TB, handle func(net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, addr: ln.Addr().String()}
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Go(func() { handle(c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) url(scheme string) string { return scheme + "://" + s.addr + "/hook" }

// readRequest reads one whole HTTP request from c and returns the reader,
// which may hold bytes past it.
func readRequest(c net.Conn) (*bufio.Reader, error) {
	br := bufio.NewReader(c)
	if _, err := readRequestFrom(br); err != nil {
		return nil, err
	}
	return br, nil
}

// readRequestFrom reads one whole request from br.
func readRequestFrom(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return req, err
}

// awaitHangUp blocks until the client closes the connection r reads from
// (a read returns EOF or an error) and then reports on hungUp, without
// blocking if nobody listens any more.
func awaitHangUp(r io.Reader, hungUp chan<- struct{}) {
	_, _ = io.Copy(io.Discard, r)
	select {
	case hungUp <- struct{}{}:
	default:
	}
}

// writeUntilError writes p to c over and over until a write fails (the
// client hung up) or limit bytes are written (never, if limit < 0), and
// returns how many bytes were written and the error that stopped it.
func writeUntilError(c net.Conn, p []byte, limit int64) (int64, error) {
	var n int64
	for limit < 0 || n < limit {
		chunk := p
		if limit >= 0 && int64(len(chunk)) > limit-n {
			chunk = chunk[:limit-n]
		}
		m, err := c.Write(chunk)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// offer returns a function that sends to ch without blocking, so that a
// server handler never hangs on a report nobody reads (the test then fails
// for want of it instead).
func offer[T any](ch chan<- T) func(T) {
	return func(v T) {
		select {
		case ch <- v:
		default:
		}
	}
}

// wait receives from ch or fails the test after d.
func wait[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no sign after %v that %s", d, what)
		panic("unreachable")
	}
}

// wantCutAt checks that the attempt ended at the whole-call limit: not
// before it (nothing else should have ended it) and not long after it.
func wantCutAt(t *testing.T, res deliver.Result, limit time.Duration) {
	t.Helper()
	if lo, hi := limit*9/10, 3*limit; res.Duration < lo || res.Duration > hi {
		t.Errorf("attempt took %v, want it cut at the %v limit (between %v and %v)", res.Duration, limit, lo, hi)
	}
}

// dialLog builds guards that allow loopback and record the addresses they
// dial. With small set, connections get 16 KiB kernel socket buffers, so
// that the kernel cannot absorb a large request body on the client's behalf.
type dialLog struct {
	small  bool
	mu     sync.Mutex
	dialed []string
}

func (dl *dialLog) guard(t testing.TB) *ssrf.Guard {
	t.Helper()
	dialer := &net.Dialer{}
	g, err := ssrf.NewGuard(ssrf.Config{Allow: loopback, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dl.mu.Lock()
		dl.dialed = append(dl.dialed, addr)
		dl.mu.Unlock()
		c, err := dialer.DialContext(ctx, network, addr)
		if err == nil && dl.small {
			tc := c.(*net.TCPConn)
			tc.SetReadBuffer(16 << 10)
			tc.SetWriteBuffer(16 << 10)
		}
		return c, err
	}})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (dl *dialLog) addresses() []string {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	return slices.Clone(dl.dialed)
}

// The contract's whole-call limit, with the real default: a receiver that
// accepts the connection, reads the request and never answers is cut at
// 5 s, and the connection is closed.
func TestHostileNeverAnswersCutAtDefault5s(t *testing.T) {
	if deliver.DefaultTimeout != 5*time.Second {
		t.Fatalf("DefaultTimeout = %v, the delivery contract says 5 s", deliver.DefaultTimeout)
	}
	hungUp := make(chan struct{}, 1)
	srv := newRawServer(t, func(c net.Conn) {
		br, err := readRequest(c)
		if err != nil {
			return
		}
		awaitHangUp(br, hungUp)
	})
	res := newSender(t, deliver.Config{}).Send(t.Context(), newRequest(t, srv.url("http")))
	te := asError[*deliver.TimeoutError](t, res.Err)
	if te.After != 5*time.Second || res.StatusCode != 0 || res.Outcome() != deliver.Retry {
		t.Errorf("got %+v status %d outcome %v, want a 5 s timeout to retry", te, res.StatusCode, res.Outcome())
	}
	wantCutAt(t, res, 5*time.Second)
	wait(t, hungUp, 10*time.Second, "the client closed the connection")
}

// Receivers that stall at every stage of the exchange. Each attempt ends as
// a timeout at the configured limit, whatever stage it stalled in, and the
// connection is closed.
func TestHostileStallsAreCutAtTheLimit(t *testing.T) {
	const limit = 400 * time.Millisecond
	type stall func(c net.Conn, sent <-chan struct{}, hungUp chan<- struct{})
	tests := []struct {
		name   string
		scheme string
		body   int // request body size; 0 means the usual small one
		handle stall
	}{
		{"reads the request, never answers", "http", 0, func(c net.Conn, _ <-chan struct{}, hungUp chan<- struct{}) {
			if br, err := readRequest(c); err == nil {
				awaitHangUp(br, hungUp)
			}
		}},
		{"never reads the request", "http", 4 << 20, func(c net.Conn, sent <-chan struct{}, hungUp chan<- struct{}) {
			// Nothing is read while the attempt runs, so the client's
			// write of the large body blocks on full socket buffers.
			<-sent
			awaitHangUp(c, hungUp)
		}},
		{"TLS: never completes the handshake", "https", 0, func(c net.Conn, _ <-chan struct{}, hungUp chan<- struct{}) {
			awaitHangUp(c, hungUp) // reads the ClientHello, never answers it
		}},
		{"sends the status line, then nothing", "http", 0, func(c net.Conn, _ <-chan struct{}, hungUp chan<- struct{}) {
			if br, err := readRequest(c); err == nil {
				io.WriteString(c, "HTTP/1.1 200 OK\r\n")
				awaitHangUp(br, hungUp)
			}
		}},
		{"sends 100 Continue, then nothing", "http", 0, func(c net.Conn, _ <-chan struct{}, hungUp chan<- struct{}) {
			if br, err := readRequest(c); err == nil {
				io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
				awaitHangUp(br, hungUp)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sent := make(chan struct{})
			hungUp := make(chan struct{}, 1)
			srv := newRawServer(t, func(c net.Conn) { tc.handle(c, sent, hungUp) })
			dl := dialLog{small: true}
			req := newRequest(t, srv.url(tc.scheme))
			if tc.body > 0 {
				req.Body = bytes.Repeat([]byte("x"), tc.body)
			}
			res := newSender(t, deliver.Config{Timeout: limit, Guard: dl.guard(t)}).Send(t.Context(), req)
			close(sent)
			te := asError[*deliver.TimeoutError](t, res.Err)
			if te.After != limit || res.Outcome() != deliver.Retry || res.StatusCode != 0 {
				t.Errorf("got %+v status %d outcome %v", te, res.StatusCode, res.Outcome())
			}
			wantCutAt(t, res, limit)
			wait(t, hungUp, 10*time.Second, "the client closed the connection")
		})
	}
}

// trickle writes prefix and then repeat, over and over, one byte every
// interval, until a write fails (the client hung up). It returns how many
// bytes it wrote and the error that stopped it.
func trickle(c net.Conn, prefix, repeat string, every time.Duration) (int64, error) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var n int64
	for i := 0; ; i++ {
		<-tick.C
		var b byte
		if i < len(prefix) {
			b = prefix[i]
		} else {
			b = repeat[(i-len(prefix))%len(repeat)]
		}
		m, err := c.Write([]byte{b})
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
}

// Slowloris: a receiver that keeps every read busy with a byte every 20 ms
// never trips a per-read timeout. The attempt's single deadline must still
// cut it at the whole-call limit, and the connection must be closed (the
// server's writes start failing).
func TestHostileSlowlorisIsCutAtTheWholeCallLimit(t *testing.T) {
	const (
		limit = 500 * time.Millisecond
		every = 20 * time.Millisecond
	)
	tests := []struct {
		name           string
		head           string // written at once after the request
		prefix, repeat string // then trickled, byte by byte
		check          func(t *testing.T, res deliver.Result, trickled int64)
		cutsAt         bool // the attempt ends at the limit (not just within 3× it)
		unread         bool // the attempt does not read the trickle
	}{
		{
			name:   "status line and headers",
			prefix: "HTTP/1.1 200 OK\r\n", repeat: "X-Slow: a\r\n",
			check: func(t *testing.T, res deliver.Result, _ int64) {
				asError[*deliver.TimeoutError](t, res.Err)
				if res.StatusCode != 0 {
					t.Errorf("status %d, want none: the headers never completed", res.StatusCode)
				}
			},
			cutsAt: true,
		},
		{
			name:   "error body",
			head:   "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 1048576\r\n\r\n",
			repeat: "x",
			check: func(t *testing.T, res deliver.Result, trickled int64) {
				// The status decided the outcome; the body is what arrived
				// in time, cut by the same deadline.
				se := asError[*deliver.StatusError](t, res.Err)
				if se.Code != 503 || len(se.Body) == 0 || int64(len(se.Body)) > trickled || strings.Trim(se.Body, "x") != "" {
					t.Errorf("got %d with %d body bytes (%d trickled), want 503 and the bytes that arrived", se.Code, len(se.Body), trickled)
				}
			},
			cutsAt: true,
		},
		{
			// A body longer than the drain is not read at all: the
			// connection is closed instead, so the trickle costs nothing.
			name:   "2xx body",
			head:   "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n",
			repeat: "x",
			check: func(t *testing.T, res deliver.Result, _ int64) {
				if res.Err != nil || res.Outcome() != deliver.Delivered {
					t.Errorf("got %v, want delivered: the 2xx arrived in time", res.Err)
				}
				if res.Duration >= limit/2 {
					t.Errorf("attempt took %v: it waited on a body it does not need", res.Duration)
				}
			},
			unread: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stopped := make(chan bodyReport, 1)
			srv := newRawServer(t, func(c net.Conn) {
				if _, err := readRequest(c); err != nil {
					return
				}
				io.WriteString(c, tc.head)
				n, err := trickle(c, tc.prefix, tc.repeat, every)
				offer(stopped)(bodyReport{n, err})
			})
			res := newSender(t, deliver.Config{Timeout: limit}).Send(t.Context(), newRequest(t, srv.url("http")))
			got := wait(t, stopped, 10*time.Second, "the client hung up on the trickle")
			tc.check(t, res, got.written)
			if tc.cutsAt {
				wantCutAt(t, res, limit)
			} else if res.Duration > 3*limit {
				t.Errorf("attempt took %v, want at most 3× the %v limit", res.Duration, limit)
			}
			// Many reads each made progress well within the limit: a
			// per-read timeout would not have fired.
			if !tc.unread && got.written < 5 {
				t.Errorf("only %d bytes trickled before the cut: the test did not exercise a slow receiver", got.written)
			}
			t.Logf("trickled %d bytes, attempt took %v", got.written, res.Duration)
		})
	}
}

// bodyReport is what a server managed to write of a response before it
// finished or a write failed (the client hung up), and that error.
type bodyReport struct {
	written int64
	err     error
}

// hugeBodyServer answers every request with status and a body of size
// bytes (endless if size < 0; then without Content-Length, delimited by the
// close), written in 16 KiB chunks through a 16 KiB socket send buffer, and
// reports each response's bodyReport.
func hugeBodyServer(t testing.TB, status string, size int64, report func(bodyReport)) *rawServer {
	chunk := bytes.Repeat([]byte("x"), 16<<10)
	return newRawServer(t, func(c net.Conn) {
		c.(*net.TCPConn).SetWriteBuffer(16 << 10)
		for {
			if _, err := readRequest(c); err != nil {
				return
			}
			head := "HTTP/1.1 " + status + "\r\nContent-Type: text/plain\r\n"
			if size >= 0 {
				head += "Content-Length: " + strconv.FormatInt(size, 10) + "\r\n"
			}
			io.WriteString(c, head+"\r\n")
			n, err := writeUntilError(c, chunk, size)
			report(bodyReport{n, err})
			if err != nil || size < 0 {
				return
			}
		}
	})
}

// A 10 MB (or endless) response body is not read beyond the cap kept for
// last_error plus the small drain: the server's writes fail after a few
// socket buffers' worth, because the client hangs up. A 2xx with such a
// body is delivered at once, not after reading it.
func TestHostileHugeBodiesAreNotRead(t *testing.T) {
	const (
		tenMB = 10 << 20
		// The client takes 1 KiB kept + 4 KiB drained + its 4 KiB bufio
		// reader; the kernel holds up to the client's receive buffer (128 KiB
		// by default on Linux, not grown by autotuning since the client
		// stops reading) and the server's 16 KiB send buffer. About 100-170
		// KiB in practice; a client reading the body would let all 10 MB
		// through in milliseconds.
		maxWritten = 1 << 20
	)
	tests := []struct {
		name   string
		status string
		size   int64
		want   deliver.Outcome
	}{
		{"500 with 10 MB", "500 Internal Server Error", tenMB, deliver.Retry},
		{"500 endless", "500 Internal Server Error", -1, deliver.Retry},
		{"200 with 10 MB", "200 OK", tenMB, deliver.Delivered},
		{"200 endless", "200 OK", -1, deliver.Delivered},
		{"413 endless", "413 Payload Too Large", -1, deliver.Dead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reports := make(chan bodyReport, 4)
			srv := hugeBodyServer(t, tc.status, tc.size, offer(reports))
			s := newSender(t, deliver.Config{Timeout: deliver.DefaultTimeout})
			res := s.Send(t.Context(), newRequest(t, srv.url("http")))
			if res.Outcome() != tc.want {
				t.Fatalf("outcome %v (err %v), want %v", res.Outcome(), res.Err, tc.want)
			}
			if se := (*deliver.StatusError)(nil); errors.As(res.Err, &se) && len(se.Body) != deliver.DefaultMaxErrorBody {
				t.Errorf("kept %d bytes of the body, want %d", len(se.Body), deliver.DefaultMaxErrorBody)
			}
			// An endless body read to the end would run into the deadline;
			// the attempt must end long before it.
			if res.Duration >= deliver.DefaultTimeout/2 {
				t.Errorf("attempt took %v: the body was read until the %v deadline", res.Duration, deliver.DefaultTimeout)
			}
			rep := wait(t, reports, 10*time.Second, "the client hung up on the huge body")
			if rep.err == nil {
				t.Errorf("server wrote the whole body (%d bytes) without the client hanging up", rep.written)
			}
			if rep.written > maxWritten {
				t.Errorf("server wrote %d bytes before the client hung up, want at most %d", rep.written, maxWritten)
			}
			t.Logf("server wrote %d bytes in %v", rep.written, res.Duration)
		})
	}
}

// Memory stays flat while huge bodies are being sent to us: nothing is
// buffered beyond the caps, so each attempt allocates about as much as an
// attempt against a small body, not megabytes.
func TestHostileHugeBodiesKeepMemoryFlat(t *testing.T) {
	reports := make(chan bodyReport, 64)
	srv := hugeBodyServer(t, "500 Internal Server Error", 10<<20, offer(reports))
	s := newSender(t, deliver.Config{})
	req := newRequest(t, srv.url("http"))
	send := func() {
		if res := s.Send(t.Context(), req); res.StatusCode != 500 {
			t.Fatalf("Send: %+v", res)
		}
		wait(t, reports, 10*time.Second, "the client hung up on the huge body")
	}
	send() // warm up: pools, TLS-free transport state, lazily built objects

	const rounds = 10
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range rounds {
		send()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perSend := (after.TotalAlloc - before.TotalAlloc) / rounds
	grown := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("allocated %d B per attempt against a 10 MB body; heap in use %+d B after %d attempts", perSend, grown, rounds)
	// A buffered body would cost 10 MB per attempt; one attempt with its
	// fresh connection costs tens of KiB.
	if perSend > 256<<10 {
		t.Errorf("allocated %d B per attempt, want well under the 10 MB body (at most 256 KiB)", perSend)
	}
	if grown > 4<<20 {
		t.Errorf("heap in use grew by %d B over %d attempts: memory is not flat", grown, rounds)
	}
}

// Response headers are capped: an endless header, or an endless run of
// informational responses, fails the attempt after 64 KiB instead of
// filling memory or running into the deadline.
func TestHostileEndlessHeadersAreCapped(t *testing.T) {
	tests := []struct {
		name, head string
		repeat     []byte
	}{
		{"endless header lines", "HTTP/1.1 200 OK\r\n", []byte("X-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n")},
		{"endless 1xx responses", "", []byte("HTTP/1.1 102 Processing\r\nX-Pad: aaaaaaaa\r\n\r\n")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reports := make(chan bodyReport, 1)
			srv := newRawServer(t, func(c net.Conn) {
				c.(*net.TCPConn).SetWriteBuffer(16 << 10)
				if _, err := readRequest(c); err != nil {
					return
				}
				io.WriteString(c, tc.head)
				n, err := writeUntilError(c, bytes.Repeat(tc.repeat, 256), -1)
				offer(reports)(bodyReport{n, err})
			})
			res := newSender(t, deliver.Config{}).Send(t.Context(), newRequest(t, srv.url("http")))
			asError[*deliver.TransportError](t, res.Err)
			if res.Outcome() != deliver.Retry || res.StatusCode != 0 {
				t.Errorf("got status %d outcome %v, want no response and a retry", res.StatusCode, res.Outcome())
			}
			if res.Duration >= deliver.DefaultTimeout/2 {
				t.Errorf("attempt took %v: the headers were not capped", res.Duration)
			}
			rep := wait(t, reports, 10*time.Second, "the client hung up on the endless headers")
			if rep.written > 1<<20 {
				t.Errorf("server wrote %d header bytes before the client hung up, want about 64 KiB", rep.written)
			}
			t.Logf("server wrote %d bytes: %v", rep.written, res.Err)
		})
	}
}

// A receiver that answers 101 Switching Protocols hands the client the raw
// connection as the response body, outside net/http's deadline handling.
// The attempt must neither read it (the receiver would hold the attempt
// for as long as it keeps the connection open) nor count it as delivered.
func TestHostileUpgradeIsAFailureAndNotRead(t *testing.T) {
	const limit = 2 * time.Second
	hungUp := make(chan error, 1)
	srv := newRawServer(t, func(c net.Conn) {
		br, err := readRequest(c)
		if err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		// Silence until the client hangs up; if it never does, give up
		// after a while and close, so that a regression fails instead of
		// hanging the test.
		c.SetReadDeadline(time.Now().Add(4 * limit))
		_, err = io.Copy(io.Discard, br)
		c.Close()
		hungUp <- err
	})
	res := newSender(t, deliver.Config{Timeout: limit}).Send(t.Context(), newRequest(t, srv.url("http")))
	se := asError[*deliver.StatusError](t, res.Err)
	if se.Code != http.StatusSwitchingProtocols || se.Body != "" || res.Outcome() != deliver.Retry {
		t.Errorf("got %+v outcome %v, want a 101 failure to retry", se, res.Outcome())
	}
	if res.Duration >= limit {
		t.Errorf("attempt took %v: it waited on the upgraded connection", res.Duration)
	}
	var netErr net.Error
	if err := wait(t, hungUp, 10*time.Second, "the server saw the upgraded connection end"); errors.As(err, &netErr) && netErr.Timeout() {
		t.Errorf("the client kept the upgraded connection open for %v", 4*limit)
	}
}

// Redirects are failures, and whatever the Location names (another server
// we could reach, the cloud metadata service, a path on the same host) is
// never contacted: the only address dialled is the endpoint's.
func TestHostileRedirectTargetIsNeverContacted(t *testing.T) {
	var targetConns, targetRequests atomic.Int64
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		targetRequests.Add(1)
	}))
	target.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			targetConns.Add(1)
		}
	}
	target.Start()
	t.Cleanup(target.Close)

	locations := []string{
		target.URL + "/stolen",
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"/elsewhere",
	}
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, loc := range locations {
			t.Run(strconv.Itoa(code)+" to "+loc, func(t *testing.T) {
				var originRequests atomic.Int64
				origin := newServer(t, func(w http.ResponseWriter, r *http.Request) {
					originRequests.Add(1)
					w.Header().Set("Location", loc)
					w.WriteHeader(code)
				})
				var dl dialLog
				res := newSender(t, deliver.Config{Guard: dl.guard(t)}).Send(t.Context(), newRequest(t, origin.URL+"/hook"))
				re := asError[*deliver.RedirectError](t, res.Err)
				if re.Code != code || re.Location != loc || res.StatusCode != code || res.Outcome() != deliver.Retry {
					t.Errorf("got %+v status %d outcome %v, want a %d failure naming %s", re, res.StatusCode, res.Outcome(), code, loc)
				}
				originAddr := netip.MustParseAddrPort(strings.TrimPrefix(origin.URL, "http://")).String()
				if got := dl.addresses(); !slices.Equal(got, []string{originAddr}) {
					t.Errorf("dialled %q, want only the endpoint %s", got, originAddr)
				}
				if n := originRequests.Load(); n != 1 {
					t.Errorf("endpoint got %d requests, want 1 (a relative Location must not be followed either)", n)
				}
			})
		}
	}
	if c, r := targetConns.Load(), targetRequests.Load(); c != 0 || r != 0 {
		t.Errorf("redirect target contacted: %d connections, %d requests", c, r)
	}
}

// staticResolver answers every lookup with addrs.
type staticResolver []netip.Addr

func (r staticResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return slices.Clone(r), nil
}

// Proxy settings in the environment must not route deliveries around the
// guard: a proxy would resolve and connect to the name itself. The target
// is a name (net/http never proxies loopback IPs or localhost anyway) that
// the guard resolves to the test server.
func TestHostileProxyEnvironmentIsIgnored(t *testing.T) {
	proxy := newRawServer(t, func(c net.Conn) {})
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		t.Setenv(k, "http://"+proxy.addr)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	srv := newServer(t, func(http.ResponseWriter, *http.Request) {})
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	url := "http://hooks.example:" + strconv.Itoa(port) + "/hook"
	resolver := staticResolver{netip.MustParseAddr("127.0.0.1")}

	open, err := ssrf.NewGuard(ssrf.Config{Allow: loopback, Resolver: resolver})
	if err != nil {
		t.Fatal(err)
	}
	if res := newSender(t, deliver.Config{Guard: open}).Send(t.Context(), newRequest(t, url)); res.Err != nil {
		t.Fatalf("Send with proxy variables set: %v", res.Err)
	}
	// A target the guard refuses stays refused, proxy or not.
	closed, err := ssrf.NewGuard(ssrf.Config{Resolver: resolver})
	if err != nil {
		t.Fatal(err)
	}
	res := newSender(t, deliver.Config{Guard: closed}).Send(t.Context(), newRequest(t, url))
	asError[*ssrf.BlockedError](t, res.Err)
	if n := proxy.accepted.Load(); n != 0 {
		t.Fatalf("the proxy from the environment got %d connections", n)
	}
}

// heapInUse is the heap's in-use bytes (runtime.MemStats.HeapInuse: spans
// holding objects, including their free slots), read without stopping the
// world so that it can be sampled while attempts run.
func heapInUse(samples []metrics.Sample) uint64 {
	metrics.Read(samples)
	return samples[0].Value.Uint64() + samples[1].Value.Uint64()
}

func heapSamples() []metrics.Sample {
	return []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
}

// BenchmarkSendHugeBody sends to a receiver answering every attempt with a
// 10 MB error body. Memory must stay flat: B/op and allocs/op are those of
// any attempt on a fresh connection, and the heap in use never rises by
// more than a few attempts' worth above where it started (peak-heap-B, the
// highest in-use heap sampled every millisecond during the run, minus the
// baseline; it tracks the GC's heap target, a few MB, whatever the number
// of attempts). server-B/op is how much of the body the receiver got to
// write before the client hung up.
//
//	go test -run '^$' -bench SendHugeBody -benchtime 200x ./deliver/
func BenchmarkSendHugeBody(b *testing.B) {
	const size = 10 << 20
	var written atomic.Int64
	srv := hugeBodyServer(b, "500 Internal Server Error", size, func(r bodyReport) { written.Add(r.written) })
	s := newSender(b, deliver.Config{})
	req := newRequest(b, srv.url("http"))
	ctx := b.Context()

	runtime.GC()
	samples := heapSamples()
	base := heapInUse(samples)
	var peak atomic.Uint64
	peak.Store(base)
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		own := heapSamples()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if h := heapInUse(own); h > peak.Load() {
				peak.Store(h)
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		if res := s.Send(ctx, req); res.StatusCode != 500 {
			b.Fatalf("Send: %+v", res)
		}
	}
	close(stop)
	<-sampled
	b.ReportMetric(float64(peak.Load()-base), "peak-heap-B")
	b.ReportMetric(float64(written.Load())/float64(b.N), "server-B/op")
}
