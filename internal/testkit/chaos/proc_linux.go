package chaos

import "syscall"

// childAttr makes a laneway process get SIGKILL when the harness dies, so a
// harness that crashes leaves no instance behind.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
