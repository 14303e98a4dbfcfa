package receiver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/receiver"
)

// testSecret returns a valid secret whose 32-byte key is filled with b.
func testSecret(b byte) string {
	return "whsec_" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

// clock is a settable clock, so that timestamps and TTLs are tested
// exactly and without sleeping.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// payload renders the body Laneway sends for an event, with Laneway's own
// code, so that these tests follow the delivery contract if it changes.
func payload(t testing.TB, id, entity string, revision int64) []byte {
	t.Helper()
	d := event.Delivery{
		EventID: id, EndpointID: "ep_1", Tenant: "acme", Type: "order.updated",
		Entity: entity, Revision: revision, Coalesce: true,
		OccurredAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC),
		Data:       json.RawMessage(`{"status":"paid","note":"café ✓"}`),
	}
	body, err := d.Body()
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// officialSignature signs with the official Standard Webhooks library.
func officialSignature(t testing.TB, secret, msgID string, ts time.Time, body []byte) string {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := wh.Sign(msgID, ts, body)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// signedHeaders returns the webhook headers of body, with one signature per
// secret made by the official library, as Laneway sends during a rotation.
func signedHeaders(t testing.TB, msgID string, ts time.Time, body []byte, secrets ...string) http.Header {
	t.Helper()
	sigs := make([]string, len(secrets))
	for i, s := range secrets {
		sigs[i] = officialSignature(t, s, msgID, ts, body)
	}
	h := http.Header{}
	h.Set(receiver.HeaderID, msgID)
	h.Set(receiver.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(receiver.HeaderSignature, strings.Join(sigs, " "))
	return h
}

// request builds a POST of body carrying h.
func request(h http.Header, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
	for k, v := range h {
		r.Header[k] = v
	}
	r.Header.Set("Content-Type", "application/json")
	return r
}

// signedRequest is a POST of the delivery (id, entity, revision) signed
// with secret at ts.
func signedRequest(t testing.TB, secret, id, entity string, revision int64, ts time.Time) *http.Request {
	t.Helper()
	body := payload(t, id, entity, revision)
	return request(signedHeaders(t, id, ts, body, secret), body)
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// recorder is an application that records what it was given and answers
// with the error its fail func returns (nil fail: success).
type recorder struct {
	mu    sync.Mutex
	got   []receiver.Delivery
	fail  func(receiver.Delivery) error
	calls int
}

func (a *recorder) handle(_ context.Context, d receiver.Delivery) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls++
	if a.fail != nil {
		if err := a.fail(d); err != nil {
			return err
		}
	}
	a.got = append(a.got, d)
	return nil
}

func (a *recorder) callCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

func (a *recorder) ids() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]string, len(a.got))
	for i, d := range a.got {
		ids[i] = d.ID
	}
	return ids
}
