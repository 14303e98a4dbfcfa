//go:build !linux

package validate

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }
