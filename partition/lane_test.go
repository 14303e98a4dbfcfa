package partition

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// Helpers carry a lane prefix: other files of package partition have tests too.

var laneT0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func laneAt(sec int) time.Time { return laneT0.Add(time.Duration(sec) * time.Second) }

// laneFact and laneState build tasks; offsets only need to be unique per test.
func laneFact(entity string, offset int64) *Task {
	return &Task{Offset: offset, Entity: entity, Revision: offset, EnqueuedAt: laneT0}
}

func laneStateTask(entity string, offset, revision int64) *Task {
	return &Task{Offset: offset, Entity: entity, Revision: revision, Coalesce: true, EnqueuedAt: laneT0}
}

func lanePushAll(t *testing.T, l *Lane, tasks ...*Task) {
	t.Helper()
	for _, task := range tasks {
		if sup := l.Push(task); sup != nil {
			t.Fatalf("Push(%s@%d) superseded %v, want nothing", task.Entity, task.Offset, laneOffsets(sup))
		}
	}
}

func laneOffsets(tasks []*Task) []int64 {
	out := make([]int64, len(tasks))
	for i, t := range tasks {
		out[i] = t.Offset
	}
	return out
}

// laneStartAll calls Next until it returns nil and returns what started.
func laneStartAll(l *Lane, now time.Time) []*Task {
	var started []*Task
	for t := l.Next(now); t != nil; t = l.Next(now) {
		started = append(started, t)
	}
	return started
}

func laneWantNext(t *testing.T, l *Lane, now time.Time, want *Task) {
	t.Helper()
	got := l.Next(now)
	if got != want {
		t.Fatalf("Next() = %s, want %s", laneTaskName(got), laneTaskName(want))
	}
}

func laneTaskName(t *Task) string {
	if t == nil {
		return "nil"
	}
	return fmt.Sprintf("%s@%d", t.Entity, t.Offset)
}

func laneWantCounts(t *testing.T, l *Lane, pending, inFlight, entities int) {
	t.Helper()
	if l.Pending() != pending || l.InFlight() != inFlight || l.Entities() != entities {
		t.Fatalf("Pending, InFlight, Entities = %d, %d, %d; want %d, %d, %d",
			l.Pending(), l.InFlight(), l.Entities(), pending, inFlight, entities)
	}
	if idle := pending == 0 && inFlight == 0; l.Idle() != idle {
		t.Fatalf("Idle() = %v, want %v", l.Idle(), idle)
	}
}

func TestLaneFIFOPerEntityAndOneInFlight(t *testing.T) {
	l := NewLane("ep", 10)
	a1, a2, a3, b1 := laneFact("a", 1), laneFact("a", 2), laneFact("a", 3), laneFact("b", 4)
	lanePushAll(t, l, a1, a2, a3, b1)
	laneWantCounts(t, l, 4, 0, 2)

	laneWantNext(t, l, laneT0, a1)
	laneWantNext(t, l, laneT0, b1)
	laneWantNext(t, l, laneT0, nil) // a2 waits for a1 despite free slots
	laneWantCounts(t, l, 2, 2, 2)

	if !l.Finish(b1) {
		t.Fatal("Finish(b1) = false")
	}
	laneWantNext(t, l, laneT0, nil) // b is gone, a still busy
	laneWantCounts(t, l, 2, 1, 1)

	l.Finish(a1)
	laneWantNext(t, l, laneT0, a2)
	laneWantNext(t, l, laneT0, nil)
	l.Finish(a2)
	laneWantNext(t, l, laneT0, a3)
	l.Finish(a3)
	laneWantCounts(t, l, 0, 0, 0)
}

func TestLaneNeverExceedsMaxConcurrency(t *testing.T) {
	l := NewLane("ep", 3)
	var tasks []*Task
	for i := range 10 {
		tasks = append(tasks, laneFact(fmt.Sprint("e", i), int64(i)))
	}
	lanePushAll(t, l, tasks...)

	started := laneStartAll(l, laneT0)
	if len(started) != 3 {
		t.Fatalf("started %d tasks with max 3", len(started))
	}
	if _, ok := l.NextWakeup(); ok {
		t.Fatal("NextWakeup() reported a wakeup on a full lane")
	}
	l.Finish(started[1])
	if more := laneStartAll(l, laneT0); len(more) != 1 {
		t.Fatalf("started %d tasks after one finished, want 1", len(more))
	}
	laneWantCounts(t, l, 6, 3, 9) // the finished entity is gone
}

