package deliver

import (
	"bufio"
	"net"
	"sync"
	"time"

	"github.com/laneway/laneway/internal/plumbing/sockpeek"
)

// conn is one keep-alive HTTP/1.1 connection, used by one attempt at a time.
type conn struct {
	nc     net.Conn
	br     *bufio.Reader
	poolID string
	idleAt time.Time // when it went back to the pool
	reused bool      // taken from the pool rather than dialled for this attempt
	// interrupt ends the exchange under way (a canceled caller); made once
	// per connection so that watching an attempt allocates no closure.
	interrupt func()
	peek      sockpeek.Peeker // see connPool.get
	rec       *recordConn     // under nc if it is TLS, else nil: see tlsPending
	probe     [1]byte
}

// newConn wraps nc, which is a tls.Conn over rec when rec is not nil.
func newConn(nc net.Conn, rec *recordConn, poolID string) *conn {
	c := &conn{nc: nc, br: bufio.NewReaderSize(nc, connReadBuffer), poolID: poolID, rec: rec}
	c.interrupt = func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) }
	if rec != nil {
		c.peek = sockpeek.New(rec.Conn)
	} else {
		c.peek = sockpeek.New(nc)
	}
	return c
}

// close closes c's socket. A TLS connection goes without a close_notify
// alert: tls.Conn.Close writes one under a deadline of its own, 5 s, and
// a receiver that reads nothing more would hold the attempt that long past
// its deadline. Nothing is lost without it: a request is framed by its
// Content-Length, so a receiver cannot take a cut one for whole.
func (c *conn) close() {
	if c.rec != nil {
		_ = c.rec.Conn.Close()
		return
	}
	_ = c.nc.Close()
}

// connReadBuffer is each connection's response buffer: a response head
// (status line and headers) of a usual size fits in one read.
const connReadBuffer = 4 << 10

// connPool keeps idle connections per pool id (scheme and address), the
// most recently used first: a busy endpoint reuses its warm connections and
// the others age out. Nothing runs in the background but one timer, armed
// while connections are idle, that closes those idle past idleTimeout.
type connPool struct {
	maxIdle     int
	idleTimeout time.Duration

	mu     sync.Mutex
	idle   map[string][]*conn
	count  int // idle connections in all lists
	sweep  *time.Timer
	closed bool
}

func newConnPool(maxIdle int, idleTimeout time.Duration) *connPool {
	return &connPool{maxIdle: maxIdle, idleTimeout: idleTimeout, idle: map[string][]*conn{}}
}

// get returns an idle connection for poolID that is still open, or nil.
func (p *connPool) get(poolID string, now time.Time) *conn {
	for {
		c, expired := p.pop(poolID, now)
		switch {
		case c == nil:
			return nil
		case expired || !reusable(c.peek.Peek()):
			c.close()
		default:
			c.reused = true
			return c
		}
	}
}

// reusable says whether a peek leaves an idle connection fit for the next
// request. The server closing it (a FIN or a reset) or sending anything
// unasked (bytes of no request, a TLS alert) makes it unfit. Without the
// peek, an attempt would write its request into a connection the server
// had already closed and fail, where net/http's reader goroutine per
// connection would have noticed the close. Where no peek is possible, a
// closed connection fails its attempt, retried after its delay like any
// transport error.
func reusable(s sockpeek.State) bool { return s == sockpeek.Quiet || s == sockpeek.Unknown }

func (p *connPool) pop(poolID string, now time.Time) (c *conn, expired bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[poolID]
	if len(list) == 0 {
		return nil, false
	}
	c = list[len(list)-1]
	list[len(list)-1] = nil
	p.idle[poolID] = list[:len(list)-1] // kept when empty: put reuses it
	p.count--
	return c, now.Sub(c.idleAt) > p.idleTimeout
}

// put returns c for reuse, or closes it when its pool id already keeps
// maxIdle connections or the pool is closed.
func (p *connPool) put(c *conn, now time.Time) {
	// Clear the attempt's deadline: the next attempt sets its own, and the
	// staleness check must not find an expired one.
	if err := c.nc.SetDeadline(time.Time{}); err != nil {
		c.close()
		return
	}
	c.idleAt = now
	p.mu.Lock()
	if p.closed || len(p.idle[c.poolID]) >= p.maxIdle {
		p.mu.Unlock()
		c.close()
		return
	}
	p.idle[c.poolID] = append(p.idle[c.poolID], c)
	p.count++
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.idleTimeout, p.closeExpired)
	}
	p.mu.Unlock()
}

// closeExpired closes the connections idle past idleTimeout and re-arms the
// timer while any stay idle.
func (p *connPool) closeExpired() {
	var expired []*conn
	p.mu.Lock()
	cutoff := time.Now().Add(-p.idleTimeout)
	for id, list := range p.idle {
		kept := list[:0]
		for _, c := range list {
			if c.idleAt.Before(cutoff) {
				expired = append(expired, c)
			} else {
				kept = append(kept, c)
			}
		}
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(p.idle, id)
		} else {
			p.idle[id] = kept
		}
	}
	p.count -= len(expired)
	p.sweep = nil
	if p.count > 0 && !p.closed {
		p.sweep = time.AfterFunc(p.idleTimeout/2, p.closeExpired)
	}
	p.mu.Unlock()
	for _, c := range expired {
		c.close()
	}
}

// close closes every idle connection; connections in use are closed when
// they come back.
func (p *connPool) close() {
	p.mu.Lock()
	p.closed = true
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	idle := p.idle
	p.idle = map[string][]*conn{}
	p.count = 0
	p.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.close()
		}
	}
}
