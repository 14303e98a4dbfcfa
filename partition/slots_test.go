package partition

import (
	"math/rand/v2"
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

// Random asks and releases keep the pool's counts true: slots used are the
// sum held, never above the cap, none above the ceiling, and the count of
// waiting endpoints without a slot matches a recount.
func TestSlotPoolCountsStayTrue(t *testing.T) {
	now := time.Unix(0, 0)
	p := NewSlotPool(7, func() time.Time { return now })
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []string{"a", "b", "c", "d", "e"}
	for step := range 20000 {
		id := ids[rng.IntN(len(ids))]
		switch rng.IntN(3) {
		case 0, 1:
			p.Acquire(id)
		default:
			p.Release(id)
		}
		now = now.Add(time.Duration(rng.IntN(100)) * time.Millisecond)
		sum, only := 0, 0
		for _, n := range p.held {
			sum += n
			if n > p.ceiling() {
				t.Fatalf("step %d: an endpoint holds %d, above the ceiling %d", step, n, p.ceiling())
			}
		}
		for w := range p.waiting {
			if p.held[w] == 0 {
				only++
			}
		}
		if sum != p.used || p.used > p.cap || only != p.waitingOnly {
			t.Fatalf("step %d: used %d, held %d, cap %d, waiting without a slot %d (counted %d)", step, p.used, sum, p.cap, only, p.waitingOnly)
		}
	}
}
