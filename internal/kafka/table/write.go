package table

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/security/secretbox"
)

// Put writes v under its id and waits until this table has applied it. It
// replaces whatever the topic holds for the id, including changes made
// since v was read; to change one field of the latest value, use Update.
func (t *Table[T]) Put(ctx context.Context, v T) error {
	id := t.cfg.Codec.ID(v)
	if id == "" {
		return fmt.Errorf("%s id is required", t.cfg.Name)
	}
	if err := t.HeldErr(id); err != nil {
		return err
	}
	value, err := t.cfg.Codec.Encode(v)
	if err != nil {
		return err
	}
	_, err = t.write(ctx, id, value)
	return err
}

// Delete writes a tombstone for id and waits until it is applied; an id
// the table does not hold is Config.ErrNotFound.
func (t *Table[T]) Delete(ctx context.Context, id string) error {
	if _, ok := t.Get(id); !ok {
		return t.cfg.ErrNotFound
	}
	_, err := t.write(ctx, id, nil)
	return err
}

// write writes value (nil: a tombstone) for id, waits until this table has
// applied it and returns its offset.
func (t *Table[T]) write(ctx context.Context, id string, value []byte) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, t.cfg.WriteTimeout)
	defer cancel()
	rec := &kgo.Record{Topic: t.cfg.Topic, Key: []byte(id), Value: value}
	if err := t.client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return 0, fmt.Errorf("write %s %s: %w", t.cfg.Name, id, err)
	}
	return rec.Offset, t.waitApplied(ctx, rec.Offset+1)
}

// Rekey rewrites, through Update, every record whose secrets are not
// sealed under ring's newest key (plaintext ones included), so a change
// made meanwhile by another writer is kept. ring must be the one the codec
// seals with. Held records are left as they are and listed in the census
// it returns, taken after the rewrite.
func (t *Table[T]) Rekey(ctx context.Context, ring *secretbox.Ring) (secretbox.Census, error) {
	if ring == nil {
		return secretbox.Census{}, secretbox.ErrNoRing
	}
	rewritten := 0
	for _, id := range t.notSealedUnder(ring.WriteKeyID()) {
		_, changed, err := t.Update(ctx, id, func(v T) (T, bool, error) { return v, true, nil })
		switch {
		case errors.Is(err, t.cfg.ErrNotFound), errors.Is(err, t.cfg.ErrHeld):
			continue // deleted meanwhile, or held: the census says which
		case err != nil:
			return secretbox.Census{}, err
		}
		if changed {
			rewritten++
		}
	}
	c := t.Census()
	c.Rewritten = rewritten
	return c, nil
}

// notSealedUnder returns the ids of the readable records not sealed under
// keyID.
func (t *Table[T]) notSealedUnder(keyID string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var ids []string
	for id, r := range t.rows {
		if r.held == nil && r.keyID != keyID {
			ids = append(ids, id)
		}
	}
	return ids
}

// SetBeforeWrite makes Update call f before each of its writes, so that a
// test can land another writer's change between Update's read and write.
// It is for tests only.
func (t *Table[T]) SetBeforeWrite(f func()) {
	t.updateMu.Lock()
	defer t.updateMu.Unlock()
	t.beforeWrite = f
}
