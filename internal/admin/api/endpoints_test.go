package api

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/model/endpoint"
)

const validSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // base64 of 24 bytes

func TestCreateEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook","event_types":["order.created","order.updated"],"max_concurrency":8}`)
	wantStatus(t, r, http.StatusCreated)
	wantJSONContent(t, r)
	if loc := r.header.Get("Location"); loc != "/v1/endpoints/ep_1" {
		t.Fatalf("Location = %q", loc)
	}
	got := r.json(t)
	want := map[string]any{
		"id": "ep_1", "tenant": "acme", "url": "https://example.com/hook",
		"event_types": []any{"order.created", "order.updated"}, "max_concurrency": float64(8), "payload": "full", "mode": "push",
		"status": "active", "paused": false, "disabled_reason": "",
		"created_at": t0.Format(time.RFC3339), "updated_at": t0.Format(time.RFC3339),
		"secret": got["secret"],
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("response\n got %v\nwant %v", got, want)
	}
	secret, _ := got["secret"].(string)
	if err := endpoint.ValidateSecret(secret); err != nil {
		t.Fatalf("generated secret %q: %v", secret, err)
	}

	stored, ok := h.store.Get("ep_1")
	if !ok {
		t.Fatal("endpoint not stored")
	}
	if len(stored.Secrets) != 1 || stored.Secrets[0].Value != secret {
		t.Fatalf("stored secrets = %+v, want the returned one", stored.Secrets)
	}
	if !stored.CreatedAt.Equal(t0) || !stored.UpdatedAt.Equal(t0) || stored.Status != endpoint.StatusActive {
		t.Fatalf("stored = %+v", stored)
	}
}

// payload: "thin" is kept and shown; anything else but "full" is a 400
// naming the field; PATCH switches it.
func TestEndpointPayloadMode(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook","payload":"thin"}`)
	wantStatus(t, r, http.StatusCreated)
	if got := r.json(t)["payload"]; got != "thin" {
		t.Fatalf("payload = %v, want thin", got)
	}
	if e, _ := h.store.Get("ep_1"); !e.Thin() {
		t.Fatalf("stored payload %q, want thin", e.Payload)
	}
	r = h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook","payload":"skinny"}`)
	wantStatus(t, r, http.StatusBadRequest)
	if body := string(r.body); !strings.Contains(body, "payload") {
		t.Fatalf("a bad payload mode got %s, want a reason naming payload", body)
	}
	r = h.do("PATCH", "/v1/endpoints/ep_1", `{"payload":"full"}`)
	wantStatus(t, r, http.StatusOK)
	if e, _ := h.store.Get("ep_1"); e.Thin() {
		t.Fatal("PATCH payload full left the endpoint thin")
	}
}

func TestCreateEndpointDefaultsAndGivenSecret(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"http://example.com/hook","secret":"`+validSecret+`"}`)
	wantStatus(t, r, http.StatusCreated)
	got := r.json(t)
	if got["secret"] != validSecret {
		t.Fatalf("secret = %v, want the given one", got["secret"])
	}
	if got["max_concurrency"] != float64(endpoint.DefaultMaxConcurrency) {
		t.Fatalf("max_concurrency = %v, want the default", got["max_concurrency"])
	}
	if types, ok := got["event_types"].([]any); !ok || len(types) != 0 {
		t.Fatalf("event_types = %#v, want []", got["event_types"])
	}
}

func TestSecretIsShownOnlyOnCreate(t *testing.T) {
	h := newHarness(t, nil)
	created := h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook","secret":"`+validSecret+`"}`)
	wantStatus(t, created, http.StatusCreated)
	for _, r := range []response{
		h.do("GET", "/v1/endpoints/ep_1", ""),
		h.do("GET", "/v1/endpoints", ""),
		h.do("PATCH", "/v1/endpoints/ep_1", `{"max_concurrency":2}`),
	} {
		wantStatus(t, r, http.StatusOK)
		if strings.Contains(string(r.body), validSecret) || strings.Contains(string(r.body), "secret") {
			t.Fatalf("secret shown after create: %s", r.body)
		}
	}
}

func TestGetEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	wantStatus(t, h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook"}`), http.StatusCreated)
	r := h.do("GET", "/v1/endpoints/ep_1", "")
	wantStatus(t, r, http.StatusOK)
	got := r.json(t)
	if got["id"] != "ep_1" || got["url"] != "https://example.com/hook" || got["status"] != "active" {
		t.Fatalf("got %v", got)
	}

	r = h.do("GET", "/v1/endpoints/ep_missing", "")
	wantStatus(t, r, http.StatusNotFound)
	if got := r.json(t)["error"]; got != "endpoint not found" {
		t.Fatalf("error = %v", got)
	}
}

func TestListEndpoints(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("GET", "/v1/endpoints", "")
	wantStatus(t, r, http.StatusOK)
	if string(r.body) != "{\"data\":[]}\n" {
		t.Fatalf("empty list = %q, want data: []", r.body)
	}
	for _, tenant := range []string{"acme", "globex", "acme"} {
		wantStatus(t, h.do("POST", "/v1/endpoints", `{"tenant":"`+tenant+`","url":"https://example.com/hook"}`), http.StatusCreated)
	}
	ids := func(r response) []string {
		var body struct{ Data []wire.Endpoint }
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range body.Data {
			if e.Secret != "" {
				t.Fatalf("list shows a secret for %s", e.ID)
			}
			out = append(out, e.ID)
		}
		return out
	}
	if got := ids(h.do("GET", "/v1/endpoints", "")); !reflect.DeepEqual(got, []string{"ep_1", "ep_2", "ep_3"}) {
		t.Fatalf("all = %v", got)
	}
	if got := ids(h.do("GET", "/v1/endpoints?tenant=acme", "")); !reflect.DeepEqual(got, []string{"ep_1", "ep_3"}) {
		t.Fatalf("acme = %v", got)
	}
	if got := ids(h.do("GET", "/v1/endpoints?tenant=nobody", "")); len(got) != 0 {
		t.Fatalf("nobody = %v", got)
	}
}

func TestCreateEndpointValidation(t *testing.T) {
	cases := []struct {
		name, body, field string
	}{
		{"bad url", `{"tenant":"acme","url":"://nope"}`, "url"},
		{"ftp scheme", `{"tenant":"acme","url":"ftp://example.com/x"}`, "url"},
		{"missing host", `{"tenant":"acme","url":"https:///path"}`, "url"},
		{"missing url", `{"tenant":"acme"}`, "url"},
		{"credentials in url", `{"tenant":"acme","url":"https://u:p@example.com/"}`, "url"},
		{"space in url", `{"tenant":"acme","url":"https://example.com/hook?q=a b"}`, "url"},
		{"non-ASCII in url", `{"tenant":"acme","url":"https://example.com/hook?q=é"}`, "url"},
		{"control character in url", `{"tenant":"acme","url":"https://example.com/hook?q=a\r\nX: 1"}`, "url"},
		{"brace in url", `{"tenant":"acme","url":"https://example.com/hook?q={a}"}`, "url"},
		{"missing tenant", `{"url":"https://example.com/"}`, "tenant"},
		{"max_concurrency 0", `{"tenant":"acme","url":"https://example.com/","max_concurrency":0}`, "max_concurrency"},
		{"max_concurrency 1001", `{"tenant":"acme","url":"https://example.com/","max_concurrency":1001}`, "max_concurrency"},
		{"max_concurrency not a number", `{"tenant":"acme","url":"https://example.com/","max_concurrency":"4"}`, "max_concurrency"},
		{"empty event type", `{"tenant":"acme","url":"https://example.com/","event_types":[""]}`, "event_types"},
		{"bad secret", `{"tenant":"acme","url":"https://example.com/","secret":"hunter2"}`, "secret"},
		{"empty secret", `{"tenant":"acme","url":"https://example.com/","secret":""}`, "secret"},
		{"short secret", `{"tenant":"acme","url":"https://example.com/","secret":"whsec_c2hvcnQ="}`, "secret"},
		{"unknown field", `{"tenant":"acme","url":"https://example.com/","max_concurency":2}`, "max_concurency"},
		{"status not settable", `{"tenant":"acme","url":"https://example.com/","status":"disabled"}`, "status"},
		{"trailing data", `{"tenant":"acme","url":"https://example.com/"}}`, "body"},
		{"array body", `[]`, "body"},
	}
	h := newHarness(t, nil)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/v1/endpoints", tc.body)
			wantStatus(t, r, http.StatusBadRequest)
			wantJSONContent(t, r)
			got := r.json(t)
			if got["field"] != tc.field {
				t.Fatalf("field = %v, want %s; body %s", got["field"], tc.field, r.body)
			}
			if msg, _ := got["error"].(string); !strings.Contains(msg, tc.field) {
				t.Fatalf("error %q does not mention %s", msg, tc.field)
			}
		})
	}
	if h.store.len() != 0 {
		t.Fatalf("%d invalid endpoints were stored", h.store.len())
	}
}

