package validate

import "syscall"

// childAttr makes a started process die with the test binary, even when a
// test timeout ends it without running any cleanup.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
