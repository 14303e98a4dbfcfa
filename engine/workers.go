package engine

import "sync"

// maxIdleWorkers bounds the attempt goroutines kept waiting for work. Each
// keeps the stack an attempt grew it to (the owner's completion path is
// deep), so the bound is what a busy instance reuses, not its peak.
const maxIdleWorkers = 256

// workers runs attempts on goroutines that outlive one attempt. A new
// goroutine per attempt grows its stack anew every time (copying it twice
// or three times), which a profile showed as a few percent of a delivery's
// CPU; a reused one has grown already. The most recently idle worker takes
// the next attempt, so the warm ones stay busy and the rest stay parked.
type workers struct {
	mu      sync.Mutex
	idle    []chan func()
	stopped bool
	wg      sync.WaitGroup
}

// run runs fn on an idle worker, or on a new one.
func (w *workers) run(fn func()) {
	w.mu.Lock()
	if w.stopped { // a late completion's effect: run it untracked
		w.mu.Unlock()
		go fn()
		return
	}
	if n := len(w.idle); n > 0 {
		ch := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		ch <- fn // buffered: never blocks
		return
	}
	w.wg.Add(1)
	w.mu.Unlock()
	go w.loop(fn)
}

func (w *workers) loop(fn func()) {
	defer w.wg.Done()
	ch := make(chan func(), 1)
	for fn != nil {
		fn()
		if !w.park(ch) {
			return
		}
		fn = <-ch // nil once stop closes ch
	}
}

// park lists ch as idle unless enough workers are, or the pool stopped.
func (w *workers) park(ch chan func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped || len(w.idle) >= maxIdleWorkers {
		return false
	}
	w.idle = append(w.idle, ch)
	return true
}

// stop ends the idle workers and waits for every worker to end; call it
// once nothing calls run any more (the attempts have been waited for).
func (w *workers) stop() {
	w.mu.Lock()
	w.stopped = true
	for _, ch := range w.idle {
		close(ch)
	}
	w.idle = nil
	w.mu.Unlock()
	w.wg.Wait()
}
