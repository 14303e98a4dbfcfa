package hooklog

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Wait finds an entry added before it was called, waits for one added
// later, and lets match count.
func TestWait(t *testing.T) {
	l := New[int]()
	l.Add(1)
	if got := l.Wait(t, time.Second, "1", func(e int) bool { return e == 1 }); got != 1 {
		t.Fatalf("Wait = %d, want the entry already there", got)
	}
	go func() {
		for e := 2; e <= 5; e++ {
			l.Add(e)
		}
	}()
	sum := 0
	if got := l.Wait(t, time.Minute, "a sum of 10", func(e int) bool { sum += e; return sum >= 10 }); got != 4 || sum != 10 {
		t.Fatalf("Wait = %d with sum %d, want 4 with 1+2+3+4", got, sum)
	}
	if n := len(l.All()); n < 4 {
		t.Fatalf("All has %d entries", n)
	}
}

// Wait fails the test once within passes, naming what it waited for and
// the latest entries.
func TestWaitFailsAfterWithin(t *testing.T) {
	l := New[int]()
	for e := range 30 {
		l.Add(e)
	}
	ft := &fakeT{TB: t}
	l.Wait(ft, 10*time.Millisecond, "a negative entry", func(e int) bool { return e < 0 })
	for _, want := range []string{"a negative entry", "30 entries, the last 20", "29"} {
		if !strings.Contains(ft.failed, want) {
			t.Errorf("failure %q lacks %q", ft.failed, want)
		}
	}
}

type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }
