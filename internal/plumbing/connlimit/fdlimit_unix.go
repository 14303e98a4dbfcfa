//go:build unix

package connlimit

import "syscall"

// DefaultTotal is Limits.Total's default: an eighth of the process's
// file-descriptor limit (Go raises the soft limit to the hard one at
// start), at least 64.
func DefaultTotal() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur == 0 {
		return fallbackTotal
	}
	return int(max(minTotal, min(lim.Cur/8, 1<<20)))
}
