package partition

import (
	"cmp"
	"slices"
	"time"

	"github.com/laneway/laneway/coalesce"
)

// Task is one delivery queued in, or running from, a lane.
type Task struct {
	Offset    int64
	Partition int32
	// Size is the delivery's size in bytes, for the lane's byte count.
	Size     int32
	Coalesce bool
	Entity   string
	Revision int64
	// NotBefore delays the task; zero means it may start at once.
	NotBefore time.Time
	// EnqueuedAt feeds OldestEnqueuedAt. Tasks of one entity are expected
	// in nondecreasing EnqueuedAt, which holds when the owner stamps them as
	// it consumes them.
	EnqueuedAt time.Time
	Attempts   int // kept for the owner; the lane never reads or changes it
	Payload    any // opaque to the lane

	// next links the entity's queue. Linking through the task rather than
	// a per-entity slice costs no allocation on Push.
	next *Task
}

// Lane is one endpoint's queue: a FIFO per entity, at most one task in
// flight per entity, at most maxConcurrency in flight in total, and ready
// entities served in turn so that a hot entity cannot starve the others.
//
// A Task belongs to at most one lane at a time, from Push until it is
// returned as superseded, drained, or passed to Finish.
//
// A Lane is not safe for concurrent use: the owner holds a mutex around
// every call. Every operation is O(1) or O(log entities) except
// DrainUnstarted, which is O(n log n) in what it drains.
type Lane struct {
	endpointID     string
	maxConcurrency int

	entities     map[string]*entityQueue
	entitiesPeak int // largest len(entities) since the map was last rebuilt

	ready turnQueue  // entities whose head may start now, in turn order
	due   entityHeap // entities whose head waits for its NotBefore
	age   entityHeap // every entity, by its head's EnqueuedAt

	pending  int // tasks not started, retry-waiting included
	inFlight int
	bytes    int64 // Size of every task held, pending or in flight

	// spare are entity queues emptied by Finish, reused by the next new
	// entity: most deliveries are an entity's only one in the lane, and
	// each would otherwise allocate its queue.
	spare []*entityQueue
}

// maxSpare bounds the reused entity queues a lane keeps.
const maxSpare = 64

// entityQueue is the queue of one entity within a lane. It exists only
// while it holds a task, so lane memory follows the entities with work.
type entityQueue struct {
	id         string
	head, tail *Task
	// beforeTail is the task linking to tail, nil when head == tail. It lets
	// coalescing replace the tail of a singly linked queue in O(1).
	beforeTail *Task
	state      entityState

	prevTurn, nextTurn *entityQueue // links in Lane.ready while state == entityReady
	dueIndex, ageIndex int          // positions in Lane.due and Lane.age
}

type entityState uint8

const (
	entityReady   entityState = iota // head not started, in Lane.ready
	entityWaiting                    // head not started, in Lane.due until NotBefore
	entityRunning                    // head in flight
)

// btoi is 1 for true: a planted off-by-one (mutant.go).
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// NewLane returns an empty lane for an endpoint.
func NewLane(endpointID string, maxConcurrency int) *Lane {
	l := &Lane{endpointID: endpointID, entities: make(map[string]*entityQueue)}
	l.SetMaxConcurrency(maxConcurrency)
	l.due = entityHeap{
		before: func(a, b *entityQueue) bool { return a.head.NotBefore.Before(b.head.NotBefore) },
		index:  func(e *entityQueue) *int { return &e.dueIndex },
	}
	l.age = entityHeap{
		before: func(a, b *entityQueue) bool { return a.head.EnqueuedAt.Before(b.head.EnqueuedAt) },
		index:  func(e *entityQueue) *int { return &e.ageIndex },
	}
	return l
}

// EndpointID returns the endpoint the lane serves.
func (l *Lane) EndpointID() string { return l.endpointID }

// MaxConcurrency returns the current limit on tasks in flight.
func (l *Lane) MaxConcurrency() int { return l.maxConcurrency }

