// Package storetest holds the behaviour every receiver.DedupStore and
// receiver.RevisionStore must have, as tests that the in-memory and the
// Redis stores both run.
package storetest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/laneway/laneway/receiver"
)

// Advance moves a store's clock forward. nil means the store's clock cannot
// be moved (a real Redis), and the expiry cases are skipped.
type Advance func(time.Duration)

// Dedup runs the DedupStore cases. newStore returns an empty store for each
// case and the way to move its clock.
func Dedup(t *testing.T, newStore func(t *testing.T) (receiver.DedupStore, Advance)) {
	t.Run("ClaimDoneRelease", func(t *testing.T) {
		s, _ := newStore(t)
		ctx := context.Background()
		mustClaim(t, s, "a", "tok1", receiver.Claimed)
		mustClaim(t, s, "a", "tok2", receiver.InProgress)
		mustRelease(t, s, "a", "tok2") // not the holder: keeps the claim
		mustClaim(t, s, "a", "tok3", receiver.InProgress)
		mustRelease(t, s, "a", "tok1")
		mustClaim(t, s, "a", "tok4", receiver.Claimed)
		if err := s.Done(ctx, "a", time.Hour); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, "a", "tok5", receiver.AlreadyDone)
		mustRelease(t, s, "a", "tok4") // a done id is never released
		mustClaim(t, s, "a", "tok6", receiver.AlreadyDone)
		mustClaim(t, s, "b", "tok7", receiver.Claimed) // ids are independent
	})

	t.Run("Expiry", func(t *testing.T) {
		s, advance := newStore(t)
		if advance == nil {
			t.Skip("the store's clock cannot be moved")
		}
		mustClaim(t, s, "a", "old", receiver.Claimed)
		advance(time.Minute + time.Millisecond)
		// The holder died: its claim expired and a retry may claim.
		mustClaim(t, s, "a", "new", receiver.Claimed)
		mustRelease(t, s, "a", "old") // the dead holder must not free the new claim
		mustClaim(t, s, "a", "other", receiver.InProgress)

		if err := s.Done(context.Background(), "a", time.Hour); err != nil {
			t.Fatal(err)
		}
		advance(59 * time.Minute)
		mustClaim(t, s, "a", "x", receiver.AlreadyDone)
		advance(time.Minute + time.Millisecond)
		mustClaim(t, s, "a", "y", receiver.Claimed)
	})

	t.Run("ConcurrentClaims", func(t *testing.T) {
		s, _ := newStore(t)
		const n = 32
		results := make([]receiver.ClaimResult, n)
		errs := make([]error, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				results[i], errs[i] = s.Claim(context.Background(), "same", "tok"+strconv.Itoa(i), time.Minute)
			})
		}
		close(start)
		wg.Wait()
		claimed := 0
		for i, r := range results {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			if r == receiver.Claimed {
				claimed++
			} else if r != receiver.InProgress {
				t.Errorf("claim %d = %v, want claimed or in_progress", i, r)
			}
		}
		if claimed != 1 {
			t.Fatalf("%d of %d concurrent claims succeeded, want exactly 1", claimed, n)
		}
	})
}

// Revisions runs the RevisionStore cases; ttl is the store's revision TTL.
func Revisions(t *testing.T, ttl time.Duration, newStore func(t *testing.T) (receiver.RevisionStore, Advance)) {
	t.Run("StaleOnlyWhenStrictlyLower", func(t *testing.T) {
		s, _ := newStore(t)
		mustStale(t, s, "order:1", 5, false) // nothing stored
		mustAdvance(t, s, "order:1", 5)
		mustStale(t, s, "order:1", 4, true)
		mustStale(t, s, "order:1", 5, false) // equal: left to the webhook-id check
		mustStale(t, s, "order:1", 6, false)
		mustStale(t, s, "order:2", 1, false) // entities are independent
	})

	t.Run("AdvanceNeverLowers", func(t *testing.T) {
		s, _ := newStore(t)
		mustAdvance(t, s, "e", 10)
		mustAdvance(t, s, "e", 3)
		mustStale(t, s, "e", 9, true)
		mustAdvance(t, s, "e", 11)
		mustStale(t, s, "e", 10, true)
	})

	t.Run("LargeRevisions", func(t *testing.T) {
		s, _ := newStore(t)
		// Above 2^53 a float comparison would call these equal.
		const big = int64(1) << 60
		mustAdvance(t, s, "e", big)
		mustAdvance(t, s, "e", big+1)
		mustStale(t, s, "e", big, true)
		mustAdvance(t, s, "e", big)
		mustStale(t, s, "e", big, true)
		mustAdvance(t, s, "e", 9_223_372_036_854_775_807)
		mustStale(t, s, "e", 9_223_372_036_854_775_806, true)
	})

	t.Run("Expiry", func(t *testing.T) {
		s, advance := newStore(t)
		if advance == nil {
			t.Skip("the store's clock cannot be moved")
		}
		mustAdvance(t, s, "e", 5)
		advance(ttl - time.Second)
		mustAdvance(t, s, "e", 1) // an update, even an older one, keeps the entity
		advance(ttl - time.Second)
		mustStale(t, s, "e", 4, true)
		advance(2 * time.Second)
		mustStale(t, s, "e", 4, false)
	})

	t.Run("ConcurrentAdvance", func(t *testing.T) {
		s, _ := newStore(t)
		const n = 32
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				// Interleave high and low revisions.
				if err := s.Advance(context.Background(), "e", int64((i*7)%n+1)); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		mustStale(t, s, "e", n-1, true)
		mustStale(t, s, "e", n, false)
	})
}

func mustClaim(t *testing.T, s receiver.DedupStore, id, token string, want receiver.ClaimResult) {
	t.Helper()
	got, err := s.Claim(context.Background(), id, token, time.Minute)
	if err != nil {
		t.Fatalf("Claim(%q, %q): %v", id, token, err)
	}
	if got != want {
		t.Fatalf("Claim(%q, %q) = %v, want %v", id, token, got, want)
	}
}

func mustRelease(t *testing.T, s receiver.DedupStore, id, token string) {
	t.Helper()
	if err := s.Release(context.Background(), id, token); err != nil {
		t.Fatalf("Release(%q, %q): %v", id, token, err)
	}
}

func mustStale(t *testing.T, s receiver.RevisionStore, entity string, rev int64, want bool) {
	t.Helper()
	got, err := s.Stale(context.Background(), entity, rev)
	if err != nil {
		t.Fatalf("Stale(%q, %d): %v", entity, rev, err)
	}
	if got != want {
		t.Fatalf("Stale(%q, %d) = %v, want %v", entity, rev, got, want)
	}
}

func mustAdvance(t *testing.T, s receiver.RevisionStore, entity string, rev int64) {
	t.Helper()
	if err := s.Advance(context.Background(), entity, rev); err != nil {
		t.Fatalf("Advance(%q, %d): %v", entity, rev, err)
	}
}
