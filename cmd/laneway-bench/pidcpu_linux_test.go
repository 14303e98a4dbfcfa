//go:build linux

package main

import (
	"os"
	"testing"
	"time"
)

// pidCPU reads a process's CPU from /proc: this process's, once it has
// burnt some, is at least that and within a tick of what getrusage says.
func TestPidCPUReadsAProcess(t *testing.T) {
	if pidCPU(0) != 0 || pidCPU(-1) != 0 {
		t.Fatal("a pid of 0 or below must read as no CPU")
	}
	before := pidCPU(os.Getpid())
	deadline := time.Now().Add(10 * time.Second)
	x := 0
	for pidCPU(os.Getpid()) < before+50*time.Millisecond {
		for i := range 1_000_000 {
			x += i
		}
		if time.Now().After(deadline) {
			t.Fatalf("pidCPU did not grow while this process burnt CPU (%d)", x)
		}
	}
	got, want := pidCPU(os.Getpid()), processCPU()
	if d := want - got; d < 0 || d > time.Second {
		t.Fatalf("pidCPU %v, getrusage %v: they should agree within the /proc tick", got, want)
	}
}
