package kafkatxn

import (
	"os"
	"testing"
)

func TestDefaultInstanceIDIsTheHostname(t *testing.T) {
	want := "laneway"
	if host, err := os.Hostname(); err == nil && host != "" {
		want = host
	}
	if got := DefaultInstanceID(); got != want {
		t.Fatalf("DefaultInstanceID() = %q, want %q", got, want)
	}
}
