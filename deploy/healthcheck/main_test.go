package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
	}))
	defer srv.Close()
	if err := check(srv.URL+"/readyz", time.Second); err != nil {
		t.Fatalf("2xx: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := check(srv.URL+"/readyz", time.Second); err == nil {
		t.Fatal("503 passed the check")
	}
	srv.Close()
	if err := check(srv.URL+"/readyz", time.Second); err == nil {
		t.Fatal("a closed server passed the check")
	}
}
