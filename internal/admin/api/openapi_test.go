package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/kafka/logscan"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/modes/feed"
	"github.com/laneway/laneway/internal/ops/deadletter"
	"github.com/laneway/laneway/internal/ops/eventsearch"
	"github.com/laneway/laneway/internal/ops/health"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/ops/jobs/jobrecord"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
	"github.com/laneway/laneway/signing"
)

// The spec in internal/admin/api/openapi.json is hand-written. These tests keep it true:
// it must be a valid OpenAPI document; its paths and methods must be
// exactly the routes the server registers; and real requests and the
// server's real responses to them (happy and error paths, every documented
// status of every operation) must validate against it. The webhook it
// documents is checked against a delivery made by the real sender.

// loadOpenAPI loads and validates internal/admin/api/openapi.json with kin-openapi. With
// strict, every object schema that does not say otherwise is closed
// (additionalProperties: false) before validation, so that a field a handler
// returns but the spec does not document fails the contract tests. The
// published spec leaves them open so that clients tolerate new fields.
func loadOpenAPI(t *testing.T, strict bool) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPISpec)
	if err != nil {
		t.Fatalf("loading internal/admin/api/openapi.json: %v", err)
	}
	if strict {
		closeObjectSchemas(doc.Components.Schemas)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("internal/admin/api/openapi.json is not a valid OpenAPI document: %v", err)
	}
	return doc
}

func closeObjectSchemas(schemas openapi3.Schemas) {
	walkSchemas(schemas, func(_ string, s *openapi3.Schema) {
		if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
			s.AdditionalProperties.Has = openapi3.Ptr(false)
		}
	})
}

// walkSchemas calls fn once for every schema reachable from schemas, with
// a path to it.
func walkSchemas(schemas openapi3.Schemas, fn func(path string, s *openapi3.Schema)) {
	seen := map[*openapi3.Schema]bool{}
	var walk func(string, *openapi3.SchemaRef)
	walk = func(path string, ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		fn(path, s)
		for name, p := range s.Properties {
			walk(path+".properties."+name, p)
		}
		walk(path+".items", s.Items)
		for _, group := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
			for i, sub := range group {
				walk(path+".of["+strconv.Itoa(i)+"]", sub)
			}
		}
	}
	for name, ref := range schemas {
		walk(name, ref)
	}
}

func TestOpenAPISpecIsValid(t *testing.T) {
	doc := loadOpenAPI(t, false)
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi = %q, want 3.1.x (the webhook is documented in the 3.1 webhooks section)", doc.OpenAPI)
	}

	// Every operation has an id, a summary, a tag, and 401 when it needs the token.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.OperationID == "" || op.Summary == "" || len(op.Tags) == 0 {
				t.Errorf("%s: needs an operationId, a summary and a tag", name)
			}
			public := op.Security != nil && len(*op.Security) == 0
			if public == strings.HasPrefix(path, "/v1/") {
				t.Errorf("%s: public = %v; /v1/ routes and only they need the bearer token", name, public)
			}
			if !public && op.Responses.Status(http.StatusUnauthorized) == nil {
				t.Errorf("%s: needs the token but documents no 401", name)
			}
		}
	}
	if doc.Webhooks["event"] == nil || doc.Webhooks["event"].Post == nil {
		t.Error("the webhook delivery (webhooks.event.post) is not documented")
	}

	// kin-openapi checks the examples of media types and parameters; the
	// JSON Schema examples of the component schemas are checked here,
	// against the strict form so that they show no undocumented field.
	strict := loadOpenAPI(t, true)
	examples := 0
	walkSchemas(strict.Components.Schemas, func(path string, s *openapi3.Schema) {
		for i, example := range s.Examples {
			examples++
			if err := strict.ValidateSchemaJSON(s, example); err != nil {
				t.Errorf("components.schemas.%s.examples[%d]: %v", path, i, err)
			}
		}
	})
	if examples == 0 {
		t.Error("no schema examples found")
	}
}

// specRoutes is every route the server answers, as OpenAPI paths. It must
// equal the spec's operations; TestOpenAPICoversEveryRoute also checks it
// against the server itself and against the route patterns in the source.
var specRoutes = []string{
	"GET /healthz",
	"GET /readyz",
	"GET /metrics",
	"GET /openapi.json",
	"POST /v1/endpoints",
	"GET /v1/endpoints",
	"GET /v1/endpoints/{id}",
	"PATCH /v1/endpoints/{id}",
	"DELETE /v1/endpoints/{id}",
	"POST /v1/endpoints/{id}/pause",
	"POST /v1/endpoints/{id}/resume",
	"GET /v1/endpoints/{id}/secret",
	"POST /v1/endpoints/{id}/secret/rotate",
	"POST /v1/events",
	"GET /v1/events",
	"GET /v1/health",
	"GET /v1/dead",
	"POST /v1/dead/redrive",
	"GET /v1/redrives/{id}",
	"POST /v1/endpoints/{id}/feed-tokens",
	"GET /v1/endpoints/{id}/feed-tokens",
	"POST /v1/endpoints/{id}/feed-tokens/{token_id}/rotate",
	"DELETE /v1/endpoints/{id}/feed-tokens/{token_id}",
	"GET /v1/feed/{id}",
	"POST /v1/feed/{id}/ack",
}

// servedByInbound reports whether a spec path is served by the inbound
// package, mounted through Config.Routes: internal/inbound/openapi_test.go checks
// those operations against the inbound handlers, so the checks here leave
// them out.
func servedByInbound(path string) bool {
	return strings.HasPrefix(path, "/in/") || strings.HasPrefix(path, "/v1/inbound/")
}

// specOperations is the spec's operations served by this package.
func specOperations(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		if servedByInbound(path) {
			continue
		}
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// specRouteMiss reports whether the server answered as for a route it does not
// have (jsonMisses), rather than from a handler.
func specRouteMiss(r specResponse) bool {
	return r.status == http.StatusMethodNotAllowed ||
		(r.status == http.StatusNotFound && strings.TrimSpace(string(r.body)) == `{"error":"not found"}`)
}

func TestOpenAPICoversEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t, false)
	ops := specOperations(doc)
	table := slices.Sorted(slices.Values(specRoutes))
	if !slices.Equal(ops, table) {
		t.Errorf("spec operations and the server's routes differ:\nonly in the spec: %v\nonly in the server: %v",
			specMissing(ops, table), specMissing(table, ops))
	}

	// Each route is answered by a handler, not as a miss.
	h := specHarness(t, "ok")
	for _, route := range specRoutes {
		method, path, _ := strings.Cut(route, " ")
		path = strings.ReplaceAll(path, "{id}", "ep_1")
		if strings.HasPrefix(path, "/v1/redrives/") {
			path = "/v1/redrives/rd_done"
		}
		if r := h.send(specCall{method: method, path: path}); specRouteMiss(r) {
			t.Errorf("%s: the server has no such route (%d %s)", route, r.status, r.body)
		}
	}

	// The methods the server registers on each spec path (its 405 lists
	// them in Allow) are exactly the spec's.
	for path, item := range doc.Paths.Map() {
		if servedByInbound(path) {
			continue
		}
		r := h.send(specCall{method: "TRACE", path: strings.ReplaceAll(path, "{id}", "ep_1")})
		if r.status != http.StatusMethodNotAllowed {
			t.Errorf("TRACE %s: status %d, want 405 with Allow", path, r.status)
			continue
		}
		var allowed []string
		for m := range strings.SplitSeq(r.header.Get("Allow"), ",") {
			if m = strings.TrimSpace(m); m != "" && m != http.MethodHead {
				allowed = append(allowed, m)
			}
		}
		slices.Sort(allowed)
		documented := slices.Sorted(func(yield func(string) bool) {
			for m := range item.Operations() {
				if !yield(m) {
					return
				}
			}
		})
		if !slices.Equal(allowed, documented) {
			t.Errorf("%s: the server allows %v, the spec documents %v", path, allowed, documented)
		}
	}

	// Every route pattern written in the package's source is in the spec,
	// and every spec operation is in the source: a route added to routes()
	// without the spec fails here.
	var inSource []string
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	pattern := regexp.MustCompile(`^(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) (/\S*)$`)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(lit.Value); err == nil && pattern.MatchString(s) {
				inSource = append(inSource, s)
			}
			return true
		})
	}
	inSource = slices.Compact(slices.Sorted(slices.Values(inSource)))
	if !slices.Equal(inSource, ops) {
		t.Errorf("route patterns in internal/admin/api/*.go and spec operations differ:\nonly in the source: %v\nonly in the spec: %v",
			specMissing(inSource, ops), specMissing(ops, inSource))
	}
}

