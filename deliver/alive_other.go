//go:build !linux

package deliver

import "net"

// peeker cannot peek at a socket portably; a closed connection fails its
// attempt, which is retried after its delay like any transport error.
type peeker struct{}

func newPeeker(net.Conn) peeker { return peeker{} }

func (*peeker) alive() bool { return true }
