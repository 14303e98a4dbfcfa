package deliver

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// peeker tells whether an idle connection is still open and quiet: it
// peeks at the socket without blocking. The server closing it (a FIN or a
// reset) or sending anything unasked (bytes of no request, a TLS alert)
// makes it unfit for the next request. Without this, an attempt would
// write its request into a connection the server had already closed and
// fail, where net/http's reader goroutine per connection would have
// noticed the close. Its parts are made once per connection, so a check
// allocates nothing.
type peeker struct {
	rc   syscall.RawConn // nil: cannot peek, assume open
	open bool
	fn   func(fd uintptr) bool
}

func newPeeker(nc net.Conn) peeker {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return peeker{}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return peeker{}
	}
	p := peeker{rc: rc}
	return p
}

func (p *peeker) alive() bool {
	if p.rc == nil {
		return true
	}
	if p.fn == nil {
		p.fn = func(fd uintptr) bool {
			var b [1]byte
			// Nothing to read (EAGAIN) is the only answer of an open, quiet
			// connection: 0 bytes is the server's close, more is unasked data.
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			p.open = errors.Is(err, syscall.EAGAIN)
			return true // never wait for readability
		}
	}
	p.open = false
	return p.rc.Read(p.fn) == nil && p.open
}