func specMissing(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

func TestOpenAPIRoute(t *testing.T) {
	r := OpenAPIRoute()
	if r.Pattern != "GET /openapi.json" || !r.Public {
		t.Fatalf("OpenAPIRoute() = %q public %v", r.Pattern, r.Public)
	}
	onDisk, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	h := specHarness(t, "ok")
	got := h.send(specCall{method: "GET", path: "/openapi.json", noAuth: true})
	wantStatus(t, response{status: got.status, body: got.body}, http.StatusOK)
	if !bytes.Equal(got.body, onDisk) {
		t.Error("GET /openapi.json does not serve internal/admin/api/openapi.json")
	}
	if ct := got.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if got.header.Get("Content-Length") != strconv.Itoa(len(onDisk)) {
		t.Errorf("Content-Length = %q, want %d", got.header.Get("Content-Length"), len(onDisk))
	}
	sum := sha256.Sum256(onDisk)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	if got.header.Get("ETag") != etag || got.header.Get("Cache-Control") != "no-cache" {
		t.Errorf("ETag %q, Cache-Control %q; want %s, no-cache", got.header.Get("ETag"), got.header.Get("Cache-Control"), etag)
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		r := h.send(specCall{method: "GET", path: "/openapi.json", noAuth: true, header: []string{"If-None-Match", inm}})
		if r.status != http.StatusNotModified || len(r.body) != 0 || r.header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d, %d bytes, ETag %q; want 304, empty, the ETag", inm, r.status, len(r.body), r.header.Get("ETag"))
		}
	}
	if r := h.send(specCall{method: "GET", path: "/openapi.json", noAuth: true, header: []string{"If-None-Match", `"stale"`}}); r.status != http.StatusOK {
		t.Errorf("stale If-None-Match: %d, want 200", r.status)
	}
	spec := OpenAPISpec()
	spec[0] = 'x'
	if openAPISpec[0] == 'x' {
		t.Error("OpenAPISpec returned the embedded bytes, not a copy")
	}
}

// --- fakes for the contract tests ----------------------------------------

// specStore is an EndpointStore whose writes can fail and whose reads can
// panic, for the 503 and 500 answers.
type specStore struct {
	*fakeStore
	failWrites bool
	panics     bool
}

func (s *specStore) Get(id string) (endpoint.Endpoint, bool) {
	if s.panics {
		panic("spec store: Get exploded")
	}
	return s.fakeStore.Get(id)
}

func (s *specStore) List() []endpoint.Endpoint {
	if s.panics {
		panic("spec store: List exploded")
	}
	return s.fakeStore.List()
}

func (s *specStore) Put(ctx context.Context, e endpoint.Endpoint) error {
	if s.failWrites {
		return errBroker
	}
	return s.fakeStore.Put(ctx, e)
}

func (s *specStore) Delete(ctx context.Context, id string) error {
	if s.failWrites {
		return errBroker
	}
	return s.fakeStore.Delete(ctx, id)
}

// specDead is a dead-letter finder and redriver with realistic pages and
// jobs: a letter with its delivery, an unreadable record, running, done and
// failed jobs.
type specDead struct {
	err    error
	panics bool
	mu     sync.Mutex
	jobs   map[string]deadletter.Job
}

func newSpecDead() *specDead {
	done := t0.Add(3 * time.Second)
	return &specDead{jobs: map[string]deadletter.Job{
		"rd_done": {
			Head: jobrecord.Head[deadletter.Request]{ID: "rd_done", Status: jobs.StatusDone, Request: deadletter.Request{EndpointID: "ep_1"},
				Until: t0, Scanned: 5120, Matched: 311},
			Redriven: 309, Skipped: 2, AlreadyRedriven: 0,
			Tail: jobrecord.Tail{StartedAt: t0, UpdatedAt: done, FinishedAt: &done, Cursor: "internal"}},
		"rd_failed": {
			Head: jobrecord.Head[deadletter.Request]{ID: "rd_failed", Status: jobs.StatusFailed, Request: deadletter.Request{IDs: []string{"ev1:ep_1"}},
				Until: t0, Scanned: 10},
			Tail: jobrecord.Tail{Error: "write redriven deliveries: broker unavailable", StartedAt: t0, UpdatedAt: t0}},
	}}
}

func (f *specDead) Find(_ context.Context, _ deadletter.Filter, cursor string, _ int) (deadletter.Page, error) {
	switch {
	case f.panics:
		panic("spec dead: Find exploded")
	case f.err != nil:
		return deadletter.Page{}, f.err
	case cursor == "bad":
		return deadletter.Page{}, logscan.ErrBadCursor
	}
	d := event.NewDelivery(event.Envelope{ID: "ev1", Type: "order.updated", Tenant: "acme", Entity: "order:123",
		Revision: 17, Coalesce: true, OccurredAt: t0, Data: json.RawMessage(`{"status":"paid"}`)}, "ep_1", t0)
	d.Attempts, d.NotBefore, d.LastError = 20, t0.Add(time.Hour), "503 Service Unavailable"
	page := deadletter.Page{Scanned: 42, Items: []deadletter.Letter{
		{DeadLetter: event.DeadLetter{ID: "ev1:ep_1", Reason: event.ReasonMaxAttempts, Detail: d.LastError,
			DeadAt: t0, EndpointID: "ep_1", Delivery: &d}, Partition: 2, Offset: 7},
		{DeadLetter: event.DeadLetter{ID: "laneway.events-1-99", Reason: event.ReasonInvalidEvent,
			Detail: "invalid event: entity is required", DeadAt: t0, Raw: []byte(`{"type":"x"}`),
			Source: "laneway.events/1/99"}, Partition: 0, Offset: 3},
	}}
	if cursor == "" {
		page.Next = "c2"
	}
	return page, nil
}

