package deliver_test

// The sender speaks HTTP/1.1 itself: framing, keep-alive and cancellation
// against real loopback servers, net/http's and raw ones.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/deliver"
)

// connCountingServer is an httptest server that counts the connections it
// accepted and reports each one it closed.
// A positive idle closes connections idle that long.
func connCountingServer(t *testing.T, idle time.Duration, h http.HandlerFunc) (srv *httptest.Server, opened *atomic.Int64, closed chan struct{}) {
	t.Helper()
	opened = &atomic.Int64{}
	closed = make(chan struct{}, 64)
	srv = httptest.NewUnstartedServer(h)
	srv.Config.IdleTimeout = idle
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, opened, closed
}

// A pooled connection the server closed while it was idle is noticed at
// reuse: the next attempt goes out on a new connection and is delivered,
// instead of failing on the dead one.
func TestSendSkipsAConnectionTheServerClosed(t *testing.T) {
	srv, opened, closed := connCountingServer(t, 20*time.Millisecond, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	s := newSender(t, deliver.Config{})
	if res := s.Send(t.Context(), newRequest(t, srv.URL)); res.Err != nil {
		t.Fatalf("first attempt: %v", res.Err)
	}
	wait(t, closed, 10*time.Second, "the server closed the idle connection")
	if res := s.Send(t.Context(), newRequest(t, srv.URL)); res.Err != nil {
		t.Fatalf("attempt after the server's idle close: %v", res.Err)
	}
	if n := opened.Load(); n != 2 {
		t.Errorf("%d connections, want 2 (the closed one replaced)", n)
	}
}

// Idle connections are closed by the sender after IdleConnTimeout.
func TestSendClosesIdleConnections(t *testing.T) {
	srv, _, closed := connCountingServer(t, 0, func(http.ResponseWriter, *http.Request) {})
	s := newSender(t, deliver.Config{IdleConnTimeout: 30 * time.Millisecond})
	if res := s.Send(t.Context(), newRequest(t, srv.URL)); res.Err != nil {
		t.Fatal(res.Err)
	}
	wait(t, closed, 10*time.Second, "the sender closed its idle connection")
}

// rawResponder answers every request on a connection with the responses
// given, in turn, and counts connections.
func rawResponder(t *testing.T, responses ...string) *rawServer {
	t.Helper()
	return newRawServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for _, resp := range responses {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			if _, err := io.WriteString(c, resp); err != nil {
				return
			}
		}
	})
}

func TestSendFraming(t *testing.T) {
	tests := []struct {
		name     string
		response string
		reused   bool   // the second request rides the first connection
		code     int    // the first result's status
		body     string // its error body
	}{
		{"content length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", true, 200, ""},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", true, 204, ""},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", true, 200, ""},
		{"chunked with trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n", true, 200, ""},
		{"chunked error body", "HTTP/1.1 500 Oops\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nbad\r\n4\r\n day\r\n0\r\n\r\n", true, 500, "bad day"},
		{"sized error body", "HTTP/1.1 422 No\r\nContent-Length: 7\r\n\r\ninvalid", true, 422, "invalid"},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false, 200, ""},
		{"http/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false, 200, ""},
		{"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", true, 200, ""},
		{"100 continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n", true, 202, ""},
		{"lower-case headers", "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", true, 200, ""},
		{"bare line feeds", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", true, 200, ""},
		{"both framings", "HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", false, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := rawResponder(t, tc.response, tc.response)
			s := newSender(t, deliver.Config{})
			res := s.Send(t.Context(), newRequest(t, srv.url("http")))
			if res.StatusCode != tc.code {
				t.Fatalf("status %d (%v), want %d", res.StatusCode, res.Err, tc.code)
			}
			var se *deliver.StatusError
			if errors.As(res.Err, &se) && se.Body != tc.body {
				t.Errorf("error body %q, want %q", se.Body, tc.body)
			}
			if res2 := s.Send(t.Context(), newRequest(t, srv.url("http"))); res2.StatusCode != tc.code {
				t.Fatalf("second attempt: status %d (%v)", res2.StatusCode, res2.Err)
			}
			if n, want := srv.accepted.Load(), map[bool]int64{true: 1, false: 2}[tc.reused]; n != want {
				t.Errorf("%d connections for two attempts, want %d", n, want)
			}
		})
	}
}

