package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func testSecret(b byte) string {
	return "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

// lockedBuffer is the example's stdout: written by the server's goroutines,
// read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// post sends body signed by the official library with secret, stamped now
// (the example checks against the real clock).
func post(t *testing.T, url, secret, msgID string, body []byte) int {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sig, err := wh.Sign(msgID, now, body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("webhook-id", msgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func TestHandlerPrintsVerifiedDeliveriesOnce(t *testing.T) {
	secret := testSecret(1)
	var out lockedBuffer
	h, err := newHandler([]string{secret}, &out, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	url := srv.URL + path
	body := []byte(`{"id":"evt_1","type":"order.updated","timestamp":"2026-11-30T10:00:00Z",` +
		`"data":{"status":"paid"},"entity":{"id":"order:123","revision":17}}`)

	steps := []struct {
		name   string
		secret string
		msgID  string
		body   []byte
		status int
	}{
		{"delivery", secret, "evt_1", body, 200},
		{"redelivery", secret, "evt_1", body, 200},
		{"wrong secret", testSecret(2), "evt_2", body, 401},
		{"stale revision", secret, "evt_3", bytes.Replace(body, []byte(`"revision":17`), []byte(`"revision":16`), 1), 200},
		{"not a delivery", secret, "evt_4", []byte(`{}`), 400},
	}
	for _, s := range steps {
		if got := post(t, url, s.secret, s.msgID, s.body); got != s.status {
			t.Fatalf("%s: status %d, want %d", s.name, got, s.status)
		}
	}
	want := "evt_1 order.updated entity=order:123 revision=17 occurred=2026-11-30T10:00:00Z data={\"status\":\"paid\"}\n"
	if got := out.String(); got != want {
		t.Fatalf("printed %q, want only the first delivery: %q", got, want)
	}
	if got := post(t, srv.URL+"/elsewhere", secret, "evt_5", body); got != http.StatusNotFound {
		t.Fatalf("another path: status %d, want 404", got)
	}
}

func TestParseOptions(t *testing.T) {
	env := func(v string) func(string) string {
		return func(name string) string {
			if name == secretEnv {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name    string
		args    []string
		env     string
		want    []string
		wantErr bool
	}{
		{"from env", nil, "whsec_a", []string{"whsec_a"}, false},
		{"flag wins", []string{"-secret", "whsec_b"}, "whsec_a", []string{"whsec_b"}, false},
		{"rotation", nil, "whsec_old, whsec_new", []string{"whsec_old", "whsec_new"}, false},
		{"none", nil, "", nil, true},
		{"only commas", []string{"-secret", ", ,"}, "", nil, true},
		{"unknown flag", []string{"-nope"}, "whsec_a", nil, true},
	}
	for _, tt := range tests {
		opts, err := parseOptions(tt.args, env(tt.env), io.Discard)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: err = %v, wantErr %v", tt.name, err, tt.wantErr)
			continue
		}
		if strings.Join(opts.secrets, "|") != strings.Join(tt.want, "|") {
			t.Errorf("%s: secrets %q, want %q", tt.name, opts.secrets, tt.want)
		}
	}
}

func TestRunRefusesAMalformedSecret(t *testing.T) {
	err := run([]string{"-secret", "whsec_!!", "-addr", "127.0.0.1:0"}, func(string) string { return "" }, io.Discard, io.Discard)
	if err == nil {
		t.Fatal("run accepted a malformed secret")
	}
}

func TestServeStopsWhenContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, http.NotFoundHandler()) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve = %v, want a clean shutdown", err)
	}
}