func TestCreateEndpointBadBodies(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxBodyBytes = 1024 })
	cases := []struct {
		name, body, contentType string
		status                  int
		errContains             string
	}{
		{"malformed JSON", `{"tenant":`, "application/json", 400, "malformed JSON"},
		{"not JSON at all", `tenant=acme`, "application/json", 400, "malformed JSON"},
		{"empty body", ``, "application/json", 400, "empty"},
		{"wrong content type", `{"tenant":"acme","url":"https://example.com/"}`, "text/plain", 415, "Content-Type"},
		{"too large", `{"tenant":"` + strings.Repeat("a", 2000) + `"}`, "application/json", 413, "larger than 1024 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/v1/endpoints", tc.body, "Content-Type", tc.contentType)
			wantStatus(t, r, tc.status)
			if msg, _ := r.json(t)["error"].(string); !strings.Contains(msg, tc.errContains) {
				t.Fatalf("error %q does not contain %q", msg, tc.errContains)
			}
		})
	}
	if h.store.len() != 0 {
		t.Fatal("a bad body was stored")
	}
}

func TestCreateEndpointStoreFailure(t *testing.T) {
	h := newHarness(t, nil)
	h.store.mu.Lock()
	h.store.putErr = errBroker
	h.store.mu.Unlock()
	r := h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/"}`)
	wantStatus(t, r, http.StatusServiceUnavailable)
	if msg, _ := r.json(t)["error"].(string); !strings.Contains(msg, errBroker.Error()) {
		t.Fatalf("error %q lacks the cause", msg)
	}
}

// createEndpoint makes ep_1 and returns it as stored.
func createEndpoint(t *testing.T, h *harness) endpoint.Endpoint {
	t.Helper()
	wantStatus(t, h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook","event_types":["a","b"]}`), http.StatusCreated)
	e, _ := h.store.Get("ep_1")
	return e
}

func TestPatchEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	before := createEndpoint(t, h)
	h.clock.advance(time.Minute)

	r := h.do("PATCH", "/v1/endpoints/ep_1", `{"url":"https://example.org/new","max_concurrency":16}`)
	wantStatus(t, r, http.StatusOK)
	got := r.json(t)
	if got["url"] != "https://example.org/new" || got["max_concurrency"] != float64(16) {
		t.Fatalf("response %v", got)
	}
	if got["updated_at"] != t0.Add(time.Minute).Format(time.RFC3339) || got["created_at"] != t0.Format(time.RFC3339) {
		t.Fatalf("timestamps %v / %v", got["created_at"], got["updated_at"])
	}
	after, _ := h.store.Get("ep_1")
	if after.URL != "https://example.org/new" || after.MaxConcurrency != 16 {
		t.Fatalf("stored %+v", after)
	}
	if !reflect.DeepEqual(after.EventTypes, before.EventTypes) || !reflect.DeepEqual(after.Secrets, before.Secrets) || after.Tenant != "acme" {
		t.Fatalf("absent fields changed: before %+v after %+v", before, after)
	}
}