// TestLaneNextWakeupIsQuietWhileFull: a full lane must not ask for a timer,
// or the owner would wake up for a head it cannot start.
func TestLaneNextWakeupIsQuietWhileFull(t *testing.T) {
	l := NewLane("ep", 1)
	a, b := laneFact("a", 1), laneFact("b", 2)
	b.NotBefore = laneAt(10)
	lanePushAll(t, l, a, b)
	laneWantNext(t, l, laneAt(0), a)
	if at, ok := l.NextWakeup(); ok {
		t.Fatalf("NextWakeup() = %v on a full lane", at)
	}
	l.Finish(a)
	if at, ok := l.NextWakeup(); !ok || !at.Equal(laneAt(10)) {
		t.Fatalf("NextWakeup() = %v, %v; want %v", at, ok, laneAt(10))
	}
}

func TestLaneSetMaxConcurrency(t *testing.T) {
	l := NewLane("ep", 2)
	for i := range 8 {
		lanePushAll(t, l, laneFact(fmt.Sprint("e", i), int64(i)))
	}
	running := laneStartAll(l, laneT0)
	if len(running) != 2 {
		t.Fatalf("started %d with max 2", len(running))
	}

	l.SetMaxConcurrency(5)
	running = append(running, laneStartAll(l, laneT0)...)
	if len(running) != 5 {
		t.Fatalf("in flight %d after raising max to 5", len(running))
	}

	l.SetMaxConcurrency(2) // lowering cancels nothing
	laneWantCounts(t, l, 3, 5, 8)
	for i := range 3 {
		l.Finish(running[i])
		if got := laneStartAll(l, laneT0); len(got) != 0 {
			t.Fatalf("started %d while %d in flight above max 2", len(got), l.InFlight())
		}
	}
	l.Finish(running[3]) // one in flight now: one slot under max 2
	if got := laneStartAll(l, laneT0); len(got) != 1 {
		t.Fatalf("started %d after dropping under max, want 1", len(got))
	}

	l.SetMaxConcurrency(0)
	if l.MaxConcurrency() != 1 {
		t.Fatalf("SetMaxConcurrency(0) left max %d, want 1", l.MaxConcurrency())
	}
}

// TestLaneRoundRobinFairness: a hot entity with 1000 queued tasks, pushed
// first, must not delay ten entities with one task each.
func TestLaneRoundRobinFairness(t *testing.T) {
	const maxConc = 4
	l := NewLane("ep", maxConc)
	for i := range 1000 {
		lanePushAll(t, l, laneFact("hot", int64(i)))
	}
	cold := map[*Task]bool{}
	for i := range 10 {
		c := laneFact(fmt.Sprint("cold", i), int64(1000+i))
		cold[c] = true
		lanePushAll(t, l, c)
	}

	// Workers finish tasks in the order they started them.
	var inFlight, starts []*Task
	for len(starts) < maxConc+10 {
		started := laneStartAll(l, laneT0)
		starts = append(starts, started...)
		inFlight = append(inFlight, started...)
		if len(inFlight) == 0 {
			t.Fatal("nothing in flight and nothing started")
		}
		l.Finish(inFlight[0])
		inFlight = inFlight[1:]
	}
	for _, s := range starts[:maxConc+10] {
		delete(cold, s)
	}
	if len(cold) != 0 {
		t.Fatalf("%d cold entities not started within the first %d starts: %v",
			len(cold), maxConc+10, laneOffsets(starts))
	}
}

// TestLaneFinishedEntityGoesToTheBack checks the turn order exactly: ready
// entities are served in turn, and an entity whose task ends queues behind
// the ones already waiting.
func TestLaneFinishedEntityGoesToTheBack(t *testing.T) {
	l := NewLane("ep", 1)
	a1, a2, b1, c1 := laneFact("a", 1), laneFact("a", 2), laneFact("b", 3), laneFact("c", 4)
	lanePushAll(t, l, a1, a2, b1, c1)
	laneWantNext(t, l, laneT0, a1)
	l.Finish(a1)
	laneWantNext(t, l, laneT0, b1)
	l.Finish(b1)
	laneWantNext(t, l, laneT0, c1)
	l.Finish(c1)
	laneWantNext(t, l, laneT0, a2)
}

