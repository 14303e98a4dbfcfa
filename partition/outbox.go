package partition

import (
	"slices"
	"time"
)

// outbox issues produces of one kind (parked appends, dead letters) in
// order and retries the failed ones without reordering them.
//
// It relies on the producer's rule that a failed record fails every record
// issued after it to the same partition (franz-go's idempotent producer
// does). So when a failure arrives, nothing new is issued until every
// issued record has come back; the failed ones are then issued again, in
// their first order, ahead of everything queued after them, after a short
// backoff so that an unreachable broker is not hammered.
type outbox[T any] struct {
	queued   []T // waiting to be issued, in order
	inFlight int
	failed   []T // came back failed; issued again once inFlight is 0
	retryAt  time.Time
	backoff  time.Duration
	seq      func(T) uint64
	issue    func(T)
}

const (
	outboxMinBackoff = 100 * time.Millisecond
	outboxMaxBackoff = 5 * time.Second
)

func (b *outbox[T]) push(v T) { b.queued = append(b.queued, v) }

// pending is how many records are queued, in flight or waiting for a retry.
func (b *outbox[T]) pending() int { return len(b.queued) + b.inFlight + len(b.failed) }

// flush issues what may be issued at now. limit bounds the records in
// flight (0: no bound).
func (b *outbox[T]) flush(now time.Time, limit int) {
	if len(b.failed) > 0 {
		if b.inFlight > 0 {
			return // more failures may still come back
		}
		slices.SortFunc(b.failed, func(x, y T) int { return cmpSeq(b.seq(x), b.seq(y)) })
		b.queued = append(b.failed, b.queued...)
		b.failed = nil
		b.backoff = min(max(2*b.backoff, outboxMinBackoff), outboxMaxBackoff)
		b.retryAt = now.Add(b.backoff)
	}
	if now.Before(b.retryAt) {
		return
	}
	for len(b.queued) > 0 && (limit <= 0 || b.inFlight < limit) {
		v := b.queued[0]
		b.queued[0] = *new(T)
		b.queued = b.queued[1:]
		b.inFlight++
		b.issue(v)
	}
	if len(b.queued) == 0 {
		b.queued = nil // give the backing array back after a burst
	}
}

// done records an issued record's outcome and reports whether it failed.
func (b *outbox[T]) done(v T, err error) bool {
	b.inFlight--
	if err != nil {
		b.failed = append(b.failed, v)
		return true
	}
	if len(b.failed) == 0 {
		b.backoff = 0
	}
	return false
}

// drop forgets everything not yet issued or waiting for a retry, for a
// partition given up: its next owner reads the deliveries again.
func (b *outbox[T]) drop() (dropped int) {
	dropped = len(b.queued) + len(b.failed)
	b.queued, b.failed = nil, nil
	return dropped
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
