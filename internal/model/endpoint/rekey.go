package endpoint

import (
	"context"

	"github.com/laneway/laneway/internal/secretbox"
)

// Census counts the endpoints by the key their secrets are sealed under
// and lists those whose secrets do not open here.
func (s *Store) Census() secretbox.Census { return s.t.Census() }

// Rekey rewrites every endpoint whose secrets are not sealed under the
// ring's newest key (plaintext ones included), through Update, so a change
// made meanwhile by another writer is kept. Endpoints whose secrets do not
// open are left as they are and listed in the census it returns, taken
// after the rewrite.
func (s *Store) Rekey(ctx context.Context) (secretbox.Census, error) {
	return s.t.Rekey(ctx, s.cfg.Secrets)
}
