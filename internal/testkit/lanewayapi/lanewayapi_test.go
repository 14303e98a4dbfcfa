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

// Call sends JSON with the caller's headers, decodes the wanted status's
// answer and turns any other status into a StatusError quoting the body.
func TestCall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Idempotency-Key") != "k1" {
			http.Error(w, "headers", http.StatusBadRequest)
			return
		}
		if r.URL.Path == "/conflict" {
			http.Error(w, " taken ", http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ep_1"}`))
	}))
	defer srv.Close()
	ctx, header := context.Background(), http.Header{"Idempotency-Key": {"k1"}}
	var out struct{ ID string }
	if err := Call(ctx, srv.Client(), http.MethodPost, srv.URL+"/ok", []byte(`{}`), header, http.StatusCreated, &out); err != nil || out.ID != "ep_1" {
		t.Fatalf("Call = %v, %+v", err, out)
	}
	err := Call(ctx, srv.Client(), http.MethodPost, srv.URL+"/conflict", nil, header, http.StatusCreated, nil)
	if !IsStatus(err, http.StatusConflict) || IsStatus(err, http.StatusOK) || err.Error() != "409 Conflict: taken" {
		t.Fatalf("Call on a 409 = %v", err)
	}
	if IsStatus(errors.New("no answer"), 0) {
		t.Fatal("IsStatus holds for an error without an answer")
	}
}

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
