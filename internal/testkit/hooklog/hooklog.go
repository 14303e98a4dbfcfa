// Package hooklog records what a component tells a hook (the engine stages'
// OnEvent), so that a test waits on what the component did, with a
// deadline, instead of polling its metrics.
package hooklog

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// shown is how many of the latest entries a failed Wait prints.
const shown = 20

// Log is the entries a hook was given, in order. The zero Log is not
// usable: New makes one.
type Log[E any] struct {
	mu      sync.Mutex
	entries []E
	changed chan struct{} // closed and replaced on every Add
}

// New returns an empty Log.
func New[E any]() *Log[E] { return &Log[E]{changed: make(chan struct{})} }

// Add records e. It is the hook itself: it only appends under a mutex, so
// it never blocks the component for long.
func (l *Log[E]) Add(e E) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
	close(l.changed)
	l.changed = make(chan struct{})
}

// Wait returns the first entry, from the start of the log, that match
// accepts, waiting for new ones until within passes; then it fails the
// test with what and the latest entries. match sees each entry once, in
// order, so it may count or sum them.
func (l *Log[E]) Wait(t testing.TB, within time.Duration, what string, match func(E) bool) E {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	seen := 0
	for {
		l.mu.Lock()
		for ; seen < len(l.entries); seen++ {
			if match(l.entries[seen]) {
				e := l.entries[seen]
				l.mu.Unlock()
				return e
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("nothing within %v: %s; %s", within, what, l.latest())
			var zero E
			return zero
		}
	}
}

// All returns a copy of the entries so far.
func (l *Log[E]) All() []E {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]E(nil), l.entries...)
}

// latest describes the last entries, for a failure message.
func (l *Log[E]) latest() string {
	all := l.All()
	if len(all) <= shown {
		return fmt.Sprintf("%d entries: %+v", len(all), all)
	}
	return fmt.Sprintf("%d entries, the last %d: %+v", len(all), shown, all[len(all)-shown:])
}