func TestLaneRetryKeepsOrderAndDelays(t *testing.T) {
	l := NewLane("ep", 4)
	a1, a2, b1 := laneFact("a", 1), laneFact("a", 2), laneFact("b", 3)
	lanePushAll(t, l, a1, a2, b1)
	laneWantNext(t, l, laneAt(0), a1)
	laneWantNext(t, l, laneAt(0), b1)

	if !l.Retry(a1, laneAt(10)) {
		t.Fatal("Retry(a1) = false")
	}
	if !a1.NotBefore.Equal(laneAt(10)) {
		t.Fatalf("a1.NotBefore = %v, want %v", a1.NotBefore, laneAt(10))
	}
	laneWantCounts(t, l, 2, 1, 2)
	l.Finish(b1)

	laneWantNext(t, l, laneAt(9), nil) // neither a1 early nor a2 past it
	if at, ok := l.NextWakeup(); !ok || !at.Equal(laneAt(10)) {
		t.Fatalf("NextWakeup() = %v, %v; want %v", at, ok, laneAt(10))
	}

	c1 := laneFact("c", 4)
	lanePushAll(t, l, c1)
	laneWantNext(t, l, laneAt(9), c1) // others are served meanwhile

	laneWantNext(t, l, laneAt(10), a1)
	if _, ok := l.NextWakeup(); ok {
		t.Fatal("NextWakeup() reported a wakeup with nothing waiting")
	}
	laneWantNext(t, l, laneAt(10), nil)
	l.Finish(a1)
	laneWantNext(t, l, laneAt(10), a2)
}

func TestLaneRetryWaitersRejoinInDueOrder(t *testing.T) {
	l := NewLane("ep", 10)
	a, b, c := laneFact("a", 1), laneFact("b", 2), laneFact("c", 3)
	lanePushAll(t, l, a, b, c)
	laneStartAll(l, laneAt(0))
	l.Retry(a, laneAt(30))
	l.Retry(b, laneAt(10))
	l.Retry(c, laneAt(20))
	if at, _ := l.NextWakeup(); !at.Equal(laneAt(10)) {
		t.Fatalf("NextWakeup() = %v, want %v", at, laneAt(10))
	}
	got := laneStartAll(l, laneAt(60))
	if want := []*Task{b, c, a}; !slices.Equal(got, want) {
		t.Fatalf("started %v, want %v", laneOffsets(got), laneOffsets(want))
	}
}

// TestLaneClockGoingBackDoesNotStartEarly: an entity promoted at one time
// must not start when a later call passes an earlier now.
func TestLaneClockGoingBackDoesNotStartEarly(t *testing.T) {
	l := NewLane("ep", 2)
	if l.EndpointID() != "ep" {
		t.Fatalf("EndpointID() = %q", l.EndpointID())
	}
	a, b, c := laneFact("a", 1), laneFact("b", 2), laneFact("c", 3)
	lanePushAll(t, l, a, b)
	laneStartAll(l, laneAt(0))
	l.Retry(a, laneAt(5))
	lanePushAll(t, l, c)
	laneWantNext(t, l, laneAt(5), c) // promotes a behind c
	l.Finish(b)
	laneWantNext(t, l, laneAt(3), nil)
	if at, ok := l.NextWakeup(); !ok || !at.Equal(laneAt(5)) {
		t.Fatalf("NextWakeup() = %v, %v; want %v", at, ok, laneAt(5))
	}
	laneWantNext(t, l, laneAt(5), a)
}

func TestLaneFinishAndRetryRefuseTasksNotInFlight(t *testing.T) {
	l := NewLane("ep", 1)
	a1, a2, b1 := laneFact("a", 1), laneFact("a", 2), laneFact("b", 3)
	stranger := laneFact("z", 9)
	lanePushAll(t, l, a1, a2, b1)
	laneWantNext(t, l, laneT0, a1)

	for _, task := range []*Task{a2, b1, stranger} {
		if l.Finish(task) || l.Retry(task, laneAt(5)) {
			t.Fatalf("Finish or Retry accepted %s, which is not in flight", laneTaskName(task))
		}
	}
	laneWantCounts(t, l, 2, 1, 2)
	l.Finish(a1)
	if l.Finish(a1) {
		t.Fatal("second Finish(a1) = true")
	}
	laneWantCounts(t, l, 2, 0, 2)
}

