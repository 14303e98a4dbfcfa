package table

import (
	"context"
	"fmt"
)

// maxUpdateWrites bounds the writes of one Update: each one after the first
// answers another writer's change to the same record within a round trip.
const maxUpdateWrites = 10

// Update applies fn to the latest value of id and writes the result, if fn
// reports a change, leaving every other change made by anyone before the
// write in place. It returns the value the table then holds and whether
// this call changed it. An id the table does not hold gives
// Config.ErrNotFound and writes nothing, a held one Config.ErrHeld; fn's
// error is returned as is.
//
// fn gets the table's value: it may replace its slices and maps but must
// not modify them in place. It may be called more than once and must not
// block.
//
// The topic has no compare-and-set, so Update checks after the fact and
// repairs. It first catches up with the topic (lists its end offset and
// waits until this table has applied every record below it), so fn sees
// every write acknowledged before then, not only what this table happened
// to have read. It writes fn's result and, when it applies its own record,
// checks that the record replaced is the one fn was given. If another
// writer's record landed in between, Update's record has overwritten it
// with a value computed from an older one; Update then writes again over
// its own record: fn applied to the other writer's value, that value
// unchanged when fn has nothing to change or refuses it, or a tombstone
// when it was a delete (then it returns Config.ErrNotFound). It repeats
// until a write replaces the value it was computed from, at most 10
// writes. Updates in one process are serialised and never conflict with
// each other. What remains:
//
//   - between the stale write and the repair, one produce and read-back
//     (milliseconds), every instance sees the stale value: a change made
//     in that window is missing, a deleted record is present again;
//   - if the process stops, ctx ends or the repair write fails within that
//     window, the stale value stays: the error is returned, but the topic
//     is as after a blind Put of it;
//   - a blind writer (Put, Delete, another instance) that reads the stale
//     value within the window and writes on top of it keeps its fields;
//   - a held record of another writer's that Update overwrote is written
//     back as it was read, and Update returns Config.ErrHeld;
//   - after 10 conflicting writes in a row Update gives up with an error,
//     its last record in place.
func (t *Table[T]) Update(ctx context.Context, id string, fn func(T) (T, bool, error)) (T, bool, error) {
	var zero T
	t.updateMu.Lock()
	defer t.updateMu.Unlock()
	b, err := t.latest(ctx, id)
	if err != nil {
		return zero, false, err
	}
	for writes := 0; ; writes++ {
		s, err := t.step(id, b, fn)
		if err != nil {
			return zero, false, err
		}
		if !s.changed && !b.stale {
			return s.result()
		}
		if writes == maxUpdateWrites {
			return zero, false, fmt.Errorf("update %s %s: changed by another writer %d times in a row, gave up", t.cfg.Name, id, writes)
		}
		rep, err := t.writeStep(ctx, id, b, s)
		if err != nil {
			return zero, false, err
		}
		if rep.version == b.version {
			return s.result()
		}
		if rep.held != nil {
			return zero, false, t.restoreHeld(ctx, id, rep.held)
		}
		b = base[T]{v: rep.prev, ok: rep.ok, version: rep.offset, stale: true}
	}
}

// base is the value an Update step is computed from.
type base[T any] struct {
	v       T
	ok      bool  // false: deleted
	version int64 // offset of the record that wrote it, -1 for none
	// stale: the latest record of the id is this Update's own, computed
	// from a value another writer had replaced; it must be written over.
	stale bool
}

// step is what one round of Update writes and returns.
type step[T any] struct {
	out     T
	changed bool
	err     error // returned once out is in place: fn's, or ErrNotFound
}

func (s step[T]) result() (T, bool, error) {
	if s.err != nil {
		var zero T
		return zero, false, s.err
	}
	return s.out, s.changed, nil
}

// latest catches up with the topic and returns the value of id, which must
// be present and not held.
func (t *Table[T]) latest(ctx context.Context, id string) (base[T], error) {
	end, err := t.endOffset(ctx)
	if err != nil {
		return base[T]{}, err
	}
	if err := t.waitApplied(ctx, end); err != nil {
		return base[T]{}, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.rows[id]
	if !ok {
		return base[T]{}, t.cfg.ErrNotFound
	}
	if r.held != nil {
		return base[T]{}, t.heldError(id, r.held)
	}
	return base[T]{v: r.v, ok: true, version: t.versionLocked(id)}, nil
}

// step applies fn to b; an error is one that ends Update without a write.
func (t *Table[T]) step(id string, b base[T], fn func(T) (T, bool, error)) (step[T], error) {
	if !b.ok {
		return step[T]{err: t.cfg.ErrNotFound}, nil
	}
	next, change, err := fn(b.v)
	switch {
	case err != nil:
		return step[T]{out: b.v, err: err}, nil
	case !change:
		return step[T]{out: b.v}, nil
	case t.cfg.Codec.ID(next) != id:
		return step[T]{}, fmt.Errorf("update %s %s: the change has id %q", t.cfg.Name, id, t.cfg.Codec.ID(next))
	}
	return step[T]{out: next, changed: true}, nil
}

// writeStep writes s.out over b (a tombstone when b is deleted) and
// returns what its record replaced.
func (t *Table[T]) writeStep(ctx context.Context, id string, b base[T], s step[T]) (replaced[T], error) {
	var value []byte
	if b.ok {
		var err error
		if value, err = t.cfg.Codec.Encode(s.out); err != nil {
			return replaced[T]{}, err
		}
	}
	if t.beforeWrite != nil {
		t.beforeWrite()
	}
	return t.writeWatched(ctx, id, value)
}

// restoreHeld writes back, verbatim, another writer's record that this
// Update overwrote but cannot rewrite (its secrets do not open here), and
// returns Config.ErrHeld.
func (t *Table[T]) restoreHeld(ctx context.Context, id string, h *held) error {
	if _, err := t.write(ctx, id, h.raw); err != nil {
		return fmt.Errorf("%s %s: restoring another writer's record: %w", t.cfg.Name, id, err)
	}
	return t.heldError(id, h)
}