func (f *specDead) Submit(_ context.Context, req deadletter.Request, key string) (deadletter.Job, bool, error) {
	switch {
	case f.panics:
		panic("spec dead: Submit exploded")
	case f.err != nil:
		return deadletter.Job{}, false, f.err
	}
	if err := deadletter.Validate(req); err != nil {
		return deadletter.Job{}, false, err
	}
	id := "rd_key_" + key
	if key == "" {
		raw, _ := json.Marshal(req)
		sum := sha256.Sum256(raw)
		id = "rd_" + hex.EncodeToString(sum[:12])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if j, ok := f.jobs[id]; ok {
		if was, _ := json.Marshal(j.Request); key != "" && string(was) != mustJSON(req) {
			return deadletter.Job{}, false, jobs.ErrKeyReused // as jobs.Runner does
		}
		j.Scanned, j.Matched, j.Redriven = j.Scanned+100, j.Matched+3, j.Redriven+3
		f.jobs[id] = j
		return j, false, nil
	}
	j := deadletter.Job{
		Head: jobrecord.Head[deadletter.Request]{ID: id, Status: jobs.StatusRunning, Request: req, Until: t0},
		Tail: jobrecord.Tail{StartedAt: t0, UpdatedAt: t0, Cursor: "internal"},
	}
	f.jobs[id] = j
	return j, true, nil
}

func (f *specDead) Get(_ context.Context, id string) (deadletter.Job, bool, error) {
	switch {
	case f.panics:
		panic("spec dead: Get exploded")
	case f.err != nil:
		return deadletter.Job{}, false, f.err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[id]
	return j, ok, nil
}

type specEvents struct {
	err    error
	panics bool
}

func (f *specEvents) Find(_ context.Context, _ eventsearch.Filter, cursor string, _ int) (eventsearch.Page, error) {
	switch {
	case f.panics:
		panic("spec events: Find exploded")
	case f.err != nil:
		return eventsearch.Page{}, f.err
	case cursor == "bad":
		return eventsearch.Page{}, logscan.ErrBadCursor
	}
	page := eventsearch.Page{Scanned: 12, Items: []eventsearch.Event{
		{Envelope: event.Envelope{ID: "ev1", Type: "order.updated", Tenant: "acme", Entity: "order:123", Revision: 17,
			Coalesce: true, OccurredAt: t0, Data: json.RawMessage(`{"status":"paid"}`)}, AcceptedAt: t0.Add(time.Second), Partition: 3, Offset: 48213},
		{Envelope: event.Envelope{ID: "ev2", Type: "order.created", Tenant: "acme", Entity: "order:124", OccurredAt: t0},
			AcceptedAt: t0.Add(2 * time.Second), Partition: 1, Offset: 9},
	}}
	if cursor == "" {
		page.Next = "c2"
	}
	return page, nil
}

// specHealth knows ep_1, a parked endpoint with an open breaker; the others
// have no snapshot, which the API shows as an idle endpoint.
type specHealth struct {
	err    error
	panics bool
}

func (f *specHealth) Get(_ context.Context, ids []string) (map[string]health.Snapshot, error) {
	switch {
	case f.panics:
		panic("spec health: Get exploded")
	case f.err != nil:
		return nil, f.err
	}
	pendingSince, pausedUntil, lastErr, lastOK := t0.Add(-90*time.Second), t0.Add(5*time.Minute), t0.Add(-time.Second), t0.Add(-time.Minute)
	out := map[string]health.Snapshot{}
	if slices.Contains(ids, "ep_1") {
		out["ep_1"] = health.Snapshot{EndpointID: "ep_1", OldestPendingSince: &pendingSince, UpdatedAt: t0,
			LaneState: health.LaneState{Pending: 120, InFlight: 0, Parked: 5000, ParkedReason: "breaker",
				Breaker:   health.Breaker{State: "open", ConsecutiveFailures: 20, PausedUntil: &pausedUntil},
				LastError: "503 Service Unavailable", LastErrorAt: &lastErr, LastSuccessAt: &lastOK,
				PerMinute: health.PerMinute{Delivered: 950, Failed: 12, Dead: 1, Superseded: 3},
				Owner:     "laneway-1"}}
	}
	return out, nil
}

// specFeeds is a feed whose retained events are sequences 2 to 4 and whose
// consumer acknowledged 3.
type specFeeds struct {
	err    error
	panics bool
}

func (f *specFeeds) fail() error {
	if f.panics {
		panic("spec feeds exploded")
	}
	return f.err
}

func (f *specFeeds) Create(context.Context, endpoint.Endpoint) error { return f.fail() }
func (f *specFeeds) Delete(context.Context, string) error            { return f.fail() }

func (f *specFeeds) Read(_ context.Context, _ string, from int64, limit int, _ time.Duration) (feed.Page, error) {
	if err := f.fail(); err != nil {
		return feed.Page{}, err
	}
	switch {
	case from < 2:
		return feed.Page{}, &feed.ExpiredError{Oldest: 2}
	case from > 5:
		return feed.Page{}, &feed.AheadError{End: 5}
	}
	p := feed.Page{Next: from}
	for ; p.Next < 5 && len(p.Events) < limit; p.Next++ {
		p.Events = append(p.Events, []byte(`{"sequence":`+strconv.FormatInt(p.Next, 10)+
			`,"id":"ev-`+strconv.FormatInt(p.Next, 10)+`","type":"order.updated","timestamp":"2026-03-04T05:06:07Z","data":{"n":1},"entity":{"id":"order:1","revision":`+
			strconv.FormatInt(p.Next, 10)+`}}`))
	}
	return p, nil
}

func (f *specFeeds) Ack(_ context.Context, _ string, off int64) (int64, error) {
	if err := f.fail(); err != nil {
		return 0, err
	}
	if off > 5 {
		return 0, &feed.AheadError{End: 5}
	}
	return max(off, 3), nil
}

func (f *specFeeds) BatchPosition(ctx context.Context, id string) (feed.Position, error) {
	return f.Position(ctx, id)
}

func (f *specFeeds) Position(context.Context, string) (feed.Position, error) {
	if err := f.fail(); err != nil {
		return feed.Position{}, err
	}
	return feed.Position{Acked: 3, HasAcked: true, Start: 2, End: 5, OldestUnacked: t0.Add(-time.Minute)}, nil
}

// specFeedToken reads ep_pull's feed; specFeedTokenID is its id.
var specFeedToken, specFeedTokenStored = endpoint.NewFeedToken("ft_seed", t0.Add(-time.Hour))

const specFeedTokenID = "ft_seed"

type specPanicPublisher struct{}

func (specPanicPublisher) Publish(context.Context, event.Envelope) (int32, int64, error) {
	panic("spec publisher: Publish exploded")
}

// seedSpecEndpoints stores ep_1 (active, mid-rotation), ep_2 (disabled and
// paused), ep_3 (another tenant, every type), ep_off (disabled, left so),
// ep_pull (a pull endpoint) and ep_batch (a batch endpoint).
func seedSpecEndpoints(s *fakeStore) {
	second := "whsec_" + strings.Repeat("QUJD", 8) // base64 of 24 bytes
	for _, e := range []endpoint.Endpoint{
		{ID: "ep_1", Tenant: "acme", URL: "https://example.com/hooks", EventTypes: []string{"order.updated"}, MaxConcurrency: 4,
			Secrets: []endpoint.Secret{{Value: validSecret}, {Value: second, ExpiresAt: t0.Add(time.Hour)}}, Status: endpoint.StatusActive},
		{ID: "ep_2", Tenant: "acme", URL: "https://example.com/gone", MaxConcurrency: 2, Secrets: []endpoint.Secret{{Value: validSecret}},
			Status: endpoint.StatusDisabled, DisabledReason: "receiver answered 410 Gone", Paused: true},
		{ID: "ep_3", Tenant: "globex", URL: "http://hooks.globex.test:8443/in", MaxConcurrency: 1000, Secrets: []endpoint.Secret{{Value: validSecret}},
			Status: endpoint.StatusActive},
		{ID: "ep_off", Tenant: "acme", URL: "https://example.com/off", MaxConcurrency: 1, Secrets: []endpoint.Secret{{Value: validSecret}},
			Status: endpoint.StatusDisabled},
		{ID: "ep_pull", Tenant: "acme", Mode: endpoint.ModePull, MaxConcurrency: 4, Secrets: []endpoint.Secret{{Value: validSecret}},
			Status: endpoint.StatusActive, FeedTokens: []endpoint.FeedToken{specFeedTokenStored}},
		{ID: "ep_batch", Tenant: "acme", URL: "https://example.com/batches", Mode: endpoint.ModeBatch, Batch: &endpoint.BatchConfig{MaxEvents: 500},
			MaxConcurrency: 4, Secrets: []endpoint.Secret{{Value: validSecret}}, Status: endpoint.StatusActive},
	} {
		e.CreatedAt, e.UpdatedAt = t0.Add(-time.Hour), t0.Add(-time.Minute)
		_ = s.Put(context.Background(), e)
	}
}

// specHarness starts a server with the admin token, /metrics, the OpenAPI
// route and the seeded endpoints. mode "ok" has working backends, "down"
// failing ones (503), "panic" panicking ones (500), and "bare" none of the
// optional ones (501).
func specHarness(t *testing.T, mode string) *harness {
	t.Helper()
	store := &specStore{fakeStore: newFakeStore()}
	seedSpecEndpoints(store.fakeStore)
	dead, events, hr, feeds := newSpecDead(), &specEvents{}, &specHealth{}, &specFeeds{}
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "laneway_spec_test_total", Help: "A counter."})
	reg.MustRegister(c)
	c.Inc()
	var metrics http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	var ready func(context.Context) error
	var pub Publisher
	switch mode {
	case "ok", "bare", "limited", "tokenless":
	case "down":
		store.failWrites = true
		dead.err, events.err, hr.err, feeds.err = errBroker, errBroker, errBroker, errBroker
		ready = func(context.Context) error { return errors.New("kafka: no brokers reachable") }
		pub = &fakePublisher{err: errBroker}
	case "panic":
		store.panics, dead.panics, events.panics, hr.panics, feeds.panics = true, true, true, true, true
		ready = func(context.Context) error { panic("spec ready exploded") }
		metrics = http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("spec metrics exploded") })
		pub = specPanicPublisher{}
	default:
		t.Fatalf("unknown harness mode %q", mode)
	}
	return newHarness(t, func(c *Config) {
		c.AdminToken = testToken
		c.Endpoints = store
		if pub != nil {
			c.Publisher = pub
		}
		if mode != "bare" {
			c.DeadLetters, c.Redrives, c.Events, c.Health, c.Feeds = dead, dead, events, hr, feeds
		}
		c.Ready = ready
		c.Metrics = metrics
		if mode == "limited" { // one failed feed authentication per minute
			c.FeedAuthLimit = FeedAuthLimit{Failures: 1, Window: time.Minute}
		}
		if mode == "tokenless" { // loopback mode: a web page's Host is refused
			c.AdminToken = ""
		}
		c.Routes = []Route{OpenAPIRoute()}
		var ids atomic.Int64
		c.NewID = func() string { return "n" + strconv.FormatInt(ids.Add(1), 10) } // not a seeded id
	})
}

