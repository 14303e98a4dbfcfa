// Package poll waits for a condition the test kit cannot be told about,
// only observe: counters reaching a figure, a process answering. Polling is
// precise enough where it is used: the figures measured are timestamped by
// what they measure, not by when the poll notices.
package poll

import (
	"context"
	"time"
)

// Until calls cond every interval (and once at once) until it holds, then
// returns nil; it returns ctx's error if ctx ends first.
func Until(ctx context.Context, every time.Duration, cond func() bool) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
