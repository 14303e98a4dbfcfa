package table

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// Two instances add to the same counter at once, one Update each, round
// after round: both additions are kept (one of the two retried when they
// raced), and the two return different values. (Rounds, not two streams
// of Updates: an Update that reads the other's stale record in the
// milliseconds before its repair builds on it, the window Update
// documents.)
func TestConcurrentUpdatesAreBothKept(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		ctx := testCtx(t)
		topic := newTopic(t, b)
		tables := []*Table[item]{started(t, b, topic, opts{}), started(t, b, topic, opts{})}
		if err := tables[0].Put(ctx, item{ID: "a"}); err != nil {
			t.Fatal(err)
		}
		var writes atomic.Int64 // more than two a round: Updates raced and were repaired
		for _, tb := range tables {
			tb.SetBeforeWrite(func() { writes.Add(1) })
		}
		const rounds = 20
		for r := range rounds {
			got := make([]int, len(tables))
			errs := make([]error, len(tables))
			var wg sync.WaitGroup
			for i, tb := range tables {
				wg.Go(func() {
					v, changed, err := tb.Update(ctx, "a", add(1))
					if err == nil && !changed {
						err = errors.New("the update changed nothing")
					}
					got[i], errs[i] = v.N, err
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if slices.Sort(got); got[0] != 2*r+1 || got[1] != 2*r+2 {
				t.Fatalf("round %d: the Updates returned %v, want %d and %d", r, got, 2*r+1, 2*r+2)
			}
		}
		t.Logf("%d writes for %d Updates", writes.Load(), 2*rounds)
		for _, tb := range append(tables, started(t, b, topic, opts{})) {
			waitFor(t, tb, func(tb *Table[item]) bool { v, _ := tb.Get("a"); return v.N == 2*rounds })
		}
	})
}

// Another instance's Update lands between this one's read and its write:
// this one's record overwrites it, then this one writes again on top of it.
func TestUpdateRepairsAWriteRacingIt(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		ctx := testCtx(t)
		topic := newTopic(t, b)
		mine, other := started(t, b, topic, opts{}), started(t, b, topic, opts{})
		if err := mine.Put(ctx, item{ID: "a", Secret: "s"}); err != nil {
			t.Fatal(err)
		}
		writes := 0
		mine.SetBeforeWrite(func() {
			if writes++; writes == 1 {
				if _, _, err := other.Update(ctx, "a", add(10)); err != nil {
					t.Error(err)
				}
			}
		})
		v, changed, err := mine.Update(ctx, "a", add(1))
		if err != nil || !changed || v.N != 11 || v.Secret != "s" {
			t.Fatalf("Update = %+v, %v, %v; want n 11, changed", v, changed, err)
		}
		if writes != 2 {
			t.Fatalf("Update wrote %d times, want 2 (the stale write and its repair)", writes)
		}
		for _, tb := range []*Table[item]{mine, other, started(t, b, topic, opts{})} {
			waitFor(t, tb, func(tb *Table[item]) bool { v, _ := tb.Get("a"); return v.N == 11 })
		}
	})
}

// A delete lands between Update's read and its write: Update's record
// brought the item back, so it writes a tombstone after it.
func TestUpdateDoesNotResurrectADelete(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		ctx := testCtx(t)
		topic := newTopic(t, b)
		mine, other := started(t, b, topic, opts{}), started(t, b, topic, opts{})
		if err := mine.Put(ctx, item{ID: "a"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, other, func(tb *Table[item]) bool { _, ok := tb.Get("a"); return ok })
		mine.SetBeforeWrite(sync.OnceFunc(func() {
			if err := other.Delete(ctx, "a"); err != nil {
				t.Error(err)
			}
		}))
		if _, _, err := mine.Update(ctx, "a", add(1)); !errors.Is(err, errNotFound) {
			t.Fatalf("Update racing a delete = %v, want ErrNotFound", err)
		}
		if _, ok := mine.Get("a"); ok {
			t.Fatal("the item is back after Update returned")
		}
		if _, ok := started(t, b, topic, opts{}).Get("a"); ok {
			t.Fatal("a table started now loads the deleted item")
		}
	})
}

// Update writes nothing when fn changes nothing or fails, or the id is
// unknown, and refuses a change of id.
func TestUpdateWritesOnlyChanges(t *testing.T) {
	b := testenv.Kfake(t)
	ctx := testCtx(t)
	topic := newTopic(t, b)
	tb := started(t, b, topic, opts{})
	if err := tb.Put(ctx, item{ID: "a", N: 1}); err != nil {
		t.Fatal(err)
	}
	n := records(t, b, topic)
	if v, changed, err := tb.Update(ctx, "a", func(v item) (item, bool, error) { return v, false, nil }); err != nil || changed || v.N != 1 {
		t.Fatalf("unchanged Update = %+v, %v, %v", v, changed, err)
	}
	refused := errors.New("refused")
	if _, _, err := tb.Update(ctx, "a", func(v item) (item, bool, error) { return v, true, refused }); err != refused {
		t.Fatalf("Update with fn failing = %v, want fn's error", err)
	}
	if _, _, err := tb.Update(ctx, "zz", add(1)); err != errNotFound {
		t.Fatalf("Update of an unknown id = %v, want ErrNotFound", err)
	}
	if _, _, err := tb.Update(ctx, "a", func(v item) (item, bool, error) { v.ID = "b"; return v, true, nil }); err == nil {
		t.Fatal("Update accepted a change of id")
	}
	if m := records(t, b, topic); m != n {
		t.Fatalf("Update wrote %d records", m-n)
	}
}

// Another writer changing the item before each of Update's writes makes it
// give up after ten, with an error.
func TestUpdateGivesUpAfterTenConflicts(t *testing.T) {
	b := testenv.Kfake(t)
	ctx := testCtx(t)
	topic := newTopic(t, b)
	mine, other := started(t, b, topic, opts{}), started(t, b, topic, opts{})
	if err := mine.Put(ctx, item{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	writes := 0
	mine.SetBeforeWrite(func() {
		writes++
		if err := other.Put(ctx, item{ID: "a", N: 100 * writes}); err != nil {
			t.Error(err)
		}
	})
	if _, _, err := mine.Update(ctx, "a", add(1)); err == nil {
		t.Fatal("Update succeeded against a writer changing every one of its writes")
	}
	if writes != maxUpdateWrites {
		t.Fatalf("Update wrote %d times before giving up, want %d", writes, maxUpdateWrites)
	}
}
