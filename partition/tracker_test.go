package partition

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func wantWatermark(t *testing.T, tr *Tracker, want int64) {
	t.Helper()
	if got := tr.Watermark(); got != want {
		t.Fatalf("Watermark() = %d, want %d", got, want)
	}
}

func TestTrackerEmpty(t *testing.T) {
	tr := NewTracker(42)
	wantWatermark(t, tr, 42)
	if n := tr.Outstanding(); n != 0 {
		t.Fatalf("Outstanding() = %d, want 0", n)
	}
	if _, ok := tr.OldestPendingSince(); ok {
		t.Fatal("OldestPendingSince() reported a pending offset on an empty tracker")
	}
	tr.Done(42) // unknown: no-op
	wantWatermark(t, tr, 42)
}

func TestTrackerOutOfOrderCompletion(t *testing.T) {
	tr := NewTracker(10)
	for o := int64(10); o < 15; o++ {
		tr.Add(o, at(int(o)))
	}
	wantWatermark(t, tr, 10)

	tr.Done(12)
	tr.Done(14)
	wantWatermark(t, tr, 10) // 10 still holds it
	tr.Done(10)
	wantWatermark(t, tr, 11)
	if since, _ := tr.OldestPendingSince(); !since.Equal(at(11)) {
		t.Fatalf("OldestPendingSince() = %v, want %v", since, at(11))
	}
	tr.Done(11)
	wantWatermark(t, tr, 13) // 12 was already done
	tr.Done(13)
	wantWatermark(t, tr, 15) // 14 done: highest added + 1
	if n := tr.Outstanding(); n != 0 {
		t.Fatalf("Outstanding() = %d, want 0", n)
	}
	if _, ok := tr.OldestPendingSince(); ok {
		t.Fatal("OldestPendingSince() reported a pending offset with nothing outstanding")
	}
}

func TestTrackerGapsCountAsDone(t *testing.T) {
	tr := NewTracker(100)
	tr.Add(103, at(0)) // 100..102 are transaction markers or compacted away
	wantWatermark(t, tr, 103)
	tr.Add(107, at(1))
	tr.Add(108, at(2))
	tr.Done(103)
	wantWatermark(t, tr, 107)
	tr.Done(105) // in a gap: no-op
	tr.Done(108)
	wantWatermark(t, tr, 107)
	if n := tr.Outstanding(); n != 1 {
		t.Fatalf("Outstanding() = %d, want 1", n)
	}
	tr.Done(107)
	wantWatermark(t, tr, 109)
}

func TestTrackerDoneIsIdempotent(t *testing.T) {
	tr := NewTracker(0)
	for o := range int64(3) {
		tr.Add(o, at(0))
	}
	tr.Done(1)
	tr.Done(1)
	if n := tr.Outstanding(); n != 2 {
		t.Fatalf("Outstanding() after double Done = %d, want 2", n)
	}
	tr.Done(0)
	tr.Done(0) // already popped from the front
	wantWatermark(t, tr, 2)
	if n := tr.Outstanding(); n != 1 {
		t.Fatalf("Outstanding() = %d, want 1", n)
	}
}

func TestTrackerUnknownOffsetsAreIgnored(t *testing.T) {
	tr := NewTracker(50)
	tr.Add(50, at(0))
	tr.Add(52, at(0))
	for _, o := range []int64{-1, 0, 49, 51, 53, 1 << 40} {
		tr.Done(o)
	}
	if n := tr.Outstanding(); n != 2 {
		t.Fatalf("Outstanding() = %d, want 2", n)
	}
	wantWatermark(t, tr, 50)
}

func TestTrackerRefusesOffsetsThatWouldMoveTheWatermarkBack(t *testing.T) {
	tr := NewTracker(10)
	if tr.Add(9, at(0)) {
		t.Fatal("Add below start was accepted")
	}
	wantWatermark(t, tr, 10)
	if !tr.Add(12, at(0)) {
		t.Fatal("Add(12) refused")
	}
	tr.Done(12)
	wantWatermark(t, tr, 13)
	for _, o := range []int64{11, 12} {
		if tr.Add(o, at(0)) {
			t.Fatalf("Add(%d) after 12 was accepted", o)
		}
	}
	wantWatermark(t, tr, 13)
	if n := tr.Outstanding(); n != 0 {
		t.Fatalf("Outstanding() = %d, want 0", n)
	}
}

