package sockpeek

import (
	"errors"
	"syscall"
)

// peek asks the kernel for one byte without taking it or waiting: nothing
// to read (EAGAIN) is a quiet connection, 0 bytes the peer's close.
func peek(fd uintptr) State {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case errors.Is(err, syscall.EAGAIN):
		return Quiet
	case err == nil && n > 0:
		return Pending
	}
	return Closed
}
