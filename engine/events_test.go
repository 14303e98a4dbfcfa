package engine

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// eventLog collects a stage's events (DeliveryConfig.OnEvent) for tests
// that wait on what the stage did instead of polling its metrics.
type eventLog struct {
	mu      sync.Mutex
	events  []Event
	changed chan struct{} // closed and replaced on every event
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (l *eventLog) add(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
	close(l.changed)
	l.changed = make(chan struct{})
}

// wait waits until an event matches, or fails the test after within.
func (l *eventLog) wait(t *testing.T, within time.Duration, what string, match func(Event) bool) Event {
	t.Helper()
	deadline := time.After(within)
	seen := 0
	for {
		l.mu.Lock()
		for ; seen < len(l.events); seen++ {
			if match(l.events[seen]) {
				e := l.events[seen]
				l.mu.Unlock()
				return e
			}
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no event within %v: %s; events: %v", within, what, l.all())
			return Event{}
		}
	}
}

func (l *eventLog) all() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.events...)
}

// The stage tells its OnEvent hook about assignments, commits, parking and
// releases, in that order for one partition and lane.
func TestStageEvents(t *testing.T) {
	r := kfakeStageRig(t, 1)
	rc, release := heldReceiver(t)
	ep := testEndpoint("ep_1", rc.URL("/1"))
	ep.Paused = true
	events := newEventLog()
	s := r.startStage(stageOpts{endpoints: newFakeEndpoints(ep), breakers: newFakeBreakers(), tweak: func(c *DeliveryConfig) {
		c.OnEvent = events.add
	}})
	t.Cleanup(release)
	events.wait(t, time.Minute, "partition 0 assigned", func(e Event) bool { return e.Kind == EventAssigned && e.Partition == 0 })
	r.produce(0, testDelivery("ev1", "ep_1", "e1", 1))
	parked := events.wait(t, time.Minute, "the paused endpoint's lane parked", func(e Event) bool { return e.Kind == EventLaneParked })
	if parked.Endpoint != "ep_1" || parked.Reason != "paused" || parked.Partition != 0 {
		t.Fatalf("parked event %+v", parked)
	}
	events.wait(t, time.Minute, "the watermark past the parked delivery committed", func(e Event) bool {
		return e.Kind == EventCommitted && e.Offset >= 1
	})
	s.stop()
	events.wait(t, time.Minute, "partition 0 released", func(e Event) bool { return e.Kind == EventReleased && e.Partition == 0 })
}

// waitAttempts waits until n attempts to any endpoint ended with outcome.
func (l *eventLog) waitAttempts(t *testing.T, within time.Duration, outcome string, n int) {
	t.Helper()
	got := 0
	l.wait(t, within, fmt.Sprintf("%d attempts ending %s", n, outcome), func(e Event) bool {
		if e.Kind == EventAttempt && e.Reason == outcome {
			got++
		}
		return got >= n
	})
}