// Responses that cannot be read as HTTP/1.x fail the attempt as transport
// errors, to be retried, and say what was wrong.
func TestSendMalformedResponses(t *testing.T) {
	tests := []struct{ name, response, want string }{
		{"not http", "SSH-2.0-OpenSSH_9.6\r\n\r\n", "bad status line"},
		{"http/2 preface", "HTTP/2 200\r\n\r\n", "bad status line"},
		{"letters for a code", "HTTP/1.1 2xx OK\r\n\r\n", "bad status code"},
		{"header without colon", "HTTP/1.1 200 OK\r\nBroken\r\n\r\n", "bad header line"},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "bad Content-Length"},
		{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"},
		{"gzip framing", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "unsupported Transfer-Encoding"},
		{"closed before a response", "", "closed before a response"},
		{"closed in the headers", "HTTP/1.1 200 OK\r\nContent-", "unexpected EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newRawServer(t, func(c net.Conn) {
				if _, err := readRequest(c); err == nil {
					io.WriteString(c, tc.response)
				}
				c.Close()
			})
			res := newSender(t, deliver.Config{}).Send(t.Context(), newRequest(t, srv.url("http")))
			te := asError[*deliver.TransportError](t, res.Err)
			if !strings.Contains(te.Error(), tc.want) || res.StatusCode != 0 || res.Outcome() != deliver.Retry {
				t.Errorf("got %q status %d outcome %v, want an error about %q", te, res.StatusCode, res.Outcome(), tc.want)
			}
		})
	}
}

// A caller's cancel ends an attempt that waits for its response, with the
// cancel's cause.
func TestSendCanceledWhileWaiting(t *testing.T) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := newServer(t, func(http.ResponseWriter, *http.Request) {
		arrived <- struct{}{}
		<-release
	})
	releaseAtCleanup(t, release)
	ctx, cancel := context.WithCancelCause(t.Context())
	results := make(chan deliver.Result, 1)
	s := newSender(t, deliver.Config{Timeout: time.Minute})
	go func() { results <- s.Send(ctx, newRequest(t, srv.URL)) }()
	wait(t, arrived, 10*time.Second, "the request reached the server")
	shutdown := errors.New("shutting down")
	cancel(shutdown)
	res := wait(t, results, 10*time.Second, "the canceled attempt returned")
	if ce := asError[*deliver.CanceledError](t, res.Err); !errors.Is(ce, shutdown) {
		t.Errorf("err %v, want the cancel's cause", ce)
	}
}

// Userinfo in the URL becomes basic authentication, as with net/http.
func TestSendBasicAuthFromURL(t *testing.T) {
	got := make(chan [2]string, 1)
	srv := newServer(t, func(_ http.ResponseWriter, r *http.Request) {
		user, pass, _ := r.BasicAuth()
		got <- [2]string{user, pass}
	})
	u := strings.Replace(srv.URL, "http://", "http://hook:s%3Acret@", 1)
	if res := newSender(t, deliver.Config{}).Send(t.Context(), newRequest(t, u)); res.Err != nil {
		t.Fatal(res.Err)
	}
	if creds := wait(t, got, 10*time.Second, "the request arrived"); creds != [2]string{"hook", "s:cret"} {
		t.Errorf("basic auth %q, want hook / s:cret", creds)
	}
}

