package timing

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if !Sleep(ctx, time.Millisecond) {
		t.Fatal("Sleep on a live ctx reported false")
	}
	if !Sleep(ctx, 0) || !Sleep(ctx, -time.Second) {
		t.Fatal("Sleep of nothing on a live ctx reported false")
	}
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on an ended ctx reported true")
	}
	for range 100 { // no race with a ready zero timer
		if Sleep(ctx, 0) {
			t.Fatal("Sleep(0) on an ended ctx reported true")
		}
	}
	if time.Since(start) > time.Second {
		t.Fatal("Sleep on an ended ctx waited")
	}
}

func TestSleepOrStop(t *testing.T) {
	stop := make(chan struct{})
	go func() { time.Sleep(10 * time.Millisecond); close(stop) }()
	if SleepOr(context.Background(), stop, time.Hour) {
		t.Fatal("SleepOr reported true after stop closed")
	}
	if SleepOr(context.Background(), stop, 0) {
		t.Fatal("SleepOr(0) reported true with stop closed")
	}
}

func TestEvery(t *testing.T) {
	stop := make(chan struct{})
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(stop, time.Millisecond, func() {
			if calls.Add(1) == 3 {
				close(stop)
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not return after stop closed")
	}
	// a tick ready with the close may still win the select once
	if n := calls.Load(); n < 3 || n > 4 {
		t.Fatalf("fn ran %d times, want 3 (or 4)", n)
	}
}

func TestClockDefaultsToTimeNow(t *testing.T) {
	fixed := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	if got := Clock(func() time.Time { return fixed })(); !got.Equal(fixed) {
		t.Fatalf("an injected clock was replaced: got %v", got)
	}
	before := time.Now()
	if got := Clock(nil)(); got.Before(before) {
		t.Fatalf("the default clock reads %v, before %v", got, before)
	}
}