func TestLanePushCoalescing(t *testing.T) {
	t.Run("newer state replaces the pending one", func(t *testing.T) {
		l := NewLane("ep", 1)
		r1, r2 := laneStateTask("a", 1, 1), laneStateTask("a", 2, 2)
		lanePushAll(t, l, r1)
		if sup := l.Push(r2); !slices.Equal(sup, []*Task{r1}) {
			t.Fatalf("Push(r2) superseded %v, want [r1]", laneOffsets(sup))
		}
		laneWantCounts(t, l, 1, 0, 1)
		laneWantNext(t, l, laneT0, r2)
	})

	t.Run("older state is dropped", func(t *testing.T) {
		l := NewLane("ep", 1)
		r5, r4 := laneStateTask("a", 1, 5), laneStateTask("a", 2, 4)
		lanePushAll(t, l, r5)
		if sup := l.Push(r4); !slices.Equal(sup, []*Task{r4}) {
			t.Fatalf("Push(r4) superseded %v, want [r4]", laneOffsets(sup))
		}
		laneWantCounts(t, l, 1, 0, 1)
		laneWantNext(t, l, laneT0, r5)
	})

	t.Run("the in-flight task is never replaced", func(t *testing.T) {
		l := NewLane("ep", 1)
		r1, r2, r3, r0 := laneStateTask("a", 1, 1), laneStateTask("a", 2, 2), laneStateTask("a", 3, 3), laneStateTask("a", 4, 0)
		lanePushAll(t, l, r1)
		laneWantNext(t, l, laneT0, r1)
		lanePushAll(t, l, r2) // r1 runs: r2 queues behind it
		laneWantCounts(t, l, 1, 1, 1)
		if sup := l.Push(r3); !slices.Equal(sup, []*Task{r2}) {
			t.Fatalf("Push(r3) superseded %v, want [r2]", laneOffsets(sup))
		}
		if sup := l.Push(r0); !slices.Equal(sup, []*Task{r0}) {
			t.Fatalf("Push(r0) superseded %v, want [r0]", laneOffsets(sup))
		}
		l.Finish(r1)
		laneWantNext(t, l, laneT0, r3)
		laneWantCounts(t, l, 0, 1, 1)
	})

	t.Run("facts are never merged and fence states", func(t *testing.T) {
		l := NewLane("ep", 1)
		s1, f2, s3, f4 := laneStateTask("a", 1, 1), laneFact("a", 2), laneStateTask("a", 3, 3), laneFact("a", 4)
		lanePushAll(t, l, s1, f2, s3, f4)
		laneWantCounts(t, l, 4, 0, 1)
		for _, want := range []*Task{s1, f2, s3, f4} {
			laneWantNext(t, l, laneT0, want)
			l.Finish(want)
		}
	})

	t.Run("only the last pending task is compared", func(t *testing.T) {
		l := NewLane("ep", 1)
		s1, s2, f3, s4 := laneStateTask("a", 1, 1), laneStateTask("a", 2, 2), laneFact("a", 3), laneStateTask("a", 4, 9)
		lanePushAll(t, l, s1)
		l.Push(s2)
		lanePushAll(t, l, f3, s4)
		laneWantCounts(t, l, 3, 0, 1)
		for _, want := range []*Task{s2, f3, s4} {
			laneWantNext(t, l, laneT0, want)
			l.Finish(want)
		}
	})

	t.Run("other entities are untouched", func(t *testing.T) {
		l := NewLane("ep", 1)
		lanePushAll(t, l, laneStateTask("a", 1, 1), laneStateTask("b", 2, 2))
		laneWantCounts(t, l, 2, 0, 2)
	})

	t.Run("a replacement keeps the retry delay", func(t *testing.T) {
		l := NewLane("ep", 2)
		r1, b1, r2 := laneStateTask("a", 1, 1), laneFact("b", 2), laneStateTask("a", 3, 2)
		lanePushAll(t, l, r1, b1)
		laneWantNext(t, l, laneAt(0), r1)
		l.Retry(r1, laneAt(30))
		if sup := l.Push(r2); !slices.Equal(sup, []*Task{r1}) {
			t.Fatalf("Push(r2) superseded %v, want [r1]", laneOffsets(sup))
		}
		if !r2.NotBefore.Equal(laneAt(30)) {
			t.Fatalf("replacement NotBefore = %v, want the retry time %v", r2.NotBefore, laneAt(30))
		}
		laneWantNext(t, l, laneAt(29), b1)
		laneWantNext(t, l, laneAt(29), nil)
		laneWantNext(t, l, laneAt(30), r2)
	})

	t.Run("a delayed replacement of a ready head waits", func(t *testing.T) {
		l := NewLane("ep", 2)
		r1, r2 := laneStateTask("a", 1, 1), laneStateTask("a", 2, 2)
		r2.NotBefore = laneAt(20)
		lanePushAll(t, l, r1)
		l.Push(r2)
		if at, ok := l.NextWakeup(); !ok || !at.Equal(laneAt(20)) {
			t.Fatalf("NextWakeup() = %v, %v; want %v", at, ok, laneAt(20))
		}
		laneWantNext(t, l, laneAt(19), nil)
		laneWantNext(t, l, laneAt(20), r2)
	})
}

