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
	size     func(T) int64 // nil: bytes are not counted
	bytes    int64         // size of everything queued, in flight or failed
	outBytes int64         // size of what is in flight
}

const (
	outboxMinBackoff = 100 * time.Millisecond
	outboxMaxBackoff = 5 * time.Second
)

func (b *outbox[T]) push(v T) {
	b.queued = append(b.queued, v)
	b.bytes += b.sizeOf(v)
}

func (b *outbox[T]) sizeOf(v T) int64 {
	if b.size == nil {
		return 0
	}
	return b.size(v)
}

// pending is how many records are queued, in flight or waiting for a retry.
func (b *outbox[T]) pending() int { return len(b.queued) + b.inFlight + len(b.failed) }

// flush issues what may be issued at now. limit bounds the records in
// flight and limitBytes their size (0: no bound); one record always may go.
func (b *outbox[T]) flush(now time.Time, limit int, limitBytes int64) {
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
	for len(b.queued) > 0 && (limit <= 0 || b.inFlight < limit) && (limitBytes <= 0 || b.inFlight == 0 || b.outBytes < limitBytes) {
		v := b.queued[0]
		b.queued[0] = *new(T)
		b.queued = b.queued[1:]
		b.inFlight++
		b.outBytes += b.sizeOf(v)
		b.issue(v)
	}
	if len(b.queued) == 0 {
		b.queued = nil // give the backing array back after a burst
	}
}

// done records an issued record's outcome and reports whether it failed.
func (b *outbox[T]) done(v T, err error) bool {
	b.inFlight--
	b.outBytes -= b.sizeOf(v)
	if err != nil {
		b.failed = append(b.failed, v)
		return true
	}
	b.bytes -= b.sizeOf(v)
	if len(b.failed) == 0 {
		b.backoff = 0
	}
	return false
}

// drop forgets everything not yet issued or waiting for a retry, for a
// partition given up: its next owner reads the deliveries again.
func (b *outbox[T]) drop() (dropped int) {
	dropped = len(b.queued) + len(b.failed)
	for _, v := range b.queued {
		b.bytes -= b.sizeOf(v)
	}
	for _, v := range b.failed {
		b.bytes -= b.sizeOf(v)
	}
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