func TestTrackerOldestPendingSinceFollowsTheWatermark(t *testing.T) {
	tr := NewTracker(0)
	tr.Add(0, at(5))
	tr.Add(1, at(7))
	tr.Add(2, at(9))
	if since, ok := tr.OldestPendingSince(); !ok || !since.Equal(at(5)) {
		t.Fatalf("OldestPendingSince() = %v, %v; want %v", since, ok, at(5))
	}
	tr.Done(1)
	tr.Done(0)
	if since, ok := tr.OldestPendingSince(); !ok || !since.Equal(at(9)) {
		t.Fatalf("OldestPendingSince() = %v, %v; want %v", since, ok, at(9))
	}
}

// TestTrackerMemoryFollowsTheSpan checks that the ring grows with the
// outstanding span and gives the memory back once it shrinks.
func TestTrackerMemoryFollowsTheSpan(t *testing.T) {
	tr := NewTracker(0)
	const n = 100_000
	for o := range int64(n) {
		tr.Add(o, at(0))
	}
	if len(tr.ring) < n {
		t.Fatalf("ring holds %d slots for %d entries", len(tr.ring), n)
	}
	for o := range int64(n - 3) {
		tr.Done(o)
	}
	if len(tr.ring) > 4*minRingSize {
		t.Fatalf("ring still holds %d slots for 3 outstanding entries", len(tr.ring))
	}
	wantWatermark(t, tr, n-3)
	if n := tr.Outstanding(); n != 3 {
		t.Fatalf("Outstanding() = %d, want 3", n)
	}
}

// naiveTracker is the obvious, slow model: a set of outstanding offsets.
type naiveTracker struct {
	outstanding map[int64]time.Time
	next        int64
}

func (m *naiveTracker) watermark() int64 {
	low := m.next
	for o := range m.outstanding {
		low = min(low, o)
	}
	return low
}

func (m *naiveTracker) oldestSince() (time.Time, bool) {
	if len(m.outstanding) == 0 {
		return time.Time{}, false
	}
	return m.outstanding[m.watermark()], true
}

// TestTrackerMatchesNaiveModel completes offsets in random orders, with
// random gaps, interleaved with adds, and compares every observable against
// the naive model after each step.
func TestTrackerMatchesNaiveModel(t *testing.T) {
	for seed := range uint64(60) {
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		start := rng.Int64N(1000)
		tr := NewTracker(start)
		model := &naiveTracker{outstanding: map[int64]time.Time{}, next: start}
		var added []int64 // every offset added, done or not
		last := tr.Watermark()
		next := start // the lowest offset the next Add may use

		for step := range 2000 {
			if rng.IntN(100) < 55 {
				if rng.IntN(4) == 0 {
					next += rng.Int64N(5) // a gap: markers or compaction
				}
				now := at(step)
				if !tr.Add(next, now) {
					t.Fatalf("seed %d: Add(%d) refused", seed, next)
				}
				model.outstanding[next] = now
				model.next = next + 1
				added = append(added, next)
				next++
			} else if len(added) > 0 {
				// Done on any offset ever added, also ones already done,
				// and sometimes on offsets never added.
				o := added[rng.IntN(len(added))]
				if rng.IntN(10) == 0 {
					o += int64(rng.IntN(3)) - 1
				}
				tr.Done(o)
				delete(model.outstanding, o)
			}

			wm := tr.Watermark()
			if want := model.watermark(); wm != want {
				t.Fatalf("seed %d step %d: Watermark() = %d, want %d", seed, step, wm, want)
			}
			if wm < last {
				t.Fatalf("seed %d step %d: watermark went back from %d to %d", seed, step, last, wm)
			}
			last = wm
			if got, want := tr.Outstanding(), len(model.outstanding); got != want {
				t.Fatalf("seed %d step %d: Outstanding() = %d, want %d", seed, step, got, want)
			}
			gotSince, gotOK := tr.OldestPendingSince()
			wantSince, wantOK := model.oldestSince()
			if gotOK != wantOK || !gotSince.Equal(wantSince) {
				t.Fatalf("seed %d step %d: OldestPendingSince() = %v, %v; want %v, %v",
					seed, step, gotSince, gotOK, wantSince, wantOK)
			}
		}
	}
}

func BenchmarkTrackerAddDone(b *testing.B) {
	tr := NewTracker(0)
	const window = 1024
	now := t0
	b.ReportAllocs()
	for i := range int64(b.N) {
		tr.Add(i, now)
		if i >= window {
			// Complete slightly out of order, as lanes do.
			tr.Done(i - window + (i % 7))
			tr.Done(i - window)
		}
	}
}
