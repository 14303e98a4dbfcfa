package partition

import (
	"errors"
	"slices"
	"testing"
	"time"
)

type sent struct{ seq uint64 }

func newTestOutbox(issued *[]uint64) *outbox[*sent] {
	return &outbox[*sent]{
		seq:   func(s *sent) uint64 { return s.seq },
		issue: func(s *sent) { *issued = append(*issued, s.seq) },
	}
}

func TestOutboxIssuesInOrderWithinTheLimit(t *testing.T) {
	var issued []uint64
	b := newTestOutbox(&issued)
	for i := range uint64(5) {
		b.push(&sent{i + 1})
	}
	b.flush(t0, 2, 0)
	if !slices.Equal(issued, []uint64{1, 2}) || b.inFlight != 2 {
		t.Fatalf("issued %v with %d in flight, want [1 2] and 2", issued, b.inFlight)
	}
	b.done(&sent{1}, nil)
	b.flush(t0, 2, 0)
	if !slices.Equal(issued, []uint64{1, 2, 3}) || b.pending() != 4 {
		t.Fatalf("issued %v, pending %d; want [1 2 3] and 4 pending", issued, b.pending())
	}
}

// A failure fails every record issued after it (the producer's rule): the
// failed ones go out again, first and in their order, once none is in
// flight and after a backoff, never behind a record queued later.
func TestOutboxRetriesFailuresFirstAndInOrder(t *testing.T) {
	var issued []uint64
	b := newTestOutbox(&issued)
	one, two, three := &sent{1}, &sent{2}, &sent{3}
	b.push(one)
	b.push(two)
	b.push(three)
	b.flush(t0, 0, 0)
	failure := errors.New("broker down")
	if !b.done(two, failure) {
		t.Fatal("done reported a failure as a success")
	}
	b.push(&sent{4})
	b.flush(t0, 0, 0) // one and three are still out: nothing goes
	if len(issued) != 3 {
		t.Fatalf("issued %v while records were still out after a failure", issued)
	}
	b.done(three, failure)
	b.done(one, nil)
	b.flush(t0, 0, 0) // requeues 2, 3 ahead of 4, but waits for the backoff
	if len(issued) != 3 {
		t.Fatalf("issued %v before the backoff", issued)
	}
	b.flush(t0.Add(outboxMaxBackoff), 0, 0)
	if want := []uint64{1, 2, 3, 2, 3, 4}; !slices.Equal(issued, want) {
		t.Fatalf("issued %v, want %v", issued, want)
	}
}

func TestOutboxBackoffGrowsAndResets(t *testing.T) {
	var issued []uint64
	b := newTestOutbox(&issued)
	r := &sent{1}
	b.push(r)
	now := t0
	var waits []time.Duration
	for range 3 {
		b.flush(now, 0, 0) // issues r (again)
		b.done(r, errors.New("down"))
		b.flush(now, 0, 0) // requeues it behind a backoff
		waits = append(waits, b.retryAt.Sub(now))
		now = b.retryAt
	}
	if len(issued) != 3 || !(waits[0] < waits[1] && waits[1] < waits[2]) {
		t.Fatalf("issued %v with backoffs %v, want 3 issues and growing backoffs", issued, waits)
	}
	b.flush(now, 0, 0)
	b.done(r, nil)
	if b.backoff != 0 || b.pending() != 0 {
		t.Fatalf("backoff %v, pending %d after a success; want 0 and 0", b.backoff, b.pending())
	}
}

func TestOutboxDropForgetsWhatIsNotOut(t *testing.T) {
	var issued []uint64
	b := newTestOutbox(&issued)
	for i := range uint64(4) {
		b.push(&sent{i + 1})
	}
	b.flush(t0, 1, 0)
	if n := b.drop(); n != 3 || b.pending() != 1 {
		t.Fatalf("drop returned %d with %d pending, want 3 and the one in flight", n, b.pending())
	}
}

// The byte limit holds records back once what is in flight reaches it,
// but one record always goes, however large.
func TestOutboxBoundsBytesInFlight(t *testing.T) {
	var issued []int
	b := outbox[int]{seq: func(v int) uint64 { return uint64(v) }, issue: func(v int) { issued = append(issued, v) },
		size: func(v int) int64 { return int64(v) * 100 }}
	for _, v := range []int{5, 1, 1, 1} {
		b.push(v)
	}
	b.flush(t0, 0, 300)
	if len(issued) != 1 || b.outBytes != 500 || b.bytes != 800 {
		t.Fatalf("issued %v, %d bytes out, %d held; want the large one alone", issued, b.outBytes, b.bytes)
	}
	b.done(5, nil)
	b.flush(t0, 0, 300)
	if len(issued) != 4 || b.bytes != 300 {
		t.Fatalf("issued %v, %d bytes held after the large one landed", issued, b.bytes)
	}
}