// --- contract ------------------------------------------------------------

// specCall is one request of the contract test.
type specCall struct {
	mode   string // harness; "" is "ok"
	method string
	path   string
	body   string
	header []string // name, value pairs; they override the defaults
	noAuth bool     // send no Authorization header
	want   int      // expected status

	// invalid says the spec refuses the request as well as the server.
	invalid bool
	// field, when set, is the error body's expected field.
	field string
	// wantHeader is a header name and value the response must carry.
	wantHeader []string
}

type specResponse struct {
	status int
	header http.Header
	body   []byte
}

// request builds the call's request to the harness.
func (h *harness) specRequest(c specCall) *http.Request {
	h.t.Helper()
	req, err := http.NewRequest(c.method, h.srv.URL+c.path, strings.NewReader(c.body))
	if err != nil {
		h.t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if !c.noAuth {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	for i := 0; i+1 < len(c.header); i += 2 {
		if c.header[i] == "Host" {
			req.Host = c.header[i+1]
			continue
		}
		req.Header.Set(c.header[i], c.header[i+1])
	}
	return req
}

func (h *harness) send(c specCall) specResponse {
	h.t.Helper()
	r := h.roundTrip(h.specRequest(c))
	return specResponse(r)
}

func specBearerAuth(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecuritySchemeName != "bearerAuth" && in.SecuritySchemeName != "feedToken" {
		return errors.New("unknown security scheme " + in.SecuritySchemeName)
	}
	scheme, token, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return errors.New("no bearer token")
	}
	return nil
}

func specOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc:                specBearerAuth,
		IncludeResponseStatus:             true,
		RejectWhenRequestBodyNotSpecified: true,
		SkipSettingDefaults:               true,
		MultiError:                        true,
	}
}

const (
	specBigSize = 400 << 10 // above the default body limit
	specSince   = "2026-03-01T00:00:00Z"
	specUntil   = "2026-03-01T01:00:00Z"
)

var specHuge = strings.Repeat("a", specBigSize)

