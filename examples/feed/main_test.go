package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const token = "lwf_example-test"

// fakeLaneway serves ep_1's feed: two events, then reads that wait until
// the client gives up, each reported on waiting.
type fakeLaneway struct {
	waiting chan struct{}
	mu      sync.Mutex
	acked   []string
	authOK  bool
}

func (f *fakeLaneway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.authOK = r.Header.Get("Authorization") == "Bearer "+token
	f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/feed/ep_1/ack":
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.acked = append(f.acked, string(body))
		f.mu.Unlock()
		_, _ = w.Write([]byte(`{"acked_cursor":"cur_2"}`))
	case r.URL.Path != "/v1/feed/ep_1":
		http.NotFound(w, r)
	case r.URL.Query().Get("cursor") == "":
		_, _ = w.Write([]byte(`{"events":[
			{"sequence":1,"id":"evt_1","type":"order.created","timestamp":"2026-12-02T01:02:03Z","entity":{"id":"order:7","revision":1},"data":{"status":"new"}},
			{"sequence":3,"id":"evt_3","type":"order.updated","timestamp":"2026-12-02T01:02:04Z","entity":{"id":"order:7","revision":3}}
		],"next_cursor":"cur_2"}`))
	default:
		f.waiting <- struct{}{}
		<-r.Context().Done()
	}
}

func TestRunPrintsTheFeedAndStopsCleanly(t *testing.T) {
	fake := &fakeLaneway{waiting: make(chan struct{}, 1)}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	env := map[string]string{apiEnv: srv.URL, tokenEnv: token}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"ep_1"}, func(k string) string { return env[k] }, &stdout, &stderr) }()
	select {
	case <-fake.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the consumer never came back for more")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run = %v, want a clean stop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not stop")
	}
	want := "1 evt_1 order.created entity=order:7 revision=1 occurred=2026-12-02T01:02:03Z data={\"status\":\"new\"}\n" +
		"3 evt_3 order.updated entity=order:7 revision=3 occurred=2026-12-02T01:02:04Z data=\n"
	if stdout.String() != want {
		t.Fatalf("printed %q, want %q", stdout.String(), want)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.acked) != 1 || fake.acked[0] != `{"cursor":"cur_2"}` || !fake.authOK {
		t.Fatalf("acks %q, token sent %v; want one ack of cur_2 with the token", fake.acked, fake.authOK)
	}
	if !strings.Contains(stderr.String(), "stopped at cursor cur_2") {
		t.Fatalf("stderr %q does not give the cursor", stderr.String())
	}
}

func TestRunRefusesMissingArguments(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no endpoint", nil, map[string]string{tokenEnv: token}, "usage"},
		{"no token", []string{"ep_1"}, nil, tokenEnv},
		{"admin token", []string{"ep_1"}, map[string]string{tokenEnv: "admin-token"}, "not a feed consumer token"},
	}
	for _, tt := range tests {
		err := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want one naming %q", tt.name, err, tt.want)
		}
	}
}