func TestPatchEventTypes(t *testing.T) {
	h := newHarness(t, nil)
	createEndpoint(t, h)
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{"max_concurrency":3}`, []string{"a", "b"}}, // absent: unchanged
		{`{"event_types":["c"]}`, []string{"c"}},
		{`{"event_types":null}`, nil}, // null: every type
		{`{"event_types":["d"]}`, []string{"d"}},
		{`{"event_types":[]}`, []string{}},
	} {
		wantStatus(t, h.do("PATCH", "/v1/endpoints/ep_1", tc.body), http.StatusOK)
		e, _ := h.store.Get("ep_1")
		if !reflect.DeepEqual(e.EventTypes, tc.want) {
			t.Fatalf("after %s: event_types = %#v, want %#v", tc.body, e.EventTypes, tc.want)
		}
	}
}

func TestPatchStatus(t *testing.T) {
	h := newHarness(t, nil)
	e := createEndpoint(t, h)
	e.Status, e.DisabledReason = endpoint.StatusDisabled, "failing for 5 days"
	if err := h.store.Put(context.Background(), e); err != nil {
		t.Fatal(err)
	}

	r := h.do("PATCH", "/v1/endpoints/ep_1", `{"status":"active"}`)
	wantStatus(t, r, http.StatusOK)
	if got := r.json(t); got["status"] != "active" || got["disabled_reason"] != "" {
		t.Fatalf("response %v", got)
	}
	if e, _ := h.store.Get("ep_1"); e.Status != endpoint.StatusActive || e.DisabledReason != "" {
		t.Fatalf("stored %+v", e)
	}

	wantStatus(t, h.do("PATCH", "/v1/endpoints/ep_1", `{"status":"disabled"}`), http.StatusOK)
	if e, _ := h.store.Get("ep_1"); e.Status != endpoint.StatusDisabled {
		t.Fatalf("stored status %q", e.Status)
	}
}

func TestPatchEndpointValidation(t *testing.T) {
	h := newHarness(t, nil)
	before := createEndpoint(t, h)
	for _, tc := range []struct{ name, body, field string }{
		{"tenant change", `{"tenant":"globex"}`, "tenant"},
		{"tenant null", `{"tenant":null}`, "tenant"},
		{"url null", `{"url":null}`, "url"},
		{"ftp url", `{"url":"ftp://example.com/"}`, "url"},
		{"space in url", `{"url":"https://example.com/in box"}`, "url"},
		{"non-ASCII in url", `{"url":"https://example.com/é"}`, "url"},
		{"max_concurrency null", `{"max_concurrency":null}`, "max_concurrency"},
		{"max_concurrency 0", `{"max_concurrency":0}`, "max_concurrency"},
		{"max_concurrency 1001", `{"max_concurrency":1001}`, "max_concurrency"},
		{"max_concurrency string", `{"max_concurrency":"2"}`, "max_concurrency"},
		{"bad status", `{"status":"paused"}`, "status"},
		{"status null", `{"status":null}`, "status"},
		{"secret not patchable", `{"secret":"` + validSecret + `"}`, "secret"},
		{"event_types not an array", `{"event_types":"a"}`, "event_types"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("PATCH", "/v1/endpoints/ep_1", tc.body)
			wantStatus(t, r, http.StatusBadRequest)
			got := r.json(t)
			if got["field"] != tc.field {
				t.Fatalf("field = %v, want %s; body %s", got["field"], tc.field, r.body)
			}
			if msg, _ := got["error"].(string); !strings.Contains(msg, tc.field) {
				t.Fatalf("error %q does not mention %s", msg, tc.field)
			}
		})
	}
	if after, _ := h.store.Get("ep_1"); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused patch changed the endpoint:\nbefore %+v\nafter  %+v", before, after)
	}
	// Restating the tenant is not a change.
	wantStatus(t, h.do("PATCH", "/v1/endpoints/ep_1", `{"tenant":"acme"}`), http.StatusOK)
}

func TestPatchMissingEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("PATCH", "/v1/endpoints/ep_nope", `{"max_concurrency":2}`)
	wantStatus(t, r, http.StatusNotFound)
	if h.store.len() != 0 {
		t.Fatal("patch created an endpoint")
	}
}

func TestDeleteEndpoint(t *testing.T) {
	h := newHarness(t, nil)
	createEndpoint(t, h)
	r := h.do("DELETE", "/v1/endpoints/ep_1", "")
	wantStatus(t, r, http.StatusNoContent)
	if len(r.body) != 0 {
		t.Fatalf("204 with a body: %q", r.body)
	}
	if _, ok := h.store.Get("ep_1"); ok {
		t.Fatal("endpoint still stored")
	}
	wantStatus(t, h.do("GET", "/v1/endpoints/ep_1", ""), http.StatusNotFound)
	r = h.do("DELETE", "/v1/endpoints/ep_1", "")
	wantStatus(t, r, http.StatusNotFound)
	if got := r.json(t)["error"]; got != "endpoint not found" {
		t.Fatalf("error = %v", got)
	}
}

func TestPauseAndResume(t *testing.T) {
	h := newHarness(t, nil)
	e := createEndpoint(t, h)
	for _, step := range []struct {
		path string
		want bool
	}{{"/pause", true}, {"/pause", true}, {"/resume", false}} {
		r := h.do("POST", "/v1/endpoints/"+e.ID+step.path, "")
		wantStatus(t, r, http.StatusOK)
		if got, _ := h.store.Get(e.ID); got.Paused != step.want || r.json(t)["paused"] != step.want {
			t.Errorf("after %s: stored paused %v, response %v, want %v", step.path, got.Paused, r.json(t)["paused"], step.want)
		}
	}
	wantStatus(t, h.do("POST", "/v1/endpoints/ep_missing/pause", ""), http.StatusNotFound)
}

// batchFeeds records which feed topics the API creates and deletes.
type batchFeeds struct {
	specFeeds
	mu               sync.Mutex
	created, deleted []string
}

func (f *batchFeeds) Create(_ context.Context, e endpoint.Endpoint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, e.ID)
	return nil
}

func (f *batchFeeds) Delete(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, id)
	return nil
}

func (f *batchFeeds) calls() (created, deleted []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.created), slices.Clone(f.deleted)
}

// A batch endpoint shows its batch sizes in effect, the defaults filled
// in, and stores only the ones given; max_wait_ms 0 (do not wait) is kept
// as 1, since a stored 0 reads as the default. Its feed topic, which its
// deliveries pass through, is made before it is stored and deleted with
// it. Other endpoints show no batch.
func TestCreateBatchEndpoint(t *testing.T) {
	feeds := &batchFeeds{}
	h := newHarness(t, func(c *Config) { c.Feeds = feeds })
	batchOf := func(r response) any {
		t.Helper()
		wantStatus(t, r, http.StatusCreated)
		got := r.json(t)
		if got["mode"] != "batch" {
			t.Fatalf("mode = %v, want batch; body %s", got["mode"], r.body)
		}
		return got["batch"]
	}
	sizes := func(events, bytes, waitMS float64) map[string]any {
		return map[string]any{"max_events": events, "max_bytes": bytes, "max_wait_ms": waitMS}
	}

	got := batchOf(h.do("POST", "/v1/endpoints", `{"tenant":"acme","mode":"batch","url":"https://example.com/batches"}`))
	if want := sizes(100, 1<<20, 1000); !reflect.DeepEqual(got, want) {
		t.Fatalf("default batch = %v, want %v", got, want)
	}
	if e, _ := h.store.Get("ep_1"); !e.Batched() || e.Batch != nil || e.URL != "https://example.com/batches" {
		t.Fatalf("stored %+v, want a batch endpoint without sizes (the defaults)", e)
	}
	got = batchOf(h.do("POST", "/v1/endpoints", `{"tenant":"acme","mode":"batch","url":"https://example.com/b","batch":{"max_events":50,"max_bytes":2048,"max_wait_ms":0}}`))
	if want := sizes(50, 2048, 1); !reflect.DeepEqual(got, want) {
		t.Fatalf("given batch = %v, want %v", got, want)
	}
	if e, _ := h.store.Get("ep_2"); !reflect.DeepEqual(e.Batch, &endpoint.BatchConfig{MaxEvents: 50, MaxBytes: 2048, MaxWaitMS: 1}) {
		t.Fatalf("stored batch %+v", e.Batch)
	}
	got = batchOf(h.do("POST", "/v1/endpoints", `{"tenant":"acme","mode":"batch","url":"https://example.com/b","batch":{"max_wait_ms":250}}`))
	if want := sizes(100, 1<<20, 250); !reflect.DeepEqual(got, want) {
		t.Fatalf("partial batch = %v, want %v", got, want)
	}
	wantStatus(t, h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/push"}`), http.StatusCreated)

	r := h.do("GET", "/v1/endpoints/ep_2", "")
	wantStatus(t, r, http.StatusOK)
	if got := r.json(t)["batch"]; !reflect.DeepEqual(got, sizes(50, 2048, 1)) {
		t.Fatalf("GET batch = %v", got)
	}
	var list struct{ Data []map[string]any }
	if err := json.Unmarshal(h.do("GET", "/v1/endpoints", "").body, &list); err != nil || len(list.Data) != 4 {
		t.Fatalf("list %+v: %v", list, err)
	}
	for _, e := range list.Data {
		if _, has := e["batch"]; has != (e["mode"] == "batch") {
			t.Errorf("%v (mode %v) shows batch %v", e["id"], e["mode"], e["batch"])
		}
	}

	wantStatus(t, h.do("DELETE", "/v1/endpoints/ep_1", ""), http.StatusNoContent)
	wantStatus(t, h.do("DELETE", "/v1/endpoints/ep_4", ""), http.StatusNoContent)
	created, deleted := feeds.calls()
	// A deleted batch endpoint's feed is left to its runner, which turns
	// what it holds into dead letters before it deletes it.
	if !slices.Equal(created, []string{"ep_1", "ep_2", "ep_3"}) || len(deleted) != 0 {
		t.Fatalf("feeds created %v and deleted %v, want the batch endpoints' made and none deleted", created, deleted)
	}

	// Without feeds an instance cannot make the topic, so it refuses.
	bare := newHarness(t, nil)
	wantStatus(t, bare.do("POST", "/v1/endpoints", `{"tenant":"acme","mode":"batch","url":"https://example.com/b"}`), http.StatusNotImplemented)
	if bare.store.len() != 0 {
		t.Fatal("a batch endpoint without a feed was stored")
	}
}