// A message id that would end the header early (or is empty) is refused
// before anything is sent, and is dead at once: no receiver and no
// configuration can fix it, so retrying it would only hold its entity
// and count against the endpoint (#27).
func TestSendRefusesHeaderInjection(t *testing.T) {
	var hits atomic.Int64
	srv := newServer(t, func(http.ResponseWriter, *http.Request) { hits.Add(1) })
	s := newSender(t, deliver.Config{})
	for _, id := range []string{"evt_1\r\nX-Injected: 1", "evt_1\n", "evt\x001", "evt\x7f", ""} {
		req := newRequest(t, srv.URL)
		req.MsgID = id
		res := s.Send(t.Context(), req)
		asError[*deliver.MessageError](t, res.Err)
		if res.Outcome() != deliver.Dead {
			t.Errorf("message id %q: outcome %v, want dead", id, res.Outcome())
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the requests reached the server %d times", n)
	}
}

// The request carries exactly the headers of the delivery contract, and
// the path and query of the URL as written.
func TestSendRequestLine(t *testing.T) {
	got := make(chan *http.Request, 1)
	srv := newServer(t, func(_ http.ResponseWriter, r *http.Request) { got <- r })
	req := newRequest(t, srv.URL+"/hooks/in%20box?token=a%2Fb&x=1")
	if res := newSender(t, deliver.Config{UserAgent: "Test/2"}).Send(t.Context(), req); res.Err != nil {
		t.Fatal(res.Err)
	}
	r := wait(t, got, 10*time.Second, "the request arrived")
	if r.Method != http.MethodPost || r.URL.RequestURI() != "/hooks/in%20box?token=a%2Fb&x=1" || r.Host != strings.TrimPrefix(srv.URL, "http://") {
		t.Errorf("got %s %s host %s", r.Method, r.URL.RequestURI(), r.Host)
	}
	want := map[string]string{
		"Content-Type": "application/json", "User-Agent": "Test/2", "Webhook-Id": req.MsgID,
		"Idempotency-Key": req.MsgID, "Content-Length": strconv.Itoa(len(req.Body)),
	}
	for k, v := range want {
		if r.Header.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, r.Header.Get(k), v)
		}
	}
	if r.ContentLength != int64(len(req.Body)) {
		t.Errorf("content length %d, want %d", r.ContentLength, len(req.Body))
	}
}

// TestSendAllocations guards the sender's hot path: an attempt on a kept
// connection allocates little more than the watch on its caller's cancel
// (net/http's client took about 60 allocations). The receiver here is
// a raw responder that allocates nothing per request, so the count is the
// sender's own.
func TestSendAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector's own allocations would count")
	}
	srv := newRawServer(t, func(c net.Conn) {
		br := bufio.NewReaderSize(c, 8<<10)
		resp := []byte("HTTP/1.1 204 No Content\r\n\r\n")
		for {
			length := 0
			for {
				line, err := br.ReadSlice('\n')
				if err != nil {
					return
				}
				if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
					length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
				}
				if len(line) <= 2 {
					break
				}
			}
			if _, err := br.Discard(length); err != nil {
				return
			}
			if _, err := c.Write(resp); err != nil {
				return
			}
		}
	})
	s := newSender(t, deliver.Config{})
	req := newRequest(t, srv.url("http"))
	ctx, cancel := context.WithCancel(t.Context()) // cancelable, as the engine's is
	defer cancel()
	if res := s.Send(ctx, req); res.Err != nil {
		t.Fatal(res.Err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if res := s.Send(ctx, req); res.Err != nil {
			t.Fatal(res.Err)
		}
	})
	if allocs > 4 {
		t.Errorf("%.1f allocations per attempt, want at most 4", allocs)
	}
	t.Logf("%.1f allocations per attempt", allocs)
}

// A receiver that refuses a large body before reading it (a size limit:
// 413, then a close with the body unread, which resets the connection)
// still has its answer decide the outcome, not the failed write: a batch
// endpoint's 413 is what halves the batch.
func TestSendEarlyAnswerToALargeBody(t *testing.T) {
	limited := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1024)
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		}
	})
	closing := newRawServer(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Length: 9\r\n\r\ntoo large")
		c.Close()
	})
	for name, url := range map[string]string{"size limit": limited.URL, "close unread": closing.url("http")} {
		for _, size := range []int{64 << 10, 1 << 20, 8 << 20} {
			req := newRequest(t, url)
			req.Body = bytes.Repeat([]byte("x"), size)
			res := newSender(t, deliver.Config{}).Send(t.Context(), req)
			if se := asError[*deliver.StatusError](t, res.Err); se.Code != http.StatusRequestEntityTooLarge || res.Outcome() != deliver.Dead {
				t.Errorf("%s, %d bytes: got %v (outcome %v), want the 413", name, size, res.Err, res.Outcome())
			}
		}
	}
}

