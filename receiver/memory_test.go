package receiver_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/laneway/laneway/receiver"
	"github.com/laneway/laneway/receiver/internal/storetest"
)

func TestMemoryDedup(t *testing.T) {
	storetest.Dedup(t, func(t *testing.T) (receiver.DedupStore, storetest.Advance) {
		c := newClock()
		return receiver.NewMemoryDedup(receiver.MemoryDedupConfig{Now: c.Now}), c.Advance
	})
}

func TestMemoryRevisions(t *testing.T) {
	const ttl = 24 * time.Hour
	storetest.Revisions(t, ttl, func(t *testing.T) (receiver.RevisionStore, storetest.Advance) {
		c := newClock()
		return receiver.NewMemoryRevisions(receiver.MemoryRevisionsConfig{TTL: ttl, Now: c.Now}), c.Advance
	})
}

func TestMemoryRevisionsDefaultTTL(t *testing.T) {
	c := newClock()
	s := receiver.NewMemoryRevisions(receiver.MemoryRevisionsConfig{Now: c.Now})
	ctx := context.Background()
	_ = s.Advance(ctx, "e", 5)
	c.Advance(receiver.DefaultRevisionTTL - time.Second)
	if stale, _ := s.Stale(ctx, "e", 4); !stale {
		t.Fatal("forgot the revision before DefaultRevisionTTL")
	}
	c.Advance(time.Second)
	if stale, _ := s.Stale(ctx, "e", 4); stale {
		t.Fatal("kept the revision past DefaultRevisionTTL")
	}
}

func TestMemoryDedupIsBounded(t *testing.T) {
	c := newClock()
	const maxEntries = 100
	s := receiver.NewMemoryDedup(receiver.MemoryDedupConfig{MaxEntries: maxEntries, Now: c.Now})
	ctx := context.Background()
	for i := range 10_000 {
		id := "evt_" + strconv.Itoa(i)
		if _, err := s.Claim(ctx, id, "tok", time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.Done(ctx, id, time.Hour); err != nil {
			t.Fatal(err)
		}
		if n := s.Len(); n > maxEntries {
			t.Fatalf("after %d ids the store holds %d, over its cap of %d", i+1, n, maxEntries)
		}
	}
	// The newest ids are remembered; the oldest were the ones evicted.
	if res, _ := s.Claim(ctx, "evt_9999", "x", time.Minute); res != receiver.AlreadyDone {
		t.Fatalf("newest id: %v, want already_done", res)
	}
	if res, _ := s.Claim(ctx, "evt_0", "x", time.Minute); res != receiver.Claimed {
		t.Fatalf("oldest id: %v, want claimed (evicted)", res)
	}
}

func TestMemoryRevisionsIsBounded(t *testing.T) {
	c := newClock()
	const maxEntries = 100
	s := receiver.NewMemoryRevisions(receiver.MemoryRevisionsConfig{MaxEntries: maxEntries, Now: c.Now})
	ctx := context.Background()
	for i := range 10_000 {
		if err := s.Advance(ctx, "order:"+strconv.Itoa(i), 10); err != nil {
			t.Fatal(err)
		}
		if n := s.Len(); n > maxEntries {
			t.Fatalf("after %d entities the store holds %d, over its cap of %d", i+1, n, maxEntries)
		}
	}
	if stale, _ := s.Stale(ctx, "order:9999", 9); !stale {
		t.Fatal("the newest entity was evicted")
	}
}

// Expired entries free their memory at the next write, not only when the cap
// is reached.
func TestMemoryStoresSweepExpiredEntries(t *testing.T) {
	c := newClock()
	ctx := context.Background()
	dedup := receiver.NewMemoryDedup(receiver.MemoryDedupConfig{Now: c.Now})
	revs := receiver.NewMemoryRevisions(receiver.MemoryRevisionsConfig{TTL: time.Hour, Now: c.Now})
	for i := range 1000 {
		_ = dedup.Done(ctx, "evt_"+strconv.Itoa(i), time.Hour)
		_ = revs.Advance(ctx, "order:"+strconv.Itoa(i), 1)
	}
	c.Advance(time.Hour)
	_ = dedup.Done(ctx, "evt_new", time.Hour)
	_ = revs.Advance(ctx, "order:new", 1)
	if dedup.Len() != 1 || revs.Len() != 1 {
		t.Fatalf("after expiry: dedup holds %d, revisions %d; want 1 each", dedup.Len(), revs.Len())
	}
}
