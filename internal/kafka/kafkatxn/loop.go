package kafkatxn

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/plumbing/timing"
)

// Poll and Finish are the two halves of a turn of the loop that owns a
// Session, around its transaction.

// Poll polls up to maxRecords records, blocking at most wait so that a
// loop that cannot fetch (its group's offsets held by a hanging
// transaction) still gets to MaybeRepair between polls. While ctx is live
// it logs the fetch errors, as msg, but for that bound running out; the
// caller checks ctx after it.
func (s *Session) Poll(ctx context.Context, wait time.Duration, maxRecords int, msg string) kgo.Fetches {
	pollCtx, cancel := context.WithTimeout(ctx, wait)
	fetches := s.sess.PollRecords(pollCtx, maxRecords)
	cancel()
	if ctx.Err() != nil {
		return fetches
	}
	fetches.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) {
			s.logger.Warn(msg, "topic", t, "partition", p, "err", err)
		}
	})
	return fetches
}

// Finish ends a loop's turn after a transaction. Committed (err nil), it
// waits for the markers (Landed: no transaction may begin before they are
// in place) and runs the check that is due (MaybeRepair). Failed, it logs
// err as msg, waits a second and renews the session: the input is consumed
// again. It reports false when ctx ended during that wait.
func (s *Session) Finish(ctx context.Context, written kadm.TopicsSet, err error, msg string) bool {
	if err == nil {
		s.Landed(ctx, written)
		s.MaybeRepair(ctx)
		return true
	}
	s.logger.Error(msg, "err", err)
	if !timing.Sleep(ctx, time.Second) {
		return false
	}
	s.Renew(ctx)
	return true
}