func TestLaneDrainUnstarted(t *testing.T) {
	l := NewLane("ep", 2)
	a1, a2, a3 := laneFact("a", 1), laneFact("a", 2), laneFact("a", 3)
	b1, b2 := laneFact("b", 4), laneFact("b", 5)
	c1, d1 := laneFact("c", 6), laneFact("d", 7)
	c1.EnqueuedAt = laneAt(-5) // the oldest entity drains first
	lanePushAll(t, l, a1, a2, a3, b1, b2, c1, d1)
	laneWantNext(t, l, laneAt(0), a1)
	laneWantNext(t, l, laneAt(0), b1)
	l.Retry(b1, laneAt(50)) // waiting heads drain too
	laneWantNext(t, l, laneAt(0), c1)
	l.Retry(c1, laneAt(50))

	got := l.DrainUnstarted()
	if want := []*Task{c1, a2, a3, b1, b2, d1}; !slices.Equal(got, want) {
		t.Fatalf("DrainUnstarted() = %v, want %v", laneOffsets(got), laneOffsets(want))
	}
	for _, task := range got {
		if task.next != nil {
			t.Fatalf("drained %s still links to another task", laneTaskName(task))
		}
	}
	laneWantCounts(t, l, 0, 1, 1) // a1 stays in flight
	if _, ok := l.NextWakeup(); ok {
		t.Fatal("NextWakeup() reported a drained retry")
	}
	laneWantNext(t, l, laneAt(100), nil)
	if l.DrainUnstarted() != nil {
		t.Fatal("second DrainUnstarted() returned tasks")
	}

	l.Finish(a1)
	laneWantCounts(t, l, 0, 0, 0)

	// The lane is usable afterwards.
	e1 := laneFact("a", 8)
	lanePushAll(t, l, e1)
	laneWantNext(t, l, laneAt(100), e1)
}

func TestLaneRetryAfterDrainQueuesTheTaskAgain(t *testing.T) {
	l := NewLane("ep", 1)
	a1, a2 := laneFact("a", 1), laneFact("a", 2)
	lanePushAll(t, l, a1, a2)
	laneWantNext(t, l, laneT0, a1)
	if got := l.DrainUnstarted(); !slices.Equal(got, []*Task{a2}) {
		t.Fatalf("DrainUnstarted() = %v, want [a2]", laneOffsets(got))
	}
	l.Retry(a1, laneAt(1))
	laneWantCounts(t, l, 1, 0, 1)
	laneWantNext(t, l, laneAt(1), a1)
}

func TestLaneOldestEnqueuedAt(t *testing.T) {
	l := NewLane("ep", 1)
	if _, ok := l.OldestEnqueuedAt(); ok {
		t.Fatal("OldestEnqueuedAt() on an empty lane reported a time")
	}
	a1, a2, b1 := laneFact("a", 1), laneFact("a", 2), laneFact("b", 3)
	a1.EnqueuedAt, a2.EnqueuedAt, b1.EnqueuedAt = laneAt(1), laneAt(5), laneAt(3)
	lanePushAll(t, l, a1, a2, b1)
	want := func(sec int) {
		t.Helper()
		if got, ok := l.OldestEnqueuedAt(); !ok || !got.Equal(laneAt(sec)) {
			t.Fatalf("OldestEnqueuedAt() = %v, %v; want %v", got, ok, laneAt(sec))
		}
	}
	want(1)
	laneWantNext(t, l, laneT0, a1)
	want(1) // in flight counts
	l.Finish(a1)
	want(3)
	laneWantNext(t, l, laneT0, b1)
	l.Finish(b1)
	want(5)
}

// TestLaneGivesMemoryBack checks that entities leave with their last task
// and that the map and heaps shrink after a spike.
func TestLaneGivesMemoryBack(t *testing.T) {
	l := NewLane("ep", 1000)
	const n = 20_000
	for i := range n {
		task := laneFact(fmt.Sprint("e", i), int64(i))
		task.NotBefore = laneAt(1) // through the due heap
		lanePushAll(t, l, task)
	}
	laneWantCounts(t, l, n, 0, n)
	for done := 0; done < n; {
		for _, task := range laneStartAll(l, laneAt(1)) {
			l.Finish(task)
			done++
		}
	}
	laneWantCounts(t, l, 0, 0, 0)
	if l.entitiesPeak > shrinkEntitiesMinPeak {
		t.Fatalf("entity map not rebuilt: peak %d", l.entitiesPeak)
	}
	if c := cap(l.due.items) + cap(l.age.items); c > 2*shrinkHeapMinCap {
		t.Fatalf("heaps keep %d slots with no entity", c)
	}
}

// laneModel is the simulation's reference: plain slices and maps, the
// rules stated as directly as possible.
type laneModel struct {
	max     int
	queues  map[string][]*Task // head first
	running map[string]bool
}

func (m *laneModel) unstarted(entity string) []*Task {
	if m.running[entity] {
		return m.queues[entity][1:]
	}
	return m.queues[entity]
}

func (m *laneModel) counts() (pending, inFlight, entities int) {
	for e := range m.queues {
		pending += len(m.unstarted(e))
		if m.running[e] {
			inFlight++
		}
		entities++
	}
	return pending, inFlight, entities
}

