package partition

// turnQueue is the round-robin order of ready entities: a doubly linked
// list through the entities, so leaving it from anywhere is O(1) and joining
// it allocates nothing.
type turnQueue struct{ front, back *entityQueue }

func (q *turnQueue) pushBack(e *entityQueue) {
	e.prevTurn, e.nextTurn = q.back, nil
	if q.back != nil {
		q.back.nextTurn = e
	} else {
		q.front = e
	}
	q.back = e
}

func (q *turnQueue) popFront() *entityQueue {
	e := q.front
	if e != nil {
		q.remove(e)
	}
	return e
}

func (q *turnQueue) remove(e *entityQueue) {
	if e.prevTurn != nil {
		e.prevTurn.nextTurn = e.nextTurn
	} else {
		q.front = e.nextTurn
	}
	if e.nextTurn != nil {
		e.nextTurn.prevTurn = e.prevTurn
	} else {
		q.back = e.prevTurn
	}
	e.prevTurn, e.nextTurn = nil, nil
}

// entityHeap is a binary min-heap of entities that records each entity's
// position in it, so an entity can be fixed or removed in O(log n).
type entityHeap struct {
	items  []*entityQueue
	before func(a, b *entityQueue) bool
	index  func(e *entityQueue) *int
}

// shrinkHeapMinCap keeps small heaps from reallocating.
const shrinkHeapMinCap = 256

func (h *entityHeap) peek() *entityQueue {
	if len(h.items) == 0 {
		return nil
	}
	return h.items[0]
}

func (h *entityHeap) push(e *entityQueue) {
	*h.index(e) = len(h.items)
	h.items = append(h.items, e)
	h.up(len(h.items) - 1)
}

func (h *entityHeap) remove(e *entityQueue) {
	i, last := *h.index(e), len(h.items)-1
	if i != last {
		h.swap(i, last)
	}
	h.items[last] = nil
	h.items = h.items[:last]
	*h.index(e) = -1
	if i != last {
		h.fixAt(i)
	}
	h.shrink()
}

func (h *entityHeap) fix(e *entityQueue) { h.fixAt(*h.index(e)) }

// reset replaces the contents with items, in any order.
func (h *entityHeap) reset(items []*entityQueue) {
	h.items = items
	for i, e := range items {
		*h.index(e) = i
	}
	for i := len(items)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *entityHeap) fixAt(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *entityHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.before(h.items[i], h.items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts item i toward the leaves and reports whether it moved.
func (h *entityHeap) down(i int) bool {
	start := i
	for {
		child := 2*i + 1
		if child >= len(h.items) {
			break
		}
		if right := child + 1; right < len(h.items) && h.before(h.items[right], h.items[child]) {
			child = right
		}
		if !h.before(h.items[child], h.items[i]) {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i > start
}

func (h *entityHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	*h.index(h.items[i]) = i
	*h.index(h.items[j]) = j
}

// shrink gives back the backing array after a spike; like the entity map,
// it would otherwise stay at its peak size.
func (h *entityHeap) shrink() {
	if cap(h.items) < shrinkHeapMinCap || 4*len(h.items) > cap(h.items) {
		return
	}
	h.items = append(make([]*entityQueue, 0, 2*len(h.items)), h.items...)
}
