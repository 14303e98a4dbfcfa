package valutil

import (
	"testing"
	"time"
)

func TestPositiveOr(t *testing.T) {
	for _, tc := range []struct{ v, def, want time.Duration }{
		{0, time.Second, time.Second},
		{-time.Millisecond, time.Second, time.Second},
		{time.Millisecond, time.Second, time.Millisecond},
	} {
		if got := PositiveOr(tc.v, tc.def); got != tc.want {
			t.Errorf("PositiveOr(%v, %v) = %v, want %v", tc.v, tc.def, got, tc.want)
		}
	}
	if got := PositiveOr(0.0, 0.5); got != 0.5 {
		t.Errorf("PositiveOr(0.0, 0.5) = %v, want 0.5", got)
	}
	if got := PositiveOr(3, 7); got != 3 {
		t.Errorf("PositiveOr(3, 7) = %v, want 3", got)
	}
}