// push returns what the lane must supersede and the NotBefore t must end
// up with.
func (m *laneModel) push(t *Task) (superseded *Task, notBefore time.Time) {
	un := m.unstarted(t.Entity)
	if len(un) == 0 || !un[len(un)-1].Coalesce || !t.Coalesce {
		m.queues[t.Entity] = append(m.queues[t.Entity], t)
		return nil, t.NotBefore
	}
	last := un[len(un)-1]
	if t.Revision < last.Revision {
		return t, t.NotBefore
	}
	notBefore = t.NotBefore
	if last.NotBefore.After(notBefore) {
		notBefore = last.NotBefore
	}
	m.queues[t.Entity][len(m.queues[t.Entity])-1] = t
	return last, notBefore
}

// startable returns the heads that may start at now.
func (m *laneModel) startable(now time.Time) map[*Task]bool {
	out := map[*Task]bool{}
	for e, q := range m.queues {
		if !m.running[e] && !q[0].NotBefore.After(now) {
			out[q[0]] = true
		}
	}
	return out
}

func (m *laneModel) earliestWaiting() (time.Time, bool) {
	var at time.Time
	found := false
	for e, q := range m.queues {
		if !m.running[e] && (!found || q[0].NotBefore.Before(at)) {
			at, found = q[0].NotBefore, true
		}
	}
	return at, found
}

func (m *laneModel) finish(entity string) {
	m.running[entity] = false
	m.queues[entity] = m.queues[entity][1:]
	if len(m.queues[entity]) == 0 {
		delete(m.queues, entity)
	}
}

func (m *laneModel) runningHeads() []*Task {
	var out []*Task
	for e, q := range m.queues {
		if m.running[e] {
			out = append(out, q[0])
		}
	}
	slices.SortFunc(out, func(a, b *Task) int { return cmp.Compare(a.Offset, b.Offset) }) // deterministic picks
	return out
}

// TestLaneSimulation runs random pushes, starts, finishes, retries, limit
// changes and drains against laneModel and checks every observable and
// internal invariant after each step, plus that no task is lost.
func TestLaneSimulation(t *testing.T) {
	const seeds, steps = 150, 3000
	for seed := range uint64(seeds) {
		laneSimulate(t, seed, steps)
	}
}

func laneSimulate(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0xda7a))
	m := &laneModel{max: 1 + rng.IntN(4), queues: map[string][]*Task{}, running: map[string]bool{}}
	l := NewLane("ep", m.max)
	now := laneT0
	revisions := map[string]int64{}
	fate := map[*Task]string{} // every task pushed: "" while in the lane
	var offset int64
	fail := func(step int, format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d: %s", seed, step, fmt.Sprintf(format, args...))
	}

	for step := range steps {
		now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		switch op := rng.IntN(100); {
		case op < 40: // push
			offset++
			entity := fmt.Sprint("e", rng.IntN(8))
			revisions[entity] += int64(rng.IntN(3))
			task := &Task{
				Offset: offset, Entity: entity, Revision: revisions[entity] - int64(rng.IntN(2)),
				Coalesce: rng.IntN(10) < 7, EnqueuedAt: now, Size: int32(1 + rng.IntN(1000)),
			}
			if rng.IntN(10) == 0 {
				task.NotBefore = now.Add(time.Duration(rng.IntN(5000)) * time.Millisecond)
			}
			wantSup, wantNotBefore := m.push(task)
			gotSup := l.Push(task)
			fate[task] = ""
			if wantSup == nil && gotSup != nil || wantSup != nil && !slices.Equal(gotSup, []*Task{wantSup}) {
				fail(step, "Push(%s) superseded %v, want %s", laneTaskName(task), laneOffsets(gotSup), laneTaskName(wantSup))
			}
			if !task.NotBefore.Equal(wantNotBefore) {
				fail(step, "Push(%s) left NotBefore %v, want %v", laneTaskName(task), task.NotBefore, wantNotBefore)
			}
			for _, s := range gotSup {
				fate[s] = "superseded"
			}

		case op < 70: // start
			startable := m.startable(now)
			_, inFlight, _ := m.counts()
			got := l.Next(now)
			switch {
			case inFlight >= m.max && got != nil:
				fail(step, "Next() started %s with %d in flight, max %d", laneTaskName(got), inFlight, m.max)
			case got != nil && !startable[got]:
				fail(step, "Next() started %s, which is not a ready head of an idle entity", laneTaskName(got))
			case got == nil && inFlight < m.max && len(startable) > 0:
				fail(step, "Next() = nil with %d ready heads and a free slot", len(startable))
			case got != nil:
				m.running[got.Entity] = true
			case inFlight >= m.max:
				if at, ok := l.NextWakeup(); ok {
					fail(step, "NextWakeup() = %v on a full lane", at)
				}
			default:
				// Nothing startable and room: the wakeup must be exact.
				wantAt, wantOK := m.earliestWaiting()
				gotAt, gotOK := l.NextWakeup()
				if gotOK != wantOK || !gotAt.Equal(wantAt) || gotOK && !gotAt.After(now) {
					fail(step, "NextWakeup() = %v, %v; want %v, %v (now %v)", gotAt, gotOK, wantAt, wantOK, now)
				}
			}

		case op < 85: // finish
			heads := m.runningHeads()
			if len(heads) == 0 {
				continue
			}
			h := heads[rng.IntN(len(heads))]
			if !l.Finish(h) {
				fail(step, "Finish(%s) = false", laneTaskName(h))
			}
			m.finish(h.Entity)
			fate[h] = "finished"

		case op < 95: // retry
			heads := m.runningHeads()
			if len(heads) == 0 {
				continue
			}
			h := heads[rng.IntN(len(heads))]
			at := now.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
			if !l.Retry(h, at) {
				fail(step, "Retry(%s) = false", laneTaskName(h))
			}
			m.running[h.Entity] = false
			if !h.NotBefore.Equal(at) {
				fail(step, "Retry left NotBefore %v, want %v", h.NotBefore, at)
			}

		case op < 98: // limit change
			m.max = 1 + rng.IntN(5)
			l.SetMaxConcurrency(m.max)

		case op < 99: // misuse: ending a task that is not in flight
			for e := range m.queues {
				if un := m.unstarted(e); len(un) > 0 && (l.Finish(un[0]) || l.Retry(un[0], now)) {
					fail(step, "Finish or Retry accepted unstarted %s", laneTaskName(un[0]))
				}
			}

		default: // drain
			got := l.DrainUnstarted()
			laneCheckDrain(t, m, got, func(format string, args ...any) { fail(step, format, args...) })
			for _, d := range got {
				fate[d] = "drained"
			}
			for e, q := range m.queues {
				if m.running[e] {
					m.queues[e] = q[:1]
				} else {
					delete(m.queues, e)
				}
			}
		}
		laneCheckAgainstModel(t, l, m, func(format string, args ...any) { fail(step, format, args...) })
	}

	inLane := 0
	for _, q := range m.queues {
		inLane += len(q)
	}
	leftInLane := 0
	for _, f := range fate {
		if f == "" {
			leftInLane++
		}
	}
	if leftInLane != inLane || l.Pending()+l.InFlight() != inLane {
		t.Fatalf("seed %d: lost tasks: %d pushed tasks unaccounted, model holds %d, lane %d",
			seed, leftInLane, inLane, l.Pending()+l.InFlight())
	}
}

