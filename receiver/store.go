package receiver

import (
	"context"
	"time"
)

// ClaimResult is what DedupStore.Claim found.
type ClaimResult uint8

const (
	// Claimed: the webhook-id was free and now belongs to the caller, who
	// must call Done or Release. It is the zero value so that a store that
	// cannot tell errs towards handling a delivery twice, never towards
	// dropping it.
	Claimed ClaimResult = iota
	// AlreadyDone: the webhook-id was handled before; this is a duplicate.
	AlreadyDone
	// InProgress: another attempt holds the claim right now.
	InProgress
)

func (c ClaimResult) String() string {
	switch c {
	case Claimed:
		return "claimed"
	case AlreadyDone:
		return "already_done"
	case InProgress:
		return "in_progress"
	default:
		return "unknown"
	}
}

// DedupStore remembers which webhook-ids were handled, so that a redelivery
// is answered without calling the application again.
//
// A webhook-id goes through two states: claimed (an attempt is being
// handled; expires after the claim's TTL so that a crashed process does not
// block it for good) and done (handled; remembered for the done TTL). Only
// Done marks it handled: an attempt that failed is released, and Laneway's
// retry of it claims it afresh.
//
// Implementations must be safe for concurrent use, and Claim must be atomic:
// of two concurrent claims of a free id, exactly one gets Claimed.
type DedupStore interface {
	// Claim claims id for the holder of token for ttl, unless id is
	// already claimed or done.
	Claim(ctx context.Context, id, token string, ttl time.Duration) (ClaimResult, error)
	// Done records id as handled for ttl, replacing any claim.
	Done(ctx context.Context, id string, ttl time.Duration) error
	// Release drops token's claim on id. It does nothing when id is done,
	// or claimed under another token (token's claim expired and another
	// attempt claimed id since).
	Release(ctx context.Context, id, token string) error
}

// RevisionStore remembers the newest revision handled per entity, so that
// an update older than one already applied is dropped.
//
// Implementations must be safe for concurrent use, and Advance must never
// lower a stored revision.
type RevisionStore interface {
	// Stale reports whether revision is strictly lower than the revision
	// stored for entity. An entity with no stored revision is never stale.
	Stale(ctx context.Context, entity string, revision int64) (bool, error)
	// Advance stores revision for entity unless a higher one is stored.
	Advance(ctx context.Context, entity string, revision int64) error
}