// SetMaxConcurrency changes the limit on tasks in flight. It takes effect on
// the next call to Next; lowering it never cancels tasks already in flight,
// they just have to finish before more start. Values below 1 count as 1: a
// lane that must not deliver is parked, not throttled to zero.
func (l *Lane) SetMaxConcurrency(n int) { l.maxConcurrency = max(n, 1) }

// Push queues t behind the earlier tasks of its entity, first letting
// coalescing compare it with the entity's last task that has not started
// (never the one in flight). It returns what was superseded, for the owner
// to mark done: nothing (nil, no allocation), the pending task t replaced,
// or t itself when a newer state is already pending. It never returns more
// than one task.
//
// When t replaces a task that waits for a retry, t inherits the later
// NotBefore: otherwise a stream of updates to an entity the receiver keeps
// rejecting would be sent at the rate of updates instead of retries.
func (l *Lane) Push(t *Task) (superseded []*Task) {
	t.next = nil
	e := l.entities[t.Entity]
	if e == nil {
		l.addEntity(t)
		return nil
	}
	last := e.tail
	if e.state == entityRunning && last == e.head && !mutated("coalesce-replaces-running") {
		l.appendTask(e, t)
		return nil
	}
	if mutated("coalesce-drops-fact") && !t.Coalesce && last.Coalesce {
		l.replaceTail(e, t)
		return []*Task{last}
	}
	switch coalesce.Decide(coalesceVersion(last), coalesceVersion(t)) {
	case coalesce.ReplacePending:
		l.replaceTail(e, t)
		return []*Task{last}
	case coalesce.DropIncoming:
		return []*Task{t}
	default:
		l.appendTask(e, t)
		return nil
	}
}

// Append queues t behind the earlier tasks of its entity without
// coalescing: for tasks whose coalescing was decided before they reached
// the lane (a parked lane's read-back, see Owner).
func (l *Lane) Append(t *Task) {
	t.next = nil
	if e := l.entities[t.Entity]; e != nil {
		l.appendTask(e, t)
		return
	}
	l.addEntity(t)
}

// Next starts and returns a task whose NotBefore has come at now, or nil
// when the lane is full or no entity's head is ready. Ready entities take
// turns: the entity started goes to the back of the queue once its task
// ends.
func (l *Lane) Next(now time.Time) *Task {
	if l.inFlight >= l.maxConcurrency+btoi(mutated("concurrency-check-le")) {
		return nil
	}
	l.promoteDue(now)
	for e := l.ready.popFront(); e != nil; e = l.ready.popFront() {
		if e.head.NotBefore.After(now) {
			// Only when the owner's clock went back; the entity waits again.
			l.wait(e)
			continue
		}
		e.state = entityRunning
		l.pending--
		l.inFlight++
		return e.head
	}
	return nil
}

// Finish ends the in-flight task t for good (delivered or dead): its slot is
// freed and the entity's next task, if any, becomes its head and queues for
// a turn. It reports false, changing nothing, when t is not in flight in
// this lane.
func (l *Lane) Finish(t *Task) bool {
	e := l.runningEntity(t)
	if e == nil {
		return false
	}
	l.inFlight--
	l.bytes -= int64(t.Size)
	e.popHead()
	if e.head == nil {
		l.removeEntity(e)
		return true
	}
	l.age.fix(e)
	l.schedule(e)
	return true
}

// Retry returns the in-flight task t to the head of its entity, so nothing
// of that entity starts before it, to start again at notBefore; its slot is
// freed. Attempts is left to the owner. It reports false, changing nothing,
// when t is not in flight in this lane.
func (l *Lane) Retry(t *Task, notBefore time.Time) bool {
	e := l.runningEntity(t)
	if e == nil {
		return false
	}
	l.inFlight--
	l.pending++
	t.NotBefore = notBefore
	if mutated("retry-notbefore-dropped") {
		t.NotBefore = time.Time{}
	}
	l.schedule(e)
	return true
}

