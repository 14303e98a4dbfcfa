package deliver

import (
	"errors"
	"net"
)

// A response of a TLS connection can be followed by bytes the client has
// pulled off the socket but nobody has read: tls.Conn reads as much as the
// socket holds, decrypts one record per Read and keeps the rest, whole
// records or part of one, in its own buffer. Neither the socket peek nor
// the bufio reader sees them, and a connection reused with them takes them
// for the answer to its next request (a stray 200 after a 503 would count a
// delivery the receiver never answered). recordConn lets the pool see them
// without waiting on the network: see conn.tlsPending.

// recordHeaderLen is the size of a TLS record header: type, version,
// length.
const recordHeaderLen = 5

// recordConn is the TCP connection under a tls.Conn. It follows the record
// framing of the bytes it passes up, so that it knows whether tls.Conn holds
// part of a record, and while held it refuses to read, so that a read
// through tls.Conn returns only what tls.Conn already holds.
type recordConn struct {
	net.Conn
	hdr  [recordHeaderLen]byte
	hdrN int  // bytes of the current record's header passed up
	left int  // bytes of the current record's body still to pass up
	held bool // Read refuses with errHeld
}

func (r *recordConn) Read(p []byte) (int, error) {
	if r.held {
		return 0, errHeld
	}
	n, err := r.Conn.Read(p)
	r.follow(p[:n])
	return n, err
}

// follow moves over the records in b: a few steps per record, not per byte.
func (r *recordConn) follow(b []byte) {
	for len(b) > 0 {
		if r.left > 0 {
			k := min(r.left, len(b))
			r.left, b = r.left-k, b[k:]
			continue
		}
		k := copy(r.hdr[r.hdrN:], b)
		r.hdrN, b = r.hdrN+k, b[k:]
		if r.hdrN == recordHeaderLen {
			r.left, r.hdrN = int(r.hdr[3])<<8|int(r.hdr[4]), 0
		}
	}
}

// inRecord reports whether tls.Conn holds part of a record: bytes that
// came after the last whole one.
func (r *recordConn) inRecord() bool { return r.hdrN > 0 || r.left > 0 }

// errHeld is the read a held recordConn refuses. It is a temporary
// net.Error, as a timeout is, because tls.Conn keeps its state after those
// and fails for good after any other error.
var errHeld error = heldError{}

type heldError struct{}

func (heldError) Error() string   { return "deliver: socket read held" }
func (heldError) Timeout() bool   { return true }
func (heldError) Temporary() bool { return true }

// tlsPending reports whether c's tls.Conn holds bytes that nobody has read:
// part of a record, a record it can decrypt, or decrypted bytes it has not
// handed out. It costs no system call: the read through tls.Conn is held
// at the socket, so it returns at once with what tls.Conn has or with
// errHeld. A post-handshake message (a session ticket) is taken in on the
// way and is not counted. A plain connection has no such buffer: its
// bufio reader and the socket peek see everything.
func (c *conn) tlsPending() bool {
	if c.rec == nil {
		return false
	}
	if c.rec.inRecord() {
		return true
	}
	c.rec.held = true
	n, err := c.nc.Read(c.probe[:])
	c.rec.held = false
	return n > 0 || !errors.Is(err, errHeld)
}
