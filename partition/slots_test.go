package partition

import (
	"testing"
	"time"
)

func mustAcquire(t *testing.T, p *SlotPool, id string, n int) {
	t.Helper()
	for i := range n {
		if !p.Acquire(id) {
			t.Fatalf("%s was refused slot %d of %d", id, i+1, n)
		}
	}
}

// No endpoint holds more than half the slots, even when the instance is
// quiet: a slow endpoint that took them first would hold them until its
// attempts time out.
func TestSlotPoolCeilingIsHalfTheSlots(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewSlotPool(8, func() time.Time { return now })
	mustAcquire(t, p, "slow", 4)
	if p.Acquire("slow") {
		t.Fatal("one endpoint took more than half the slots")
	}
	mustAcquire(t, p, "healthy", 4)
}

// Once the cap binds, a freed slot goes to an endpoint below its fair share
// (the slots divided among the endpoints holding or waiting), never to one
// at or above it while another waits.
func TestSlotPoolSharesFairlyWhenTheCapBinds(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewSlotPool(8, func() time.Time { return now })
	mustAcquire(t, p, "slow", 4)
	mustAcquire(t, p, "a", 4)
	if p.Acquire("b") {
		t.Fatal("a slot beyond the cap")
	}
	p.Release("slow")
	if p.Acquire("slow") {
		t.Fatal("slow, at its share of 3, took the freed slot while b waits")
	}
	mustAcquire(t, p, "b", 1)
	p.Release("a")
	if p.Acquire("a") {
		t.Fatal("a, at its share of 3, took the freed slot while slow waits")
	}
	mustAcquire(t, p, "b", 1)
	if used, capacity := p.InUse(); used != 8 || capacity != 8 {
		t.Fatalf("in use %d of %d, want 8 of 8", used, capacity)
	}
}

// With nobody waiting an endpoint may use free slots beyond its share; a
// waiter that stops asking is forgotten and no longer holds others to
// their share; a release of a slot never taken changes nothing.
func TestSlotPoolIsWorkConserving(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewSlotPool(6, func() time.Time { return now })
	mustAcquire(t, p, "a", 1)
	mustAcquire(t, p, "b", 3)
	mustAcquire(t, p, "c", 2)
	if p.Acquire("a") {
		t.Fatal("a slot beyond the cap")
	}
	p.Release("b")
	if p.Acquire("b") {
		t.Fatal("b, at its share of 2, took a slot while a waits")
	}
	now = now.Add(2 * waitingFor) // a stopped asking
	mustAcquire(t, p, "b", 1)
	p.Release("unknown")
	if used, _ := p.InUse(); used != 6 {
		t.Fatalf("in use %d, want 6", used)
	}
}