// NextWakeup returns the earliest NotBefore among entity heads waiting for
// their time, so the owner can arm a timer and call Next then. It reports
// false when nothing waits, or when the lane is full: then only Finish,
// Retry or SetMaxConcurrency can let Next start anything.
//
// After Next(now) returned nil on a lane that is not full, the time returned
// is after now.
func (l *Lane) NextWakeup() (time.Time, bool) {
	e := l.due.peek()
	if e == nil || l.inFlight >= l.maxConcurrency {
		return time.Time{}, false
	}
	return e.head.NotBefore, true
}

// Pending returns the number of tasks not started, retry-waiting included.
func (l *Lane) Pending() int { return l.pending }

// Bytes returns the Size of every task the lane holds, pending or in
// flight.
func (l *Lane) Bytes() int64 { return l.bytes }

// InFlight returns the number of tasks started and not yet finished or
// retried.
func (l *Lane) InFlight() int { return l.inFlight }

// Entities returns the number of entities with a task pending or in flight.
func (l *Lane) Entities() int { return len(l.entities) }

// Idle reports whether the lane holds no task at all; the owner may then
// drop it.
func (l *Lane) Idle() bool { return l.pending == 0 && l.inFlight == 0 }

// OldestEnqueuedAt returns the earliest EnqueuedAt among pending and
// in-flight tasks in O(1), or false when the lane is idle. It reads entity
// heads only, which is exact while each entity's tasks are pushed in
// EnqueuedAt order.
func (l *Lane) OldestEnqueuedAt() (time.Time, bool) {
	e := l.age.peek()
	if e == nil {
		return time.Time{}, false
	}
	return e.head.EnqueuedAt, true
}

// DrainUnstarted removes and returns every task that has not started, for
// a revoked partition or a parked lane. Each entity's tasks come out
// together and in order; entities come out oldest first (by the EnqueuedAt,
// then partition and offset, of their first drained task). Tasks in flight
// stay until Finish or Retry; a Retry then queues the task again.
func (l *Lane) DrainUnstarted() []*Task {
	if l.pending == 0 {
		return nil
	}
	var sources []*entityQueue
	stay := l.age.items[:0:0]
	for _, e := range l.age.items {
		if first := e.firstUnstarted(); first != nil {
			sources = append(sources, e)
		}
		if e.state == entityRunning {
			stay = append(stay, e)
		} else {
			delete(l.entities, e.id)
		}
	}
	slices.SortFunc(sources, func(a, b *entityQueue) int {
		x, y := a.firstUnstarted(), b.firstUnstarted()
		return cmp.Or(x.EnqueuedAt.Compare(y.EnqueuedAt),
			cmp.Compare(x.Partition, y.Partition), cmp.Compare(x.Offset, y.Offset))
	})
	drained := make([]*Task, 0, l.pending)
	for _, e := range sources {
		drained = e.cutUnstarted(drained)
	}
	for _, t := range drained {
		l.bytes -= int64(t.Size)
	}
	l.ready = turnQueue{}
	l.due.reset(nil)
	l.age.reset(stay)
	l.pending = 0
	l.shrinkEntities()
	return drained
}

func coalesceVersion(t *Task) coalesce.Version {
	return coalesce.Version{Revision: t.Revision, Coalesce: t.Coalesce}
}

// runningEntity returns t's entity if t is its in-flight head.
func (l *Lane) runningEntity(t *Task) *entityQueue {
	e := l.entities[t.Entity]
	if e == nil || e.state != entityRunning || e.head != t {
		return nil
	}
	return e
}

func (l *Lane) addEntity(t *Task) {
	var e *entityQueue
	if n := len(l.spare); n > 0 {
		e, l.spare = l.spare[n-1], l.spare[:n-1]
		*e = entityQueue{id: t.Entity, head: t, tail: t}
	} else {
		e = &entityQueue{id: t.Entity, head: t, tail: t}
	}
	l.entities[t.Entity] = e
	l.entitiesPeak = max(l.entitiesPeak, len(l.entities))
	l.pending++
	l.bytes += int64(t.Size)
	l.age.push(e)
	l.schedule(e)
}