// specCalls are run in order: some change the endpoints later ones use.
var specCalls = []specCall{
	// Probes, metrics, this document.
	{method: "GET", path: "/healthz", noAuth: true, want: 200},
	{method: "GET", path: "/readyz", noAuth: true, want: 200},
	{mode: "down", method: "GET", path: "/readyz", noAuth: true, want: 503},
	{mode: "panic", method: "GET", path: "/readyz", noAuth: true, want: 500},
	{method: "GET", path: "/metrics", noAuth: true, want: 200},
	{mode: "tokenless", method: "GET", path: "/metrics", noAuth: true, header: []string{"Host", "rebind.evil.example"}, want: 403},
	{mode: "panic", method: "GET", path: "/metrics", noAuth: true, want: 500},
	{method: "GET", path: "/openapi.json", noAuth: true, want: 200},
	{method: "GET", path: "/openapi.json", noAuth: true, header: []string{"If-None-Match", openAPIETag}, want: 304},

	// Endpoints.
	{method: "POST", path: "/v1/endpoints", want: 201, wantHeader: []string{"Location", "/v1/endpoints/ep_n1"},
		body: `{"tenant":"acme","url":"https://example.com/a","event_types":["order.updated","order.cancelled"],"max_concurrency":16,"secret":"` + validSecret + `"}`},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com/b"}`, want: 201},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"ftp://example.com"}`, want: 400, field: "url", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com","max_concurency":3}`, want: 400, field: "max_concurency", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com","max_concurrency":0}`, want: 400, field: "max_concurrency", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com","event_types":"order.updated"}`, want: 400, field: "event_types", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"url":"https://example.com"}`, want: 400, field: "tenant", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com","secret":"whsec_short"}`, want: 400, field: "secret", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `[]`, want: 400, field: "body", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com"}`, noAuth: true, want: 401, invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com"}`, header: []string{"Authorization", "Bearer wrong"}, want: 401},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com/` + specHuge + `"}`, want: 413, invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `tenant=acme`, header: []string{"Content-Type", "text/plain"}, want: 415, invalid: true},
	{mode: "down", method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com"}`, want: 503},
	{mode: "panic", method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com"}`, want: 500},

	{method: "GET", path: "/v1/endpoints", want: 200},
	{method: "GET", path: "/v1/endpoints?tenant=acme&sort=oldest_pending_age&limit=2", want: 200},
	{method: "GET", path: "/v1/endpoints?sort=name", want: 400, field: "sort", invalid: true},
	{method: "GET", path: "/v1/endpoints?limit=0", want: 400, field: "limit", invalid: true},
	{method: "GET", path: "/v1/endpoints", noAuth: true, want: 401, invalid: true},
	{mode: "down", method: "GET", path: "/v1/endpoints", want: 200}, // health unavailable: shown without it
	{mode: "bare", method: "GET", path: "/v1/endpoints", want: 200},
	{mode: "panic", method: "GET", path: "/v1/endpoints", want: 500},

	{method: "GET", path: "/v1/endpoints/ep_1", want: 200},
	{method: "GET", path: "/v1/endpoints/ep_2", want: 200},
	{method: "GET", path: "/v1/endpoints/ep_404", want: 404},
	{method: "GET", path: "/v1/endpoints/ep_1", noAuth: true, want: 401, invalid: true},
	{mode: "panic", method: "GET", path: "/v1/endpoints/ep_1", want: 500},

	{method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"max_concurrency":16,"event_types":null,"url":"https://example.com/v2"}`, want: 200},
	{method: "PATCH", path: "/v1/endpoints/ep_2", body: `{"status":"active","tenant":"acme"}`, header: []string{"Content-Type", "application/merge-patch+json"}, want: 200},
	{method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"tenant":"globex"}`, want: 400, field: "tenant"},
	{method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"status":"paused"}`, want: 400, field: "status", invalid: true},
	{method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"url":null}`, want: 400, field: "url", invalid: true},
	{method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"secrets":[]}`, want: 400, field: "secrets", invalid: true},
	{method: "PATCH", path: "/v1/endpoints/ep_404", body: `{"max_concurrency":2}`, want: 404},
	{method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"max_concurrency":2}`, noAuth: true, want: 401, invalid: true},
	{method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"url":"https://example.com/` + specHuge + `"}`, want: 413, invalid: true},
	{method: "PATCH", path: "/v1/endpoints/ep_1", body: `max_concurrency=2`, header: []string{"Content-Type", "application/x-www-form-urlencoded"}, want: 415, invalid: true},
	{mode: "down", method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"max_concurrency":2}`, want: 503},
	{mode: "panic", method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"max_concurrency":2}`, want: 500},

	{method: "POST", path: "/v1/endpoints/ep_1/pause", want: 200},
	{method: "POST", path: "/v1/endpoints/ep_1/pause", want: 200},
	{method: "POST", path: "/v1/endpoints/ep_1/resume", want: 200},
	{method: "POST", path: "/v1/endpoints/ep_404/pause", want: 404},
	{method: "POST", path: "/v1/endpoints/ep_404/resume", want: 404},
	{method: "POST", path: "/v1/endpoints/ep_1/pause", noAuth: true, want: 401, invalid: true},
	{method: "POST", path: "/v1/endpoints/ep_1/resume", noAuth: true, want: 401, invalid: true},
	{mode: "down", method: "POST", path: "/v1/endpoints/ep_1/pause", want: 503},
	{mode: "down", method: "POST", path: "/v1/endpoints/ep_2/resume", want: 503},
	{mode: "panic", method: "POST", path: "/v1/endpoints/ep_1/pause", want: 500},
	{mode: "panic", method: "POST", path: "/v1/endpoints/ep_2/resume", want: 500},

	{method: "DELETE", path: "/v1/endpoints/ep_3", want: 204},
	{method: "DELETE", path: "/v1/endpoints/ep_3", want: 404},
	{method: "DELETE", path: "/v1/endpoints/ep_1", noAuth: true, want: 401, invalid: true},
	{mode: "down", method: "DELETE", path: "/v1/endpoints/ep_1", want: 503},
	{mode: "panic", method: "DELETE", path: "/v1/endpoints/ep_1", want: 500},

	// Secrets.
	{method: "GET", path: "/v1/endpoints/ep_1/secret", want: 200},
	{method: "GET", path: "/v1/endpoints/ep_404/secret", want: 404},
	{method: "GET", path: "/v1/endpoints/ep_1/secret", noAuth: true, want: 401, invalid: true},
	{mode: "panic", method: "GET", path: "/v1/endpoints/ep_1/secret", want: 500},
	{method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", want: 200},
	{method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", body: `{"overlap_seconds":3600}`, want: 200},
	{method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", body: `{"secret":"` + validSecret + `","overlap_seconds":0}`, want: 200},
	{method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", body: `{"overlap_seconds":-1}`, want: 400, field: "overlap_seconds", invalid: true},
	{method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", body: `{"secret":"nope"}`, want: 400, field: "secret", invalid: true},
	{method: "POST", path: "/v1/endpoints/ep_404/secret/rotate", want: 404},
	{method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", noAuth: true, want: 401, invalid: true},
	{method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", body: `{"secret":"whsec_` + specHuge + `"}`, want: 413, invalid: true},
	{method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", body: `overlap`, header: []string{"Content-Type", "text/plain"}, want: 415, invalid: true},
	{mode: "down", method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", want: 503},
	{mode: "panic", method: "POST", path: "/v1/endpoints/ep_1/secret/rotate", want: 500},

	// Events: ingest.
	{method: "POST", path: "/v1/events", want: 202,
		body: `{"type":"order.updated","tenant":"acme","entity":"order:123","revision":17,"coalesce":true,"occurred_at":"2026-03-04T05:06:07Z","data":{"status":"paid"}}`},
	{method: "POST", path: "/v1/events", body: `{"id":"ev-7","type":"order.updated","tenant":"acme","entity":"order:7","data":null}`, header: []string{"Idempotency-Key", "k1"}, want: 202},
	{method: "POST", path: "/v1/events", body: `{"id":"ev-7","type":"order.updated","tenant":"acme","entity":"order:7","data":null}`, header: []string{"Idempotency-Key", "k1"}, want: 202,
		wantHeader: []string{"Idempotent-Replayed", "true"}},
	{method: "POST", path: "/v1/events", body: `{"type":"order.updated","tenant":"acme","entity":"order:8"}`, header: []string{"Idempotency-Key", "busy"}, want: 409},
	{method: "POST", path: "/v1/events", body: `{"type":"order.updated","tenant":"acme"}`, want: 400, invalid: true},
	{method: "POST", path: "/v1/events", body: `{"type":"order.updated","tenant":"acme","entity":"order:1","revision":-1}`, want: 400, invalid: true},
	{method: "POST", path: "/v1/events", body: `{"type":"order.updated","tenant":"acme","entity":"order:1","extra":1}`, want: 400, invalid: true},
	{method: "POST", path: "/v1/events", body: `{"type":"order.updated","tenant":"acme","entity":"order:1","data":"` + strings.Repeat("b", 280<<10) + `"}`, want: 400}, // over the event limit, under the body limit
	{method: "POST", path: "/v1/events", body: `{"type":"` + specHuge + `","tenant":"acme","entity":"order:1"}`, want: 413, invalid: true},
	{method: "POST", path: "/v1/events", body: `type=x`, header: []string{"Content-Type", "text/plain"}, want: 415, invalid: true},
	{method: "POST", path: "/v1/events", body: `{"id":"evt_spec_reused","type":"order.updated","tenant":"acme","entity":"order:1"}`, want: 202},
	{method: "POST", path: "/v1/events", body: `{"id":"evt_spec_reused","type":"order.updated","tenant":"acme","entity":"order:2"}`, want: 422},
	{method: "POST", path: "/v1/events", body: `{"type":"order.updated","tenant":"acme","entity":"order:1"}`, noAuth: true, want: 401, invalid: true},
	{mode: "down", method: "POST", path: "/v1/events", body: `{"type":"order.updated","tenant":"acme","entity":"order:1"}`, want: 503},
	{mode: "panic", method: "POST", path: "/v1/events", body: `{"type":"order.updated","tenant":"acme","entity":"order:1"}`, want: 500},

	// Events: reconciliation search.
	{method: "GET", path: "/v1/events?tenant=acme&type=order.updated&entity=order:123&since=" + specSince + "&until=" + specUntil + "&limit=10", want: 200},
	{method: "GET", path: "/v1/events?cursor=c2", want: 200},
	{method: "GET", path: "/v1/events?tenant=acme", want: 400, field: "since"},
	{method: "GET", path: "/v1/events?since=yesterday", want: 400, field: "since", invalid: true},
	{method: "GET", path: "/v1/events?since=" + specSince + "&limit=1001", want: 400, field: "limit", invalid: true},
	{method: "GET", path: "/v1/events?cursor=bad", want: 400, field: "cursor"},
	{method: "GET", path: "/v1/events?since=" + specSince, noAuth: true, want: 401, invalid: true},
	{mode: "bare", method: "GET", path: "/v1/events?since=" + specSince, want: 501},
	{mode: "down", method: "GET", path: "/v1/events?since=" + specSince, want: 503},
	{mode: "panic", method: "GET", path: "/v1/events?since=" + specSince, want: 500},

	// Health.
	{method: "GET", path: "/v1/health", want: 200},
	{mode: "down", method: "GET", path: "/v1/health", want: 200},
	{method: "GET", path: "/v1/health", noAuth: true, want: 401, invalid: true},
	{mode: "bare", method: "GET", path: "/v1/health", want: 501},
	{mode: "panic", method: "GET", path: "/v1/health", want: 500},

	// Dead letters.
	{method: "GET", path: "/v1/dead", want: 200},
	{method: "GET", path: "/v1/dead?endpoint_id=ep_1&reason=max_attempts&since=" + specSince + "&until=" + specUntil + "&limit=50&cursor=c2", want: 200},
	{method: "GET", path: "/v1/dead?cursor=bad", want: 400, field: "cursor"},
	{method: "GET", path: "/v1/dead?until=tomorrow", want: 400, field: "until", invalid: true},
	{method: "GET", path: "/v1/dead?limit=0", want: 400, field: "limit", invalid: true},
	{method: "GET", path: "/v1/dead", noAuth: true, want: 401, invalid: true},
	{mode: "bare", method: "GET", path: "/v1/dead", want: 501},
	{mode: "down", method: "GET", path: "/v1/dead", want: 503},
	{mode: "panic", method: "GET", path: "/v1/dead", want: 500},

	// Redrive.
	{method: "POST", path: "/v1/dead/redrive", body: `{"endpoint_id":"ep_1","reason":"max_attempts","since":"` + specSince + `"}`, want: 202},
	{method: "POST", path: "/v1/dead/redrive", body: `{"endpoint_id":"ep_1","reason":"max_attempts","since":"` + specSince + `"}`, want: 200},
	{method: "POST", path: "/v1/dead/redrive", body: `{"ids":["ev1:ep_1","ev2:ep_1"]}`, header: []string{"Idempotency-Key", "r1"}, want: 202,
		wantHeader: []string{"Location", "/v1/redrives/rd_key_r1"}},
	{method: "POST", path: "/v1/dead/redrive", body: `{"ids":["ev3:ep_1"]}`, header: []string{"Idempotency-Key", "r1"}, want: 422},
	{method: "POST", path: "/v1/dead/redrive", body: `{}`, want: 400, invalid: true},
	{method: "POST", path: "/v1/dead/redrive", body: `{"ids":["ev1:ep_1"],"endpoint_id":"ep_1"}`, want: 400, invalid: true},
	{method: "POST", path: "/v1/dead/redrive", body: `{"endpoint_id":"ep_1","bogus":true}`, want: 400, field: "bogus", invalid: true},
	{method: "POST", path: "/v1/dead/redrive", body: `{"endpoint_id":"ep_404"}`, want: 404},
	{method: "POST", path: "/v1/dead/redrive", body: `{"endpoint_id":"ep_off"}`, want: 409},
	{method: "POST", path: "/v1/dead/redrive", body: `{"endpoint_id":"ep_1"}`, noAuth: true, want: 401, invalid: true},
	{method: "POST", path: "/v1/dead/redrive", body: `{"ids":["` + specHuge + `"]}`, want: 413, invalid: true},
	{method: "POST", path: "/v1/dead/redrive", body: `endpoint_id=ep_1`, header: []string{"Content-Type", "text/plain"}, want: 415, invalid: true},
	{mode: "bare", method: "POST", path: "/v1/dead/redrive", body: `{"endpoint_id":"ep_1"}`, want: 501},
	{mode: "down", method: "POST", path: "/v1/dead/redrive", body: `{"endpoint_id":"ep_1"}`, want: 503},
	{mode: "panic", method: "POST", path: "/v1/dead/redrive", body: `{"endpoint_id":"ep_1"}`, want: 500},

	{method: "GET", path: "/v1/redrives/rd_key_r1", want: 200},
	{method: "GET", path: "/v1/redrives/rd_done", want: 200},
	{method: "GET", path: "/v1/redrives/rd_failed", want: 200},
	{method: "GET", path: "/v1/redrives/rd_missing", want: 404},
	{method: "GET", path: "/v1/redrives/rd_done", noAuth: true, want: 401, invalid: true},
	{mode: "bare", method: "GET", path: "/v1/redrives/rd_done", want: 501},
	{mode: "down", method: "GET", path: "/v1/redrives/rd_done", want: 503},
	{mode: "panic", method: "GET", path: "/v1/redrives/rd_done", want: 500},

	// Pull endpoints and their feeds.
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"pull"}`, want: 201},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"pull","url":"https://example.com"}`, want: 400, field: "url"},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"stream","url":"https://example.com"}`, want: 400, field: "mode", invalid: true},
	{mode: "bare", method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"pull"}`, want: 501},
	{method: "PATCH", path: "/v1/endpoints/ep_pull", body: `{"mode":"push"}`, want: 400, field: "mode"},
	{method: "GET", path: "/v1/endpoints/ep_pull", want: 200},

	// Batch endpoints.
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"batch","url":"https://example.com"}`, want: 201},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"batch","url":"https://example.com","batch":{"max_events":250,"max_bytes":65536,"max_wait_ms":0}}`, want: 201},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"batch","url":"https://example.com","batch":{"max_events":0}}`, want: 400, field: "batch.max_events", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"batch","url":"https://example.com","batch":{"max_events":1001}}`, want: 400, field: "batch.max_events", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"batch","url":"https://example.com","batch":{"max_event":5}}`, want: 400, field: "batch.max_event", invalid: true},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com","batch":{"max_events":5}}`, want: 400, field: "batch"},
	{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"batch"}`, want: 400, field: "url"},
	{mode: "bare", method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","mode":"batch","url":"https://example.com"}`, want: 501},
	{method: "GET", path: "/v1/endpoints/ep_batch", want: 200},
	{method: "PATCH", path: "/v1/endpoints/ep_batch", body: `{"batch":{"max_wait_ms":250}}`, want: 200},
	{method: "PATCH", path: "/v1/endpoints/ep_batch", body: `{"batch":{"max_bytes":512}}`, want: 400, field: "batch.max_bytes", invalid: true},
	{method: "PATCH", path: "/v1/endpoints/ep_batch", body: `{"batch":null}`, want: 400, field: "batch", invalid: true},
	{method: "PATCH", path: "/v1/endpoints/ep_batch", body: `{"mode":"push"}`, want: 400, field: "mode"},
	{method: "PATCH", path: "/v1/endpoints/ep_1", body: `{"batch":{"max_events":5}}`, want: 400, field: "batch"},

	{method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens", want: 201},
	{method: "POST", path: "/v1/endpoints/ep_1/feed-tokens", want: 409},
	{method: "POST", path: "/v1/endpoints/ep_404/feed-tokens", want: 404},
	{method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens", noAuth: true, want: 401, invalid: true},
	{mode: "down", method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens", want: 503},
	{mode: "panic", method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens", want: 500},
	{method: "GET", path: "/v1/endpoints/ep_pull/feed-tokens", want: 200},
	{method: "GET", path: "/v1/endpoints/ep_1/feed-tokens", want: 409},
	{method: "GET", path: "/v1/endpoints/ep_404/feed-tokens", want: 404},
	{method: "GET", path: "/v1/endpoints/ep_pull/feed-tokens", noAuth: true, want: 401, invalid: true},
	{mode: "panic", method: "GET", path: "/v1/endpoints/ep_pull/feed-tokens", want: 500},
	{method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID + "/rotate", body: `{"overlap_seconds":3600}`, want: 201},
	{method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens/ft_n404/rotate", want: 404},
	{method: "POST", path: "/v1/endpoints/ep_1/feed-tokens/ft_1/rotate", want: 409},
	{method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID + "/rotate", body: `{"overlap_seconds":-1}`, want: 400, field: "overlap_seconds", invalid: true},
	{method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID + "/rotate", noAuth: true, want: 401, invalid: true},
	{method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID + "/rotate", body: `{"x":"` + specHuge + `"}`, want: 413, invalid: true},
	{method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID + "/rotate", body: `x`, header: []string{"Content-Type", "text/plain"}, want: 415, invalid: true},
	{mode: "down", method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID + "/rotate", want: 503},
	{mode: "panic", method: "POST", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID + "/rotate", want: 500},

	{method: "GET", path: "/v1/feed/ep_pull", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 200},
	{method: "GET", path: "/v1/feed/ep_pull?cursor=" + "fc1_Aw" + "&limit=1&wait=2s", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 200},
	{method: "GET", path: "/v1/feed/ep_pull?cursor=fc1_AQ", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 410},
	{method: "GET", path: "/v1/feed/ep_pull?cursor=nope", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 400, field: "cursor"},
	{method: "GET", path: "/v1/feed/ep_pull?cursor=fc1_Bw", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 400, field: "cursor"},
	{method: "GET", path: "/v1/feed/ep_pull?limit=0", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 400, field: "limit", invalid: true},
	{method: "GET", path: "/v1/feed/ep_pull?wait=31s", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 400, field: "wait"},
	{method: "GET", path: "/v1/feed/ep_pull", want: 401},                                                            // the admin token
	{method: "GET", path: "/v1/feed/ep_1", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 401}, // another endpoint
	{method: "GET", path: "/v1/feed/ep_pull", noAuth: true, want: 401, invalid: true},
	{mode: "limited", method: "GET", path: "/v1/feed/ep_pull", want: 401}, // the address's one failure
	{mode: "limited", method: "GET", path: "/v1/feed/ep_pull", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 429, wantHeader: []string{"Retry-After", "60"}},
	{mode: "limited", method: "POST", path: "/v1/feed/ep_pull/ack", body: `{"cursor":"fc1_BA"}`, header: []string{"Authorization", "Bearer " + specFeedToken}, want: 429},
	{mode: "bare", method: "GET", path: "/v1/feed/ep_pull", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 501},
	{mode: "down", method: "GET", path: "/v1/feed/ep_pull", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 503},
	{mode: "panic", method: "GET", path: "/v1/feed/ep_pull", header: []string{"Authorization", "Bearer " + specFeedToken}, want: 500},
	{method: "POST", path: "/v1/feed/ep_pull/ack", body: `{"cursor":"fc1_BA"}`, header: []string{"Authorization", "Bearer " + specFeedToken}, want: 200},
	{method: "POST", path: "/v1/feed/ep_pull/ack", body: `{"cursor":"fc1_CQ"}`, header: []string{"Authorization", "Bearer " + specFeedToken}, want: 400, field: "cursor"},
	{method: "POST", path: "/v1/feed/ep_pull/ack", body: `{}`, header: []string{"Authorization", "Bearer " + specFeedToken}, want: 400, field: "cursor", invalid: true},
	{method: "POST", path: "/v1/feed/ep_pull/ack", body: `{"cursor":"fc1_BA"}`, want: 401},
	{method: "POST", path: "/v1/feed/ep_pull/ack", body: `{"cursor":"` + specHuge + `"}`, header: []string{"Authorization", "Bearer " + specFeedToken}, want: 413},
	{method: "POST", path: "/v1/feed/ep_pull/ack", body: `cursor`, header: []string{"Authorization", "Bearer " + specFeedToken, "Content-Type", "text/plain"}, want: 415, invalid: true},
	{mode: "bare", method: "POST", path: "/v1/feed/ep_pull/ack", body: `{"cursor":"fc1_BA"}`, header: []string{"Authorization", "Bearer " + specFeedToken}, want: 501},
	{mode: "down", method: "POST", path: "/v1/feed/ep_pull/ack", body: `{"cursor":"fc1_BA"}`, header: []string{"Authorization", "Bearer " + specFeedToken}, want: 503},
	{mode: "panic", method: "POST", path: "/v1/feed/ep_pull/ack", body: `{"cursor":"fc1_BA"}`, header: []string{"Authorization", "Bearer " + specFeedToken}, want: 500},

	{method: "DELETE", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID, want: 204},
	{method: "DELETE", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID, want: 404},
	{method: "DELETE", path: "/v1/endpoints/ep_1/feed-tokens/ft_1", want: 409},
	{method: "DELETE", path: "/v1/endpoints/ep_pull/feed-tokens/ft_1", noAuth: true, want: 401, invalid: true},
	{mode: "down", method: "DELETE", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID, want: 503},
	{mode: "panic", method: "DELETE", path: "/v1/endpoints/ep_pull/feed-tokens/" + specFeedTokenID, want: 500},
}

// TestOpenAPIContract sends every call in specCalls to a real Server and
// validates the request and the real response against the spec: a request
// the spec accepts must pass its validation (and one marked invalid must
// fail it), every response must match a documented status, headers and
// body, and every status the spec documents must be seen.
func TestOpenAPIContract(t *testing.T) {
	// Requests are checked against the spec as published, responses
	// against its strict form.
	doc, strict := loadOpenAPI(t, false), loadOpenAPI(t, true)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	strictRouter, err := gorillamux.NewRouter(strict)
	if err != nil {
		t.Fatal(err)
	}
	harnesses := map[string]*harness{}
	covered := map[string]bool{}
	for _, c := range specCalls {
		mode := cmp.Or(c.mode, "ok")
		h := harnesses[mode]
		if h == nil {
			h = specHarness(t, mode)
			h.mr.Set(redisKey("acme", "busy"), pendingValue) // a request with key "busy" is publishing
			harnesses[mode] = h
		}
		name := mode + " " + c.method + " " + c.path
		if len(name) > 120 {
			name = name[:120] + "…"
		}
		r := h.send(c)
		if r.status != c.want {
			t.Errorf("%s: status %d, want %d; body %.300s", name, r.status, c.want, r.body)
			continue
		}
		if c.field != "" {
			var e httpjson.ErrorBody
			if json.Unmarshal(r.body, &e) != nil || e.Field != c.field {
				t.Errorf("%s: error field %q, want %q; body %.300s", name, e.Field, c.field, r.body)
			}
		}
		if len(c.wantHeader) == 2 && r.header.Get(c.wantHeader[0]) != c.wantHeader[1] {
			t.Errorf("%s: %s = %q, want %q", name, c.wantHeader[0], r.header.Get(c.wantHeader[0]), c.wantHeader[1])
		}

		req := h.specRequest(c)
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Errorf("%s: no operation in the spec: %v", name, err)
			continue
		}
		ctx := context.Background()
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: specOptions()}
		reqErr := openapi3filter.ValidateRequest(ctx, in)
		switch {
		case c.invalid && reqErr == nil:
			t.Errorf("%s: the server refuses this request (%d) but the spec accepts it", name, r.status)
		case !c.invalid && reqErr != nil:
			t.Errorf("%s: the spec refuses the request: %v", name, reqErr)
		}
		strictReq := h.specRequest(c)
		strictRoute, strictParams, err := strictRouter.FindRoute(strictReq)
		if err != nil {
			t.Fatalf("%s: found in the spec but not in its strict form: %v", name, err)
		}
		err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: strictReq, PathParams: strictParams, Route: strictRoute, Options: specOptions()},
			Status:                 r.status, Header: r.header,
			Body: io.NopCloser(bytes.NewReader(r.body)), Options: specOptions(),
		})
		if err != nil {
			t.Errorf("%s: the response does not match the spec: %v\nbody: %.600s", name, err, r.body)
		}
		covered[c.method+" "+route.Path+" "+strconv.Itoa(r.status)] = true
	}

	// Every documented response was produced by the server at least once.
	for path, item := range doc.Paths.Map() {
		if servedByInbound(path) {
			continue
		}
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if key := method + " " + path + " " + status; !covered[key] {
					t.Errorf("%s: documented but never produced by the contract calls", key)
				}
			}
		}
	}
}

