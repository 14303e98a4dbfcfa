package health

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

type fixedSource []Snapshot

func (f fixedSource) Snapshots(time.Time) []Snapshot { return f }

func TestPublishThenReadAnyInstance(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	since := now.Add(-90 * time.Second)
	cfg := Config{Redis: rdb, Now: func() time.Time { return now }, TTL: time.Hour}
	pub, err := NewPublisher(cfg, fixedSource{
		{EndpointID: "ep_a", LaneState: LaneState{Pending: 3, Owner: "i-1"}, OldestPendingSince: &since, UpdatedAt: now},
		{EndpointID: "ep_b", LaneState: LaneState{ParkedReason: "paused", Breaker: Breaker{State: "open"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(context.Background()); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(context.Background(), []string{"ep_a", "ep_b", "ep_unknown"})
	if err != nil {
		t.Fatal(err)
	}
	a, b := got["ep_a"], got["ep_b"]
	if len(got) != 2 || a.Pending != 3 || a.Owner != "i-1" || a.OldestPendingAge(now) != 90*time.Second {
		t.Fatalf("snapshots %+v", got)
	}
	if !a.Healthy() || b.Healthy() {
		t.Fatalf("healthy: a %v (want true), b %v (want false: parked, breaker open)", a.Healthy(), b.Healthy())
	}
	if ttl := mr.TTL("laneway:health:ep_a"); ttl != time.Hour {
		t.Fatalf("snapshot TTL %v, want 1h", ttl)
	}
	mr.FlushAll() // Redis holds no truth: a flush only blanks the view
	if got, err := r.Get(context.Background(), []string{"ep_a"}); err != nil || len(got) != 0 {
		t.Fatalf("after a flush: %+v, %v", got, err)
	}
}

func TestPublisherStopsCleanly(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	pub, err := NewPublisher(Config{Redis: rdb, Interval: time.Millisecond}, fixedSource{{EndpointID: "ep"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !mr.Exists("laneway:health:ep") {
		if time.Now().After(deadline) {
			t.Fatal("the publisher never wrote")
		}
		time.Sleep(time.Millisecond) // polling miniredis for the first write
	}
	testenv.Stop(t, pub.Stop)
}
