package lanewayapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// WaitReady returns once /readyz answers 200, and ErrExited when the
// process is gone first.
func TestWaitReady(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := calls.Add(1); r.URL.Path != "/readyz" || n < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	if err := WaitReady(context.Background(), addr, nil); err != nil || calls.Load() != 3 {
		t.Fatalf("WaitReady = %v after %d calls", err, calls.Load())
	}
	exited := make(chan struct{})
	close(exited)
	if err := WaitReady(context.Background(), addr, exited); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitReady of an exited process = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := WaitReady(ctx, "127.0.0.1:1", nil); err == nil || !strings.HasPrefix(err.Error(), "not ready: ") {
		t.Fatalf("WaitReady with an ended context = %v", err)
	}
}