// TestOpenAPIErrorsMatchErrorSchema checks the answers that no operation
// documents (unknown route, wrong method) against the Error schema.
func TestOpenAPIErrorsMatchErrorSchema(t *testing.T) {
	doc := loadOpenAPI(t, true)
	schema := doc.Components.Schemas["Error"].Value
	h := specHarness(t, "ok")
	for _, c := range []specCall{
		{method: "GET", path: "/v2/nothing", want: 404},
		{method: "PUT", path: "/v1/endpoints", want: 405},
	} {
		r := h.send(c)
		var v any
		if r.status != c.want || json.Unmarshal(r.body, &v) != nil {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
		if err := doc.ValidateSchemaJSON(schema, v); err != nil {
			t.Errorf("%s %s: %v", c.method, c.path, err)
		}
	}
}

// capturedDelivery is what a receiver got.
type capturedDelivery struct {
	method string
	header http.Header
	body   []byte
}

// webhookCheck starts a receiver for the spec's webhooks[name]. send
// POSTs a body to it with the real sender and signer (two secrets, as
// during a rotation: two signatures) and returns what it got; validate
// checks a delivery against the webhook.
func webhookCheck(t *testing.T, name string) (send func(msgID string, body []byte) capturedDelivery, validate func(capturedDelivery) error) {
	t.Helper()
	doc := loadOpenAPI(t, true)
	item := doc.Webhooks[name]
	if item == nil || item.Post == nil {
		t.Fatalf("webhooks.%s.post is missing", name)
	}
	got := make(chan capturedDelivery, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- capturedDelivery{r.Method, r.Header.Clone(), b}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(recv.Close)
	sender, err := deliver.NewSender(deliver.Config{AllowTargets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sender.Close)
	signer, err := signing.NewSigner([]string{validSecret, endpoint.NewSecret()})
	if err != nil {
		t.Fatal(err)
	}
	send = func(msgID string, body []byte) capturedDelivery {
		t.Helper()
		res := sender.Send(context.Background(), deliver.Request{URL: recv.URL + "/hooks", MsgID: msgID, Body: body, Signer: signer})
		if res.Err != nil {
			t.Fatalf("delivery failed: %v", res.Err)
		}
		return <-got
	}
	route := &routers.Route{Spec: doc, Path: "/hooks", PathItem: item, Method: http.MethodPost, Operation: item.Post}
	validate = func(c capturedDelivery) error {
		req := httptest.NewRequest(c.method, recv.URL+"/hooks", bytes.NewReader(c.body))
		req.Header = c.header
		in := &openapi3filter.RequestValidationInput{Request: req, Route: route, Options: specOptions()}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			return err
		}
		return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
			RequestValidationInput: in, Status: http.StatusNoContent, Header: http.Header{},
			Body: io.NopCloser(strings.NewReader("")), Options: specOptions(),
		})
	}
	return send, validate
}