// wantRefused checks a 400 whose error names field, first and in field.
func wantRefused(t *testing.T, r response, field string) {
	t.Helper()
	wantStatus(t, r, http.StatusBadRequest)
	got := r.json(t)
	if got["field"] != field {
		t.Fatalf("field = %v, want %s; body %s", got["field"], field, r.body)
	}
	if msg, _ := got["error"].(string); !strings.HasPrefix(msg, field+": ") {
		t.Fatalf("error %q does not start with %s", msg, field)
	}
}

func TestCreateBatchEndpointValidation(t *testing.T) {
	const target = `"tenant":"acme","mode":"batch","url":"https://example.com/b"`
	cases := []struct {
		name, body, field string
	}{
		{"max_events 0", `{` + target + `,"batch":{"max_events":0}}`, "batch.max_events"},
		{"max_events -1", `{` + target + `,"batch":{"max_events":-1}}`, "batch.max_events"},
		{"max_events 1001", `{` + target + `,"batch":{"max_events":1001}}`, "batch.max_events"},
		{"max_events a string", `{` + target + `,"batch":{"max_events":"5"}}`, "batch.max_events"},
		{"max_events a fraction", `{` + target + `,"batch":{"max_events":1.5}}`, "batch.max_events"},
		{"max_bytes 0", `{` + target + `,"batch":{"max_bytes":0}}`, "batch.max_bytes"},
		{"max_bytes 1023", `{` + target + `,"batch":{"max_bytes":1023}}`, "batch.max_bytes"},
		{"max_bytes 16 MiB + 1", `{` + target + `,"batch":{"max_bytes":16777217}}`, "batch.max_bytes"},
		{"max_wait_ms -1", `{` + target + `,"batch":{"max_wait_ms":-1}}`, "batch.max_wait_ms"},
		{"max_wait_ms 60001", `{` + target + `,"batch":{"max_wait_ms":60001}}`, "batch.max_wait_ms"},
		{"unknown batch field", `{` + target + `,"batch":{"max_event":5}}`, "batch.max_event"},
		{"batch not an object", `{` + target + `,"batch":5}`, "batch"},
		{"batch an array", `{` + target + `,"batch":[]}`, "batch"},
		{"batch on a push endpoint", `{"tenant":"acme","url":"https://example.com/b","batch":{"max_events":5}}`, "batch"},
		{"batch on a pull endpoint", `{"tenant":"acme","mode":"pull","batch":{}}`, "batch"},
		{"batch without url", `{"tenant":"acme","mode":"batch"}`, "url"},
		{"unknown mode", `{"tenant":"acme","mode":"stream","url":"https://example.com/b"}`, "mode"},
	}
	feeds := &batchFeeds{}
	h := newHarness(t, func(c *Config) { c.Feeds = feeds })
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, h.do("POST", "/v1/endpoints", tc.body), tc.field) })
	}
	if created, _ := feeds.calls(); h.store.len() != 0 || len(created) != 0 {
		t.Fatalf("%d invalid endpoints stored, feeds %v created", h.store.len(), created)
	}
}

