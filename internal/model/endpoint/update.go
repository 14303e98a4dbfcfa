package endpoint

import (
	"context"
	"time"
)

// Update applies fn to the latest value of endpoint id and writes the
// result, if fn reports a change, leaving every other change made by
// anyone before the write in place. It returns the value the store then
// holds and whether this call changed it. An unknown or deleted id gives
// ErrNotFound and writes nothing, a held one ErrSecretsUnavailable; fn's
// error is returned as is.
//
// fn gets a copy whose slices (EventTypes, Secrets) are shared with the
// store: it may replace them but must not modify them in place. It may be
// called more than once and must not block.
//
// The topic has no compare-and-set, so Update checks after the fact and
// repairs: when another writer's record (a PATCH, a rotation, a delete,
// another instance's Disable) lands between its read and its write, it
// writes again on top of that record, at most 10 writes in all. Updates in
// one process never conflict with each other. table.Table.Update says
// what a concurrent writer can still do: mainly, for one produce and
// read-back, every instance sees the value Update overwrote the other
// writer's with (a rotated secret missing, a deleted endpoint present).
func (s *Store) Update(ctx context.Context, id string, fn func(Endpoint) (Endpoint, bool, error)) (Endpoint, bool, error) {
	return s.Table.Update(ctx, id, fn)
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
