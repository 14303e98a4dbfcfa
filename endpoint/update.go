package endpoint

import (
	"context"
	"fmt"
	"time"
)

// Update applies fn to the latest value of endpoint id and writes the
// result, if fn reports a change, leaving every other change made by
// anyone before the write in place. It returns the value the store then
// holds and whether this call changed it. An unknown or deleted id gives
// ErrNotFound and writes nothing; fn's error is returned as is.
//
// fn gets a copy whose slices (EventTypes, Secrets) are shared with the
// store: it may replace them but must not modify them in place. It may be
// called more than once and must not block.
//
// The topic has no compare-and-set, so Update checks after the fact and
// repairs. It first catches up with the topic (lists its end offset and
// waits until this store has applied every record below it), so fn sees
// every write acknowledged before then, not only what this store happened
// to have read. It writes fn's result and, when it applies its own record,
// checks that the record replaced is the one fn was given. If another
// writer's record (a PATCH, a rotation, a delete, another instance's
// Disable) landed in between, Update's record has overwritten it with a
// value computed from an older one; Update then writes again over its own
// record: fn applied to the other writer's value, that value unchanged
// when fn has nothing to change or refuses it, or a tombstone when it was
// a delete (then it returns ErrNotFound). It repeats until a write
// replaces the value it was computed from, at most 10 writes. Updates in
// one process are serialised and never conflict with each other. What
// remains:
//
//   - between the stale write and the repair, one produce and read-back
//     (milliseconds), every instance sees the stale value: a secret
//     rotated or a field changed in that window is missing, a deleted
//     endpoint is present again;
//   - if the process stops, ctx ends or the repair write fails within that
//     window, the stale value stays: the error is returned, but the topic
//     is as after a blind Put of it;
//   - a blind writer (Put, Delete, another instance) that reads the stale
//     value within the window and writes on top of it keeps its fields;
//   - after 10 conflicting writes in a row Update gives up with an error,
//     its last record in place.
func (s *Store) Update(ctx context.Context, id string, fn func(Endpoint) (Endpoint, bool, error)) (Endpoint, bool, error) {
	s.updateMu.Lock()
	defer s.updateMu.Unlock()
	end, err := s.endOffset(ctx)
	if err != nil {
		return Endpoint{}, false, err
	}
	if err := s.waitApplied(ctx, end); err != nil {
		return Endpoint{}, false, err
	}
	s.mu.RLock()
	cur, ok := s.byID[id]
	version := s.versionLocked(id)
	s.mu.RUnlock()
	if !ok {
		return Endpoint{}, false, ErrNotFound
	}
	if err := s.heldErr(id); err != nil {
		return Endpoint{}, false, err
	}
	// stale: the latest record of id is this Update's own, computed from a
	// value another writer had replaced; it must be written over.
	for writes, stale := 0, false; ; writes++ {
		var (
			out     Endpoint
			changed bool
			outErr  error
			value   []byte // nil: a tombstone
		)
		if !ok {
			outErr = ErrNotFound
		} else if next, change, err := fn(cur); err != nil {
			out, outErr = cur, err
		} else if change {
			if next.ID != id {
				return Endpoint{}, false, fmt.Errorf("update endpoint %s: the change has id %q", id, next.ID)
			}
			out, changed = next, true
		} else {
			out = cur
		}
		if !changed && !stale {
			if outErr != nil {
				return Endpoint{}, false, outErr
			}
			return out, false, nil
		}
		if writes == maxUpdateWrites {
			return Endpoint{}, false, fmt.Errorf("update endpoint %s: changed by another writer %d times in a row, gave up", id, writes)
		}
		if ok {
			if value, err = encodeRecord(out, s.cfg.Secrets); err != nil {
				return Endpoint{}, false, err
			}
		}
		if s.beforeWrite != nil {
			s.beforeWrite()
		}
		rep, err := s.writeWatched(ctx, id, value)
		if err != nil {
			return Endpoint{}, false, err
		}
		if rep.version == version {
			if outErr != nil {
				return Endpoint{}, false, outErr
			}
			return out, changed, nil
		}
		if rep.held != nil {
			return Endpoint{}, false, s.restoreHeld(ctx, id, rep.held)
		}
		cur, ok, version, stale = rep.prev, rep.ok, rep.offset, true
	}
}

// writeWatched writes value for id like write, and returns what its record
// replaced when this store applied it.
func (s *Store) writeWatched(ctx context.Context, id string, value []byte) (replaced, error) {
	w := &watch{id: id}
	s.mu.Lock()
	s.watch = w
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.watch = nil
		s.mu.Unlock()
	}()
	offset, err := s.writeAt(ctx, id, value)
	if err != nil {
		return replaced{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, r := range w.seen {
		if r.offset == offset {
			return r, nil
		}
	}
	// Only a record the follower skipped could get here.
	return replaced{}, fmt.Errorf("write endpoint %s: record at offset %d not seen when applied", id, offset)
}

// Disable marks endpoint id disabled for reason as of at, changing only
// Status, DisabledReason and UpdatedAt of the latest value: a secret
// rotated or a field edited after the caller read the endpoint is kept, and
// a deleted or unknown endpoint is not written back (ErrNotFound). It
// returns the endpoint as stored and whether this call disabled it: an
// endpoint already disabled is returned as it is, with its earlier reason,
// false and nil, and nothing is written. It is Update with that change;
// Update says what a concurrent writer can still do.
func (s *Store) Disable(ctx context.Context, id, reason string, at time.Time) (Endpoint, bool, error) {
	return s.Update(ctx, id, func(e Endpoint) (Endpoint, bool, error) {
		if e.Status == StatusDisabled {
			return e, false, nil
		}
		e.Status, e.DisabledReason, e.UpdatedAt = StatusDisabled, reason, at.UTC()
		return e, true, nil
	})
}

// restoreHeld writes back, verbatim, another writer's record that this
// Update overwrote but cannot rewrite (its secrets do not open here), and
// returns ErrSecretsUnavailable.
func (s *Store) restoreHeld(ctx context.Context, id string, h *heldRecord) error {
	if err := s.write(ctx, id, h.raw); err != nil {
		return fmt.Errorf("endpoint %s: restoring another writer's record: %w", id, err)
	}
	return fmt.Errorf("endpoint %s: %w: %v", id, ErrSecretsUnavailable, h.err)
}
