package deliver_test

// Keep-alive over TLS, against a raw TLS receiver that decides how its
// records meet the wire.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/plumbing/tlsfiles/tlstest"
	"github.com/laneway/laneway/internal/security/ssrf"
)

// heldConn holds back what is written to it while hold is set, so that a
// test can put several TLS records on the wire in one write, or cut one
// short.
type heldConn struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	buf  bytes.Buffer
}

func (c *heldConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold {
		return c.buf.Write(p)
	}
	return c.Conn.Write(p)
}

// holdWrites starts holding back what is written.
func (c *heldConn) holdWrites() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = true
}

// release writes what is held back but its last keep bytes, in one write.
func (c *heldConn) release(keep int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, err := c.Conn.Write(c.buf.Next(max(c.buf.Len()-keep, 0)))
	return err
}

// testTLS returns a server config for 127.0.0.1 and a client config that
// trusts it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	files := tlstest.Write(t)
	cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(files.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		t.Fatal("no CA certificate in " + files.CA)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}}, &tls.Config{RootCAs: roots}
}

// A receiver that answers one request with two responses, a 503 and at
// once a 200, leaves the 200 inside the client's tls.Conn: pulled off the
// socket with the 503, as a whole record or part of one, so that neither
// the socket peek nor the bufio reader sees it. The next request must not
// take that stray 200 for its answer: the connection is not reused, and
// the request gets its own answer on a new one, which is kept.
func TestSendNeverReusesATLSConnectionWithBytesPending(t *testing.T) {
	const (
		failed   = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
		stray    = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
		accepted = "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
	)
	tests := []struct {
		name string
		// sent is how many bytes of the stray record go out with the 503
		// (-1: all); the rest follow when the next request arrives on the
		// connection.
		sent int
	}{
		{"stray record whole", -1},
		{"stray record's header in part", 2},
		{"stray record's body in part", 8},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			serverTLS, clientTLS := testTLS(t)
			var conns atomic.Int64
			srv := newRawServer(t, func(c net.Conn) {
				held := &heldConn{Conn: c}
				sc := tls.Server(held, serverTLS)
				br := bufio.NewReader(sc)
				if conns.Add(1) == 1 {
					answerTwice(br, sc, held, failed, stray, tc.sent)
					return
				}
				for {
					if _, err := readRequestFrom(br); err != nil {
						return
					}
					if _, err := io.WriteString(sc, accepted); err != nil {
						return
					}
				}
			})
			s := newSender(t, deliver.Config{TLSClientConfig: clientTLS})
			if res := s.Send(t.Context(), newRequest(t, srv.url("https"))); res.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("first attempt: status %d (%v), want the 503", res.StatusCode, res.Err)
			}
			res := s.Send(t.Context(), newRequest(t, srv.url("https")))
			if res.StatusCode != http.StatusAccepted || res.Err != nil {
				t.Fatalf("second attempt: status %d (%v), want its own answer, 202 on a new connection, not the stray 200", res.StatusCode, res.Err)
			}
			// A connection with nothing pending is still reused.
			if res := s.Send(t.Context(), newRequest(t, srv.url("https"))); res.StatusCode != http.StatusAccepted {
				t.Fatalf("third attempt: status %d (%v), want 202", res.StatusCode, res.Err)
			}
			if n := srv.accepted.Load(); n != 2 {
				t.Errorf("%d connections for three attempts, want 2: the one with the stray response closed, the next one kept", n)
			}
		})
	}
}

// answerTwice reads one request and answers it with two responses, one TLS
// record each, written to the wire in one write: the first record and sent
// bytes of the second (all of it if sent < 0). The rest of the second
// follows only when another request arrives on the connection.
func answerTwice(br *bufio.Reader, sc *tls.Conn, held *heldConn, first, second string, sent int) {
	if _, err := readRequestFrom(br); err != nil {
		return
	}
	held.holdWrites()
	if _, err := io.WriteString(sc, first); err != nil {
		return
	}
	firstLen := held.buf.Len()
	if _, err := io.WriteString(sc, second); err != nil {
		return
	}
	keep := 0
	if sent >= 0 {
		keep = held.buf.Len() - firstLen - sent
	}
	if held.release(keep) != nil || keep == 0 {
		return
	}
	if _, err := readRequestFrom(br); err == nil {
		_ = held.release(0)
	}
}

// opsConn records, in order, the reads that got bytes (r), the writes (w)
// and the close (c) on a connection.
type opsConn struct {
	net.Conn
	mu  sync.Mutex
	ops []byte
}

func (c *opsConn) note(op byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops = append(c.ops, op)
}

func (c *opsConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.note('r')
	}
	return n, err
}

func (c *opsConn) Write(p []byte) (int, error) {
	c.note('w')
	return c.Conn.Write(p)
}

func (c *opsConn) Close() error {
	c.note('c')
	return c.Conn.Close()
}

// A TLS connection the sender drops is closed without a write: no
// close_notify alert. tls.Conn.Close writes one under a deadline of its own,
// 5 s, so a receiver that reads nothing more (the one of
// TestSendEarlyAnswerWhileTheBodyIsStuck) would hold the attempt that long
// past its deadline.
func TestSendDropsATLSConnectionWithoutWriting(t *testing.T) {
	serverTLS, clientTLS := testTLS(t)
	release := make(chan struct{})
	srv := newRawServer(t, func(c net.Conn) {
		sc := tls.Server(c, serverTLS)
		if _, err := readRequestFrom(bufio.NewReader(sc)); err != nil {
			return
		}
		io.WriteString(sc, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
		<-release
	})
	releaseAtCleanup(t, release)
	conns := make(chan *opsConn, 1)
	dialer := &net.Dialer{}
	guard, err := ssrf.NewGuard(ssrf.Config{Allow: loopback, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		oc := &opsConn{Conn: c}
		offer(conns)(oc)
		return oc, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := newSender(t, deliver.Config{Guard: guard, TLSClientConfig: clientTLS})
	if res := s.Send(t.Context(), newRequest(t, srv.url("https"))); res.Err != nil {
		t.Fatalf("Send: %v", res.Err)
	}
	oc := wait(t, conns, 10*time.Second, "the sender dialled")
	oc.mu.Lock()
	ops := string(oc.ops)
	oc.mu.Unlock()
	if !strings.HasSuffix(ops, "rc") {
		t.Errorf("operations on the connection %q, want the response read and then the close, nothing written between", ops)
	}
}
