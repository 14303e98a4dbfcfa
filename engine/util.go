package engine

import (
	"context"
	"os"
	"time"
)

// defaultInstanceID names this instance for transactional ids. It is the
// hostname, stable across restarts, so a restarted instance fences the
// transaction its previous run left open instead of waiting for it to time
// out (which would stall read_committed consumers).
func defaultInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "laneway"
	}
	return host
}

// sleepCtx waits d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