func (l *Lane) appendTask(e *entityQueue, t *Task) {
	e.tail.next = t
	e.beforeTail, e.tail = e.tail, t
	l.pending++
	l.bytes += int64(t.Size)
}

// replaceTail puts t in place of the entity's last task, which has not
// started.
func (l *Lane) replaceTail(e *entityQueue, t *Task) {
	old := e.tail
	l.bytes += int64(t.Size) - int64(old.Size)
	if old.NotBefore.After(t.NotBefore) {
		t.NotBefore = old.NotBefore // see Push
	}
	if e.beforeTail != nil {
		e.beforeTail.next = t
		e.tail = t
		return
	}
	e.head, e.tail = t, t
	l.age.fix(e)
	switch {
	case e.state == entityWaiting:
		l.due.fix(e)
	case !t.NotBefore.Equal(old.NotBefore):
		// It was ready, but t may start only later.
		l.ready.remove(e)
		l.schedule(e)
	}
}

// schedule queues an entity whose head has not started: for a turn now, or
// in the due heap until its NotBefore. A NotBefore already past is promoted
// by the next call to Next, which knows the time.
func (l *Lane) schedule(e *entityQueue) {
	if e.head.NotBefore.IsZero() {
		e.state = entityReady
		l.ready.pushBack(e)
		return
	}
	l.wait(e)
}

func (l *Lane) wait(e *entityQueue) {
	e.state = entityWaiting
	l.due.push(e)
}

// promoteDue moves entities whose NotBefore has come to the back of the
// turn queue, earliest first.
func (l *Lane) promoteDue(now time.Time) {
	for e := l.due.peek(); e != nil && !e.head.NotBefore.After(now); e = l.due.peek() {
		l.due.remove(e)
		e.state = entityReady
		l.ready.pushBack(e)
	}
}

// removeEntity drops an entity whose queue emptied in Finish: it is in no
// turn queue or heap but age, so its queue may be reused.
func (l *Lane) removeEntity(e *entityQueue) {
	l.age.remove(e)
	delete(l.entities, e.id)
	l.shrinkEntities()
	if len(l.spare) < maxSpare {
		*e = entityQueue{}
		l.spare = append(l.spare, e)
	}
}

// shrinkEntitiesMinPeak keeps small lanes from rebuilding their map.
const shrinkEntitiesMinPeak = 1024

// shrinkEntities rebuilds the entity map once it holds a quarter of its
// peak. Go maps keep their peak size after deletes, so a lane that once held
// a spike of entities would otherwise keep that memory for its whole life.
// The copy is paid for by the deletes before it, so it is O(1) amortised.
func (l *Lane) shrinkEntities() {
	if l.entitiesPeak < shrinkEntitiesMinPeak || 4*len(l.entities) > l.entitiesPeak {
		return
	}
	m := make(map[string]*entityQueue, len(l.entities))
	for id, e := range l.entities {
		m[id] = e
	}
	l.entities, l.entitiesPeak = m, len(m)
}

// firstUnstarted returns the entity's first task that has not started.
func (e *entityQueue) firstUnstarted() *Task {
	if e.state == entityRunning {
		return e.head.next
	}
	return e.head
}

func (e *entityQueue) popHead() {
	h := e.head
	e.head, h.next = h.next, nil
	if e.head == nil {
		e.tail = nil
	}
	if e.beforeTail == h {
		e.beforeTail = nil
	}
}

// cutUnstarted appends the entity's unstarted tasks to dst, in order, and
// unlinks them, leaving only the in-flight head if there is one.
func (e *entityQueue) cutUnstarted(dst []*Task) []*Task {
	t := e.firstUnstarted()
	for t != nil {
		next := t.next
		t.next = nil
		dst = append(dst, t)
		t = next
	}
	if e.state == entityRunning {
		e.head.next, e.tail, e.beforeTail = nil, e.head, nil
	}
	return dst
}
