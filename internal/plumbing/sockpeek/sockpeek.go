// Package sockpeek looks at a connection's socket without reading from it:
// whether the peer has closed it, has sent bytes nobody has read yet, or is
// quiet. The sender checks a kept-alive connection with it before reusing
// it, and the benchmark receiver checks whether a sender gave up on a
// request.
package sockpeek

import (
	"crypto/tls"
	"net"
	"syscall"
)

// State is what a peek found.
type State int

const (
	// Unknown: the connection cannot be peeked at (not a socket, or not
	// on Linux).
	Unknown State = iota
	// Quiet: open, nothing to read.
	Quiet
	// Pending: open, with bytes waiting to be read.
	Pending
	// Closed: the peer closed or reset the connection.
	Closed
)

// Peeker peeks at one connection. Its parts are made once, so a Peek
// allocates nothing; it is not safe for concurrent use.
type Peeker struct {
	rc    syscall.RawConn // nil: Unknown
	state State
	fn    func(fd uintptr)
}

// New returns a Peeker for nc (for a TLS connection, its TCP connection).
func New(nc net.Conn) Peeker {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return Peeker{}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return Peeker{}
	}
	return Peeker{rc: rc}
}

// Peek looks at the socket without blocking. It runs through Control, not
// Read, so it does not wait for a read another goroutine has under way on
// the connection (an HTTP server's background read).
func (p *Peeker) Peek() State {
	if p.rc == nil {
		return Unknown
	}
	if p.fn == nil {
		p.fn = func(fd uintptr) { p.state = peek(fd) }
	}
	p.state = Unknown
	if p.rc.Control(p.fn) != nil {
		return Closed
	}
	return p.state
}