// laneCheckDrain checks that a drain returned exactly the model's unstarted
// tasks, each entity's together and in order.
func laneCheckDrain(t *testing.T, m *laneModel, got []*Task, fail func(string, ...any)) {
	t.Helper()
	byEntity := map[string][]*Task{}
	var order []string
	for i, d := range got {
		if i == 0 || got[i-1].Entity != d.Entity {
			if byEntity[d.Entity] != nil {
				fail("drained tasks of %s are not together", d.Entity)
			}
			order = append(order, d.Entity)
		}
		byEntity[d.Entity] = append(byEntity[d.Entity], d)
	}
	for e := range m.queues {
		if want := m.unstarted(e); !slices.Equal(byEntity[e], want) && len(want) > 0 {
			fail("drained %v for %s, want %v", laneOffsets(byEntity[e]), e, laneOffsets(want))
		}
	}
	for _, e := range order {
		if len(m.unstarted(e)) == 0 {
			fail("drained %s, which has nothing unstarted", e)
		}
	}
}

func laneCheckAgainstModel(t *testing.T, l *Lane, m *laneModel, fail func(string, ...any)) {
	t.Helper()
	pending, inFlight, entities := m.counts()
	if l.Pending() != pending || l.InFlight() != inFlight || l.Entities() != entities {
		fail("Pending, InFlight, Entities = %d, %d, %d; want %d, %d, %d",
			l.Pending(), l.InFlight(), l.Entities(), pending, inFlight, entities)
	}
	if l.Idle() != (pending+inFlight == 0) {
		fail("Idle() = %v with %d pending, %d in flight", l.Idle(), pending, inFlight)
	}
	var bytes int64
	for _, q := range m.queues {
		for _, task := range q {
			bytes += int64(task.Size)
		}
	}
	if l.Bytes() != bytes {
		fail("Bytes() = %d, want %d (the tasks held)", l.Bytes(), bytes)
	}
	var oldest time.Time
	for _, q := range m.queues {
		for _, task := range q {
			if oldest.IsZero() || task.EnqueuedAt.Before(oldest) {
				oldest = task.EnqueuedAt
			}
		}
	}
	if got, ok := l.OldestEnqueuedAt(); ok != !oldest.IsZero() || !got.Equal(oldest) {
		fail("OldestEnqueuedAt() = %v, %v; want %v", got, ok, oldest)
	}
	for id, q := range m.queues {
		e := l.entities[id]
		if e == nil {
			fail("entity %s missing", id)
			return
		}
		var tasks []*Task
		for task := e.head; task != nil; task = task.next {
			tasks = append(tasks, task)
		}
		if !slices.Equal(tasks, q) {
			fail("entity %s holds %v, want %v", id, laneOffsets(tasks), laneOffsets(q))
		}
		if e.tail != q[len(q)-1] || (len(q) > 1) != (e.beforeTail != nil) || len(q) > 1 && e.beforeTail != q[len(q)-2] {
			fail("entity %s tail links are off", id)
		}
		if (e.state == entityRunning) != m.running[id] {
			fail("entity %s running = %v, want %v", id, e.state == entityRunning, m.running[id])
		}
	}
	laneCheckStructures(l, fail)
}

