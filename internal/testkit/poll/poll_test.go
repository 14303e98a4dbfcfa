package poll

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Until returns once cond holds, and ctx's error when ctx ends first.
func TestUntil(t *testing.T) {
	n := 0
	if err := Until(context.Background(), time.Millisecond, func() bool { n++; return n == 3 }); err != nil || n != 3 {
		t.Fatalf("Until = %v after %d calls", err, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := Until(ctx, time.Millisecond, func() bool { return false }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Until with a condition that never holds = %v", err)
	}
}
