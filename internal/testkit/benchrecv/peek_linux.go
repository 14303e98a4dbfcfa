package benchrecv

import (
	"errors"
	"net"
	"syscall"
)

// connOpen reports whether the client has not closed c: a peek that finds
// nothing to read (EAGAIN) or unread bytes means open; end of file or an
// error means closed. Unknown connections count as open.
func connOpen(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	open := true
	// Control, not Read: the server's own background read holds the
	// connection's read lock while it waits, and Read would wait for it.
	_ = rc.Control(func(fd uintptr) {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		open = errors.Is(err, syscall.EAGAIN) || (err == nil && n > 0)
	})
	return open
}
