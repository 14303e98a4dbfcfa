package partition

import "time"

// minRingSize is the smallest ring a Tracker keeps. It must be a power of
// two.
const minRingSize = 16

// Tracker follows the outstanding work of one owned partition and yields the
// offset to commit.
//
// It keeps one entry per offset from the lowest incomplete one to the highest
// added, in a ring, so memory is proportional to that span and not to what
// was ever consumed; finished entries behind the lowest incomplete one are
// dropped as soon as it finishes.
//
// A Tracker is not safe for concurrent use: the partition's owner serialises
// calls.
type Tracker struct {
	ring        []entry // power-of-two length; ring[head] is the oldest entry
	head        int
	size        int   // entries in the ring, done or not
	outstanding int   // entries not done
	next        int64 // one past the highest offset added; start before any
}

type entry struct {
	offset int64
	added  time.Time
	done   bool
}

// NewTracker returns a tracker for a partition whose consumption resumes at
// start (the committed offset).
func NewTracker(start int64) *Tracker {
	return &Tracker{ring: make([]entry, minRingSize), next: start}
}

// Add records that the record at offset was consumed at now and has work
// outstanding. Offsets must increase; gaps (transaction markers, compacted
// records) are fine and count as done.
//
// Add ignores, and reports false for, an offset below start or not above
// the last one added: that record is already accounted for, and letting it
// in could move the watermark backwards.
func (t *Tracker) Add(offset int64, now time.Time) bool {
	if offset < t.next {
		return false
	}
	if t.size == len(t.ring) {
		t.resize(2 * len(t.ring))
	}
	t.ring[t.slot(t.size)] = entry{offset: offset, added: now}
	t.size++
	t.outstanding++
	t.next = offset + 1
	return true
}

// Done records that the work of offset is finished: delivered, dead,
// superseded or parked. Done on an offset already done, never added, or in a
// gap is a no-op.
func (t *Tracker) Done(offset int64) {
	i, ok := t.find(offset)
	if !ok {
		return
	}
	e := &t.ring[t.slot(i)]
	if e.done {
		return
	}
	e.done = true
	t.outstanding--
	if i == 0 {
		t.popDone()
	}
}

// Watermark returns the offset to commit: the lowest incomplete offset, or,
// with nothing outstanding, one past the highest offset added (start if
// nothing was added). It never decreases.
func (t *Tracker) Watermark() int64 {
	if t.size == 0 {
		return t.next
	}
	return t.ring[t.head].offset + int64(btoi(mutated("watermark-off-by-one")))
}

// Outstanding returns how many added offsets are not done.
func (t *Tracker) Outstanding() int { return t.outstanding }

// Len returns the entries kept, finished or not: the span from the lowest
// unfinished offset to the highest added.
func (t *Tracker) Len() int { return t.size }

// OldestPendingSince returns when the lowest incomplete offset, the one
// holding the watermark, was added; false when nothing is outstanding.
func (t *Tracker) OldestPendingSince() (time.Time, bool) {
	if t.size == 0 {
		return time.Time{}, false
	}
	return t.ring[t.head].added, true
}

// slot maps the i-th entry from the oldest to its index in the ring.
func (t *Tracker) slot(i int) int { return (t.head + i) & (len(t.ring) - 1) }

// find returns the position of offset from the oldest entry. Offsets are
// usually dense, so the direct guess almost always hits; gaps fall back to a
// binary search, which is valid because offsets increase along the ring.
func (t *Tracker) find(offset int64) (int, bool) {
	if t.size == 0 || offset < t.ring[t.head].offset || offset >= t.next {
		return 0, false
	}
	guess := offset - t.ring[t.head].offset
	if guess < int64(t.size) && t.ring[t.slot(int(guess))].offset == offset {
		return int(guess), true
	}
	// Each offset is at least one above the previous, so offset sits at or
	// before position guess.
	lo, hi := 0, min(int(guess), t.size-1)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if t.ring[t.slot(mid)].offset < offset {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, t.ring[t.slot(lo)].offset == offset
}

// popDone drops finished entries from the front so the oldest entry is the
// lowest incomplete offset, and gives memory back after a burst.
func (t *Tracker) popDone() {
	for t.size > 0 && t.ring[t.head].done {
		t.ring[t.head] = entry{}
		t.head = t.slot(1)
		t.size--
	}
	if len(t.ring) > minRingSize && t.size <= len(t.ring)/4 {
		t.resize(len(t.ring) / 2)
	}
}

// resize moves the entries, oldest first, into a ring of n slots.
func (t *Tracker) resize(n int) {
	ring := make([]entry, n)
	for i := range t.size {
		ring[i] = t.ring[t.slot(i)]
	}
	t.ring, t.head = ring, 0
}