// laneCheckStructures checks the turn queue and heaps against entity states.
func laneCheckStructures(l *Lane, fail func(string, ...any)) {
	inTurns := map[*entityQueue]bool{}
	var prev *entityQueue
	for e := l.ready.front; e != nil; prev, e = e, e.nextTurn {
		if e.prevTurn != prev || inTurns[e] {
			fail("turn queue links are broken at %s", e.id)
			return
		}
		inTurns[e] = true
	}
	if l.ready.back != prev {
		fail("turn queue back is not its last entity")
	}
	for _, h := range []*entityHeap{&l.due, &l.age} {
		for i, e := range h.items {
			if *h.index(e) != i {
				fail("heap index of %s is %d, want %d", e.id, *h.index(e), i)
			}
			if i > 0 && h.before(e, h.items[(i-1)/2]) {
				fail("heap order broken at %d", i)
			}
		}
	}
	if len(l.age.items) != len(l.entities) {
		fail("age heap holds %d entities, lane %d", len(l.age.items), len(l.entities))
	}
	nWaiting := 0
	for _, e := range l.entities {
		switch e.state {
		case entityReady:
			if !inTurns[e] {
				fail("ready entity %s is not in the turn queue", e.id)
			}
		case entityWaiting:
			nWaiting++
			if e.dueIndex < 0 || e.dueIndex >= len(l.due.items) || l.due.items[e.dueIndex] != e {
				fail("waiting entity %s is not in the due heap", e.id)
			}
		case entityRunning:
			if inTurns[e] {
				fail("running entity %s is in the turn queue", e.id)
			}
		}
	}
	if nWaiting != len(l.due.items) || len(inTurns)+nWaiting > len(l.entities) {
		fail("due heap holds %d, %d entities waiting; %d in turns", len(l.due.items), nWaiting, len(inTurns))
	}
}

// BenchmarkLanePushNextFinish measures one delivery's trip through a lane:
// "backlog" with every entity already queued (the steady state of a busy
// lane), "churn" with each entity's queue emptying so the entity is created
// and dropped on every task.
func BenchmarkLanePushNextFinish(b *testing.B) {
	const entities = 1024
	ids := make([]string, entities)
	for i := range ids {
		ids[i] = fmt.Sprint("order:", i)
	}
	for _, backlog := range []bool{true, false} {
		name := map[bool]string{true: "backlog", false: "churn"}[backlog]
		b.Run(name, func(b *testing.B) {
			l := NewLane("ep", 16)
			// Tasks are recycled so that the benchmark measures the lane,
			// not the owner's allocations.
			free := make([]*Task, 0, 2*entities)
			for range 2 * entities {
				free = append(free, &Task{})
			}
			if backlog {
				for i := range entities {
					t := free[len(free)-1]
					free = free[:len(free)-1]
					*t = Task{Entity: ids[i], EnqueuedAt: laneT0}
					l.Push(t)
				}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				t := free[len(free)-1]
				free = free[:len(free)-1]
				*t = Task{Offset: int64(i), Entity: ids[i%entities], EnqueuedAt: laneT0}
				l.Push(t)
				started := l.Next(laneT0)
				l.Finish(started)
				free = append(free, started)
			}
		})
	}
}

func TestInterleaveEntitiesKeepsEachEntityInOrder(t *testing.T) {
	var in []*Task
	for _, spec := range []struct {
		entity string
		n      int
	}{{"a", 3}, {"b", 1}, {"c", 2}} {
		for i := range spec.n {
			in = append(in, &Task{Entity: spec.entity, Revision: int64(i + 1)})
		}
	}
	var got []string
	for _, t := range InterleaveEntities(in) {
		got = append(got, fmt.Sprintf("%s%d", t.Entity, t.Revision))
	}
	if want := "a1 b1 c1 a2 c2 a3"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}
