package engine

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/testkit/poll"
)

// Sequential attempts reuse one goroutine; concurrent ones get their own;
// stop waits for a running one and ends the idle ones.
func TestWorkersReuseAndDrain(t *testing.T) {
	var w workers
	var goroutines sync.Map
	var ran atomic.Int64
	for range 100 {
		done := make(chan struct{})
		w.run(func() {
			goroutines.Store(goroutineMarker(), true)
			ran.Add(1)
			close(done)
		})
		<-done
	}
	if n := countKeys(&goroutines); n > 2 {
		t.Errorf("100 sequential attempts ran on %d goroutines, want them reused", n)
	}

	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(10)
	for range 10 {
		w.run(func() { started.Done(); <-release; ran.Add(1) })
	}
	started.Wait() // ten at once: each on a worker of its own, or this hangs

	var atStop atomic.Int64
	stopped := make(chan struct{})
	go func() { w.stop(); atStop.Store(ran.Load()); close(stopped) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if poll.Until(ctx, time.Millisecond, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return w.stopped }) != nil {
		t.Fatal("condition not reached within 10s")
	}
	close(release) // only now can the ten attempts end
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return after the attempts ended")
	}
	if n := atStop.Load(); n != 110 {
		t.Errorf("stop returned after %d attempts, want all 110: it did not wait for the running ones", n)
	}
}

// goroutineMarker returns the calling goroutine's id, from the header of
// its stack trace ("goroutine 42 [running]:").
func goroutineMarker() string {
	buf := make([]byte, 64)
	fields := strings.Fields(string(buf[:runtime.Stack(buf, false)]))
	return fields[1]
}

func countKeys(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}