// A receiver that answers 413 as soon as it has the headers of a large
// request, keeps the connection open and stops reading leaves the client's
// write of the body stuck on full socket buffers until the deadline. Its
// answer is there all the while: the attempt must end with the 413 (dead,
// or a batch halved), not as a timeout to retry; and the connection, its
// request half written, must not be reused.
func TestSendEarlyAnswerWhileTheBodyIsStuck(t *testing.T) {
	serverTLS, clientTLS := testTLS(t)
	for _, scheme := range []string{"http", "https"} {
		t.Run(scheme, func(t *testing.T) {
			t.Parallel() // each mostly waits on a stuck write
			release := make(chan struct{})
			srv := newRawServer(t, func(c net.Conn) {
				c.(*net.TCPConn).SetReadBuffer(16 << 10)
				if scheme == "https" {
					c = tls.Server(c, serverTLS)
				}
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil { // the head, not the body
					return
				}
				io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 9\r\n\r\ntoo large")
				<-release // holding the connection open, reading nothing
			})
			releaseAtCleanup(t, release)
			dl := dialLog{small: true}
			// The limit leaves the server's goroutine ample time to answer
			// before the write gives up, even on a loaded machine.
			s := newSender(t, deliver.Config{Timeout: 2 * time.Second, Guard: dl.guard(t), TLSClientConfig: clientTLS})
			req := newRequest(t, srv.url(scheme))
			req.Body = bytes.Repeat([]byte("x"), 8<<20)
			for i := range 2 {
				res := s.Send(t.Context(), req)
				se := asError[*deliver.StatusError](t, res.Err)
				if se.Code != http.StatusRequestEntityTooLarge || se.Body != "too large" || res.Outcome() != deliver.Dead {
					t.Fatalf("attempt %d: got %v (outcome %v), want the 413", i+1, res.Err, res.Outcome())
				}
			}
			if n := srv.accepted.Load(); n != 2 {
				t.Errorf("%d connections for two attempts, want 2: a connection with its request half written is not reused", n)
			}
		})
	}
}

// An endpoint URL with characters a request-target cannot hold as they
// are (a raw space, non-ASCII, characters RFC 3986 leaves out, a "%" that
// starts no escape) still goes out as a valid request line: they are
// percent-encoded, never written raw. A raw space would end the target
// early, and a receiver would answer the malformed line with a 400,
// retried as its fault.
func TestSendEscapesTheRequestTarget(t *testing.T) {
	tests := []struct{ name, pathQuery, want string }{
		{"space in the query", "/hook?q=a b", "/hook?q=a%20b"},
		{"space in the path", "/in box?q=1", "/in%20box?q=1"},
		{"non-ASCII in the query", "/hook?q=é", "/hook?q=%C3%A9"},
		{"non-ASCII in the path", "/é", "/%C3%A9"},
		{"characters RFC 3986 leaves out", `/hook?q={"a"}|[b]^<c>\` + "`", "/hook?q=%7B%22a%22%7D%7C%5Bb%5D%5E%3Cc%3E%5C%60"},
		{"a % that starts no escape", "/hook?q=100%&r=%4", "/hook?q=100%25&r=%254"},
		{"valid already", "/a/%2F;b=c?x=%C3%A9&y=a+b:@/?!$'()*,~", "/a/%2F;b=c?x=%C3%A9&y=a+b:@/?!$'()*,~"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines := make(chan string, 1)
			srv := newRawServer(t, func(c net.Conn) {
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					offer(lines)(line)
					io.WriteString(c, "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
				}
			})
			res := newSender(t, deliver.Config{}).Send(t.Context(), newRequest(t, "http://"+srv.addr+tc.pathQuery))
			if res.Err != nil {
				t.Fatalf("Send: %v", res.Err)
			}
			line := wait(t, lines, 10*time.Second, "the request line arrived")
			if want := "POST " + tc.want + " HTTP/1.1\r\n"; line != want {
				t.Errorf("request line %q, want %q", line, want)
			}
		})
	}
}
