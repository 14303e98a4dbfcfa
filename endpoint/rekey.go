package endpoint

import (
	"context"
	"errors"

	"github.com/laneway/laneway/internal/secretbox"
)

// Census counts the endpoints by the key their secrets are sealed under
// and lists those whose secrets do not open here.
func (s *Store) Census() secretbox.Census {
	c := secretbox.NewCensus()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id := range s.byID {
		if h, held := s.held[id]; held {
			c.Unreadable[id] = h.err.Error()
			continue
		}
		c.Count(s.keyIDs[id])
	}
	return c
}

// Rekey rewrites every endpoint whose secrets are not sealed under the
// ring's newest key (plaintext ones included), through Update, so a change
// made meanwhile by another writer is kept. Endpoints whose secrets do not
// open are left as they are and listed in the census it returns, taken
// after the rewrite.
func (s *Store) Rekey(ctx context.Context) (secretbox.Census, error) {
	if s.cfg.Secrets == nil {
		return secretbox.Census{}, secretbox.ErrNoRing
	}
	newest := s.cfg.Secrets.WriteKeyID()
	rewritten := 0
	for _, id := range s.stale(newest) {
		_, changed, err := s.Update(ctx, id, func(e Endpoint) (Endpoint, bool, error) { return e, true, nil })
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrSecretsUnavailable):
			continue // deleted meanwhile, or held: the census says which
		case err != nil:
			return secretbox.Census{}, err
		}
		if changed {
			rewritten++
		}
	}
	c := s.Census()
	c.Rewritten = rewritten
	return c, nil
}

// stale returns the ids of the readable endpoints not sealed under newest.
func (s *Store) stale(newest string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []string
	for id, kid := range s.keyIDs {
		if _, held := s.held[id]; !held && kid != newest {
			ids = append(ids, id)
		}
	}
	return ids
}
