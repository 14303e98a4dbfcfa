//go:build unix

package engine

import "syscall"

// DefaultMaxInFlight is half the process's file-descriptor limit (Go
// raises the soft limit to the hard one at start), at least 64: each
// attempt holds a connection, and Kafka, Redis and the listeners need the
// rest.
func DefaultMaxInFlight() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return fallbackMaxInFlight
	}
	return int(max(64, min(lim.Cur/2, 1<<20)))
}