// TestOpenAPIWebhookMatchesRealDeliveries sends deliveries with the real
// sender and signer and validates what a receiver gets against the
// spec's webhooks.event.
func TestOpenAPIWebhookMatchesRealDeliveries(t *testing.T) {
	send, validate := webhookCheck(t, "event")
	for _, env := range []event.Envelope{
		{ID: "0b4f2f0e-6e0b-4c8e-9a53-2b1f9d6c7a10", Type: "order.updated", Tenant: "acme", Entity: "order:123",
			Revision: 17, Coalesce: true, OccurredAt: t0, Data: json.RawMessage(`{"status":"paid"}`)},
		{ID: "ev-no-data", Type: "order.created", Tenant: "acme", Entity: "order:124", OccurredAt: t0},
	} {
		d := event.NewDelivery(env, "ep_1", t0)
		body, err := d.Body()
		if err != nil {
			t.Fatal(err)
		}
		c := send(env.ID, body)
		if err := validate(c); err != nil {
			t.Errorf("delivery of %s does not match webhooks.event: %v\nheaders %v\nbody %s", env.ID, err, c.header, c.body)
		}
		// The check has teeth: without a signature, or without the entity,
		// the same delivery is refused.
		unsigned := capturedDelivery{c.method, c.header.Clone(), c.body}
		unsigned.header.Del(signing.HeaderSignature)
		if validate(unsigned) == nil {
			t.Error("a delivery without webhook-signature passes the spec")
		}
		var payload map[string]any
		_ = json.Unmarshal(c.body, &payload)
		delete(payload, "entity")
		stripped, _ := json.Marshal(payload)
		if validate(capturedDelivery{c.method, c.header, stripped}) == nil {
			t.Error("a payload without entity passes the spec")
		}
	}
}

