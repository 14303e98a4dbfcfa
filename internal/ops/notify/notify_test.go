package notify

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

func TestEndpointDisabledSendsASignedWebhookAfterRetries(t *testing.T) {
	secret := endpoint.NewSecret()
	verifier, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	got := make(chan Notification, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable) // the operator endpoint is flaky at first
			return
		}
		body, _ := io.ReadAll(r.Body)
		if err := verifier.Verify(body, r.Header); err != nil {
			t.Errorf("official library rejects the notification: %v", err)
		}
		var n Notification
		if err := json.Unmarshal(body, &n); err != nil {
			t.Error(err)
		}
		got <- n
	}))
	defer srv.Close()
	n, err := New(Config{URL: srv.URL, Secret: secret, InstanceID: "i-1", Backoff: time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer testenv.Stop(t, n.Stop) // before the server closes
	n.EndpointDisabled(endpoint.Endpoint{ID: "ep_1", Tenant: "acme", URL: "https://x.example/hook"}, "endpoint answered 410 Gone")
	select {
	case msg := <-got:
		var d Disabled
		if err := json.Unmarshal(msg.Data, &d); err != nil {
			t.Fatal(err)
		}
		if msg.Type != TypeEndpointDisabled || d.EndpointID != "ep_1" || d.Tenant != "acme" || d.Reason != "endpoint answered 410 Gone" || d.Instance != "i-1" {
			t.Fatalf("notification %+v / %+v", msg, d)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification after %d calls", calls.Load())
	}
	if c := calls.Load(); c != 3 {
		t.Errorf("%d calls, want 2 failures then 1 success", c)
	}
}

func TestNotifierNeedsAValidSecretWithAURL(t *testing.T) {
	if _, err := New(Config{URL: "http://127.0.0.1:1/", Secret: "nope"}); err == nil {
		t.Fatal("accepted an invalid secret")
	}
	n, err := New(Config{Logger: slog.New(slog.DiscardHandler)}) // log only
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	n.EndpointDisabled(endpoint.Endpoint{ID: "ep"}, "why")
	testenv.Stop(t, n.Stop)
	testenv.Stop(t, n.Stop) // twice is fine
	// After Stop it must not panic.
	n.EndpointDisabled(endpoint.Endpoint{ID: "ep"}, "after stop")
}
