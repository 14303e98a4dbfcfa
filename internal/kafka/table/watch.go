package table

import (
	"context"
	"fmt"
)

// watch collects, for the id an Update is writing, what each record applied
// to that id replaced, so that Update can tell whether its own record
// replaced the version it was computed from. The follower fills it in as it
// applies records: that is the only place that sees, atomically, a record
// and the value before it.
type watch[T any] struct {
	id   string
	seen []replaced[T]
}

// replaced is what the record at offset replaced: the value (ok false for
// none: deleted or never written) and the offset of the record that wrote
// it (version, -1 for none); held is set when that value's secrets did not
// open.
type replaced[T any] struct {
	offset  int64
	prev    T
	ok      bool
	version int64
	held    *held
}

// noteReplacedLocked records, if an Update watches id, what the record at
// offset is about to replace.
func (t *Table[T]) noteReplacedLocked(id string, offset int64) {
	w := t.watch
	if w == nil || w.id != id {
		return
	}
	prev, ok := t.rows[id]
	w.seen = append(w.seen, replaced[T]{offset: offset, prev: prev.v, ok: ok, version: t.versionLocked(id), held: prev.held})
}

// writeWatched writes value for id like write, and returns what its record
// replaced when this table applied it.
func (t *Table[T]) writeWatched(ctx context.Context, id string, value []byte) (replaced[T], error) {
	w := &watch[T]{id: id}
	t.mu.Lock()
	t.watch = w
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.watch = nil
		t.mu.Unlock()
	}()
	offset, err := t.write(ctx, id, value)
	if err != nil {
		return replaced[T]{}, err
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, r := range w.seen {
		if r.offset == offset {
			return r, nil
		}
	}
	// Only a record the follower skipped could get here.
	return replaced[T]{}, fmt.Errorf("write %s %s: record at offset %d not seen when applied", t.cfg.Name, id, offset)
}