// TestOpenAPIBatchWebhook validates a batch delivery against the spec's
// webhooks.batch: events rendered by the real delivery code (full and
// thin), each with its sequence first as in a feed, in the documented
// {"batch":[…]} body, signed and sent by the real signer and sender.
func TestOpenAPIBatchWebhook(t *testing.T) {
	send, validate := webhookCheck(t, "batch")
	var items [][]byte
	for i, env := range []event.Envelope{
		{ID: "0b4f2f0e-6e0b-4c8e-9a53-2b1f9d6c7a10", Type: "order.updated", Tenant: "acme", Entity: "order:123",
			Revision: 17, Coalesce: true, OccurredAt: t0, Data: json.RawMessage(`{"status":"paid"}`)},
		{ID: "ev-no-data", Type: "order.created", Tenant: "acme", Entity: "order:124", OccurredAt: t0},
		{ID: "ev-thin", Type: "order.updated", Tenant: "acme", Entity: "order:125", Revision: 2, OccurredAt: t0, Data: json.RawMessage(`{"n":1}`)},
	} {
		d := event.NewDelivery(env, "ep_batch", t0)
		payload, err := d.Render(env.ID == "ev-thin")
		if err != nil {
			t.Fatal(err)
		}
		item := append([]byte(`{"sequence":`+strconv.Itoa(41+i)+`,`), payload[1:]...)
		items = append(items, item)
	}
	batch := func(items ...[]byte) []byte {
		return append(append([]byte(`{"batch":[`), bytes.Join(items, []byte(","))...), ']', '}')
	}
	c := send("batch-41-43", batch(items...))
	if err := validate(c); err != nil {
		t.Fatalf("a batch delivery does not match webhooks.batch: %v\nheaders %v\nbody %s", err, c.header, c.body)
	}
	var parsed struct{ Batch []map[string]any }
	if err := json.Unmarshal(c.body, &parsed); err != nil || len(parsed.Batch) != 3 || parsed.Batch[2]["sequence"] != float64(43) {
		t.Fatalf("the batch built is not the documented body: %s (%v)", c.body, err)
	}
	if _, thin := parsed.Batch[2]["data"]; thin {
		t.Fatalf("the thin event carries data: %s", c.body)
	}

	// The check has teeth: an unsigned batch, an empty one, a bare event
	// and an event without its sequence are refused.
	unsigned := capturedDelivery{c.method, c.header.Clone(), c.body}
	unsigned.header.Del(signing.HeaderSignature)
	noSequence := append([]byte(`{`), items[0][bytes.IndexByte(items[0], ',')+1:]...)
	for name, bad := range map[string]capturedDelivery{
		"unsigned":         unsigned,
		"empty":            {c.method, c.header, batch()},
		"a bare event":     {c.method, c.header, items[0]},
		"without sequence": {c.method, c.header, batch(noSequence)},
	} {
		if validate(bad) == nil {
			t.Errorf("a batch %s passes the spec: %s", name, bad.body)
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