// PATCH batch changes the sizes given and keeps the others; it is refused
// for other modes, as null, and with a size out of range, and a refused
// patch leaves the stored endpoint as it was.
func TestPatchBatchEndpoint(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.Feeds = &batchFeeds{} })
	wantStatus(t, h.do("POST", "/v1/endpoints", `{"tenant":"acme","mode":"batch","url":"https://example.com/b","batch":{"max_events":50}}`), http.StatusCreated)
	wantStatus(t, h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/push"}`), http.StatusCreated)
	h.clock.advance(time.Minute)

	for _, tc := range []struct {
		body  string
		want  endpoint.BatchConfig
		shown map[string]any
	}{
		{`{"batch":{"max_wait_ms":250}}`, endpoint.BatchConfig{MaxEvents: 50, MaxWaitMS: 250},
			map[string]any{"max_events": float64(50), "max_bytes": float64(1 << 20), "max_wait_ms": float64(250)}},
		{`{"batch":{"max_bytes":4096,"max_events":1000},"max_concurrency":2}`, endpoint.BatchConfig{MaxEvents: 1000, MaxBytes: 4096, MaxWaitMS: 250},
			map[string]any{"max_events": float64(1000), "max_bytes": float64(4096), "max_wait_ms": float64(250)}},
		{`{"batch":{}}`, endpoint.BatchConfig{MaxEvents: 1000, MaxBytes: 4096, MaxWaitMS: 250},
			map[string]any{"max_events": float64(1000), "max_bytes": float64(4096), "max_wait_ms": float64(250)}},
		{`{"batch":{"max_wait_ms":0}}`, endpoint.BatchConfig{MaxEvents: 1000, MaxBytes: 4096, MaxWaitMS: 1},
			map[string]any{"max_events": float64(1000), "max_bytes": float64(4096), "max_wait_ms": float64(1)}},
	} {
		r := h.do("PATCH", "/v1/endpoints/ep_1", tc.body)
		wantStatus(t, r, http.StatusOK)
		got := r.json(t)
		if !reflect.DeepEqual(got["batch"], tc.shown) || got["updated_at"] != t0.Add(time.Minute).Format(time.RFC3339) {
			t.Fatalf("after %s: batch %v updated_at %v, want %v", tc.body, got["batch"], got["updated_at"], tc.shown)
		}
		if e, _ := h.store.Get("ep_1"); e.Batch == nil || *e.Batch != tc.want {
			t.Fatalf("after %s: stored %+v, want %+v", tc.body, e.Batch, tc.want)
		}
	}
	if e, _ := h.store.Get("ep_1"); e.MaxConcurrency != 2 {
		t.Fatalf("max_concurrency beside batch = %d, want 2", e.MaxConcurrency)
	}

	before, _ := h.store.Get("ep_1")
	beforeBatch := *before.Batch // before.Batch is the store's own
	push, _ := h.store.Get("ep_2")
	for _, tc := range []struct{ name, id, body, field string }{
		{"null", "ep_1", `{"batch":null}`, "batch"},
		{"max_events 0", "ep_1", `{"batch":{"max_events":0}}`, "batch.max_events"},
		{"max_events 2000", "ep_1", `{"batch":{"max_events":2000}}`, "batch.max_events"},
		{"max_bytes 10", "ep_1", `{"batch":{"max_bytes":10}}`, "batch.max_bytes"},
		{"max_wait_ms 1 minute + 1", "ep_1", `{"batch":{"max_wait_ms":60001}}`, "batch.max_wait_ms"},
		{"unknown batch field", "ep_1", `{"batch":{"maxEvents":5}}`, "batch.maxEvents"},
		{"batch not an object", "ep_1", `{"batch":"big"}`, "batch"},
		{"good batch, bad url", "ep_1", `{"batch":{"max_events":5},"url":"ftp://example.com/"}`, "url"},
		{"mode", "ep_1", `{"mode":"push"}`, "mode"},
		{"batch on a push endpoint", "ep_2", `{"batch":{"max_events":5}}`, "batch"},
		{"empty batch on a push endpoint", "ep_2", `{"batch":{}}`, "batch"},
		{"mode batch on a push endpoint", "ep_2", `{"mode":"batch"}`, "mode"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantRefused(t, h.do("PATCH", "/v1/endpoints/"+tc.id, tc.body), tc.field) })
	}
	if after, _ := h.store.Get("ep_1"); !reflect.DeepEqual(after, before) || *after.Batch != beforeBatch {
		t.Fatalf("a refused patch changed the batch endpoint:\nbefore %+v %+v\nafter  %+v %+v", before, beforeBatch, after, *after.Batch)
	}
	if after, _ := h.store.Get("ep_2"); !reflect.DeepEqual(after, push) {
		t.Fatalf("a refused patch changed the push endpoint: %+v", after)
	}
}
