package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/ops/notify"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestDisabledEndpointIsRedrivenInOrder lets an endpoint fail past a short
// disable threshold: the engine disables it, tells the operator webhook,
// and moves every pending and parked delivery to dead letters with reason
// endpoint_disabled. After the receiver recovers, the endpoint is
// re-enabled and redriven: every event arrives, each entity in order.
func TestDisabledEndpointIsRedrivenInOrder(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		operator := newOperatorReceiver(t)
		f, a, api := scenario(t, b, func(c *app.Config) {
			c.Breaker = breaker.Config{Threshold: 3, FirstPause: 200 * time.Millisecond, MaxPause: 400 * time.Millisecond}
			c.Retry = deliver.RetryPolicy{Base: 20 * time.Millisecond, Min: 20 * time.Millisecond, Max: 50 * time.Millisecond,
				MaxAttempts: 100_000, MaxAge: time.Hour}
			c.DisableAfter = 1500 * time.Millisecond
			c.ParkAfter = 300 * time.Millisecond // the backlog parks before the disable
			// The secret by file, as a deployment keeps it out of the
			// environment (LANEWAY_OPERATOR_WEBHOOK_SECRET_FILE): the
			// notifications verify against it.
			c.OperatorWebhookURL, c.OperatorWebhookSecretFile = operator.url, operator.secretFile(t)
		})
		ep := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(1), "max_concurrency": 2})
		var healthy atomic.Bool
		recv, _ := f.Add(1, ep.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
			if !healthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		const n, entities = 300, 10
		var values [][]byte
		for i := range n {
			values = append(values, envelope(fmt.Sprintf("d-%d", i), "acme", fmt.Sprintf("order:%d", i%entities), int64(i/entities+1)))
		}
		publishTo(t, a.Brokers(), a.Topics().Events, values)

		waitForEndpointStatus(t, a, ep.ID, endpoint.StatusDisabled)
		note := operator.await(t)
		if note.EndpointID != ep.ID || note.Tenant != "acme" {
			t.Fatalf("operator notification %+v", note)
		}
		dead := waitDeadLetters(t, api, ep.ID, n)
		for _, l := range dead {
			if l.Reason != event.ReasonEndpointDisabled {
				t.Fatalf("dead letter %s has reason %q, want %s", l.ID, l.Reason, event.ReasonEndpointDisabled)
			}
		}
		if got := len(recv.Receipts()); got != 0 {
			t.Fatalf("%d deliveries succeeded while the receiver failed", got)
		}

		// While disabled, a redrive is refused: it would only die again.
		if code, out := api.do("POST", "/v1/dead/redrive", map[string]any{"endpoint_id": ep.ID}); code != http.StatusConflict {
			t.Fatalf("redrive of a disabled endpoint: %d %s", code, out)
		}
		healthy.Store(true)
		if code, out := api.do("PATCH", "/v1/endpoints/"+ep.ID, map[string]any{"status": "active"}); code != http.StatusOK {
			t.Fatalf("re-enable: %d %s", code, out)
		}
		job := startRedrive(t, api, ep.ID)
		done := waitRedrive(t, api, job.ID)
		if done.Status != jobs.StatusDone || done.Redriven != n {
			t.Fatalf("redrive ended %+v, want %d redriven", done, n)
		}
		waitUntil(t, f, time.Minute, "every redriven event", func() bool { return distinctIDs(recv.Receipts()) >= n })
		checkOrder(t, ep.ID, recv.Receipts())
		// The same request again is the same job: nothing is sent twice.
		if again := startRedrive(t, api, ep.ID); again.ID != job.ID {
			t.Fatalf("repeated redrive started job %s, want %s", again.ID, job.ID)
		}
	})
}

// operatorReceiver is the operators' webhook: a fleet endpoint, which
// verifies every notification with the official Standard Webhooks library.
type operatorReceiver struct {
	fleet       *fleet.Fleet
	ep          *fleet.Endpoint
	url, secret string
}

func newOperatorReceiver(t *testing.T) *operatorReceiver {
	t.Helper()
	f, err := fleet.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	o := &operatorReceiver{fleet: f, url: f.URL(0), secret: endpoint.NewSecret()}
	if o.ep, err = f.Add(0, o.secret, nil); err != nil {
		t.Fatal(err)
	}
	return o
}

// secretFile writes the operator secret to a file, with the newline an
// editor or `echo` leaves, and returns its path.
func (o *operatorReceiver) secretFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "operator-webhook-secret")
	if err := os.WriteFile(file, []byte(o.secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// await waits for the first notification; every one received must be a
// verified endpoint.disabled.
func (o *operatorReceiver) await(t *testing.T) notify.Disabled {
	t.Helper()
	waitUntil(t, o.fleet, 30*time.Second, "an operator notification", func() bool { return o.fleet.Total() > 0 })
	if bad := o.ep.BadSignatures(); bad != 0 {
		t.Errorf("%d operator notifications fail verification", bad)
	}
	var first notify.Disabled
	for i, r := range o.ep.Receipts() {
		var d notify.Disabled
		if r.Type != notify.TypeEndpointDisabled || json.Unmarshal(r.Data, &d) != nil {
			t.Errorf("unexpected operator notification %+v", r)
		}
		if i == 0 {
			first = d
		}
	}
	return first
}
