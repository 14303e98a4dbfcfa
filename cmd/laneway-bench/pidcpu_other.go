//go:build !linux

package main

import "time"

// pidCPU is not available here: the broker's CPU is not reported.
func pidCPU(int) time.Duration { return 0 }
