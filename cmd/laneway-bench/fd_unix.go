//go:build unix

package main

import "syscall"

// openFileLimit is the process's soft limit on open files, or 0 if unknown.
func openFileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return int(min(rl.Cur, 1<<30))
}
