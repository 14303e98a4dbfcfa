package inbound

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// The inbound routes are documented in internal/admin/api/openapi.json with the rest of
// the API (they are mounted on its listener through api.Config.Routes).
// TestOpenAPIInbound keeps that part of the spec true, as
// internal/admin/api/openapi_test.go does for the API's own routes: the spec's inbound
// operations are exactly the service's routes, and real requests to the
// real handlers, mounted behind api.Server with an admin token, on kfake,
// and their real responses (happy paths and errors: 400, 401, 404, 409,
// 413, 503) validate against it. Every documented status but 500 (the API
// server's answer to a panicking handler) is produced.

const specToken = "spec-token"

// inboundSpecPath reports whether a spec path is served by this package.
func inboundSpecPath(path string) bool {
	return strings.HasPrefix(path, "/in/") || strings.HasPrefix(path, "/v1/inbound/")
}

// loadSpec loads the API's OpenAPI document. With strict, object schemas
// that do not say otherwise are closed (additionalProperties: false), so a
// field a handler returns but the spec does not document fails.
func loadSpec(t *testing.T, strict bool) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPISpec())
	if err != nil {
		t.Fatalf("loading the OpenAPI spec: %v", err)
	}
	if strict {
		seen := map[*openapi3.Schema]bool{}
		var walk func(*openapi3.SchemaRef)
		walk = func(ref *openapi3.SchemaRef) {
			if ref == nil || ref.Value == nil || seen[ref.Value] {
				return
			}
			s := ref.Value
			seen[s] = true
			if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
				s.AdditionalProperties.Has = openapi3.Ptr(false)
			}
			for _, p := range s.Properties {
				walk(p)
			}
			walk(s.Items)
			for _, group := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
				for _, sub := range group {
					walk(sub)
				}
			}
		}
		for _, ref := range doc.Components.Schemas {
			walk(ref)
		}
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the OpenAPI spec is not valid: %v", err)
	}
	return doc
}

func specBearer(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecuritySchemeName != "bearerAuth" {
		return errors.New("unknown security scheme " + in.SecuritySchemeName)
	}
	scheme, token, _ := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return errors.New("no bearer token")
	}
	return nil
}

func specOpts() *openapi3filter.Options {
	return &openapi3filter.Options{
		AuthenticationFunc: specBearer, IncludeResponseStatus: true, RejectWhenRequestBodyNotSpecified: true,
		SkipSettingDefaults: true, MultiError: true,
	}
}

// mountSpec serves s's routes behind api.Server with the admin token.
func mountSpec(t *testing.T, s *Service) string {
	t.Helper()
	srv, err := api.New(api.Config{
		Endpoints: noEndpoints{}, Publisher: noPublisher{}, AdminToken: specToken, Routes: s.Routes(), Logger: testenv.Logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// specCall is one request of the contract test.
type specCall struct {
	base   string // the server; "" is the working one
	method string
	path   string
	body   string
	header http.Header // added to the defaults (JSON Content-Type when there is a body, the token)
	noAuth bool
	want   int
	// invalid says the spec refuses the request as well as the server.
	invalid bool
	// field is the error body's expected field, when set.
	field string
}

type specResult struct {
	status int
	header http.Header
	body   []byte
}

type contract struct {
	t                    *testing.T
	base                 string
	router, strictRouter routers.Router
	covered              map[string]bool
}

func (k *contract) request(c specCall) *http.Request {
	k.t.Helper()
	req, err := http.NewRequest(c.method, c.base+c.path, strings.NewReader(c.body))
	if err != nil {
		k.t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if !c.noAuth {
		req.Header.Set("Authorization", "Bearer "+specToken)
	}
	for name, values := range c.header {
		req.Header[name] = values
	}
	return req
}

// textPlain is a Content-Type the admin routes refuse with 415.
var textPlain = http.Header{"Content-Type": {"text/plain"}}

// do sends the call, checks its status and validates the request and the
// real response against the spec.
func (k *contract) do(c specCall) specResult {
	k.t.Helper()
	if c.base == "" {
		c.base = k.base
	}
	name := c.method + " " + c.path
	if len(name) > 100 {
		name = name[:100] + "…"
	}
	resp, err := http.DefaultClient.Do(k.request(c))
	if err != nil {
		k.t.Fatalf("%s: %v", name, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		k.t.Fatal(err)
	}
	r := specResult{status: resp.StatusCode, header: resp.Header, body: body}
	if r.status != c.want {
		k.t.Fatalf("%s: status %d, want %d; body %.300s", name, r.status, c.want, r.body)
	}
	if c.field != "" {
		var e struct{ Field string }
		if json.Unmarshal(r.body, &e) != nil || e.Field != c.field {
			k.t.Errorf("%s: error field %q, want %q; body %.300s", name, e.Field, c.field, r.body)
		}
	}

	ctx := context.Background()
	req := k.request(c)
	route, params, err := k.router.FindRoute(req)
	if err != nil {
		k.t.Fatalf("%s: no operation in the spec: %v", name, err)
	}
	reqErr := openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: specOpts()})
	switch {
	case c.invalid && reqErr == nil:
		k.t.Errorf("%s: the server refuses this request (%d) but the spec accepts it", name, r.status)
	case !c.invalid && reqErr != nil:
		k.t.Errorf("%s: the spec refuses the request: %v", name, reqErr)
	}
	strictReq := k.request(c)
	strictRoute, strictParams, err := k.strictRouter.FindRoute(strictReq)
	if err != nil {
		k.t.Fatalf("%s: not in the strict spec: %v", name, err)
	}
	err = openapi3filter.ValidateResponse(ctx, &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: strictReq, PathParams: strictParams, Route: strictRoute, Options: specOpts()},
		Status:                 r.status, Header: r.header, Body: io.NopCloser(bytes.NewReader(r.body)), Options: specOpts(),
	})
	if err != nil {
		k.t.Errorf("%s: the response does not match the spec: %v\nbody: %.600s", name, err, r.body)
	}
	k.covered[c.method+" "+route.Path+" "+strconv.Itoa(r.status)] = true
	return r
}

// decode does c and decodes its body into v.
func (k *contract) decode(c specCall, v any) specResult {
	k.t.Helper()
	r := k.do(c)
	if err := json.Unmarshal(r.body, v); err != nil {
		k.t.Fatalf("%s %s: %v in %s", c.method, c.path, err, r.body)
	}
	return r
}

func TestOpenAPIInbound(t *testing.T) {
	doc, strict := loadSpec(t, false), loadSpec(t, true)
	f := newFixture(t, testenv.Kfake(t))
	s := f.service(nil, nil)

	// The spec's inbound operations are exactly the service's routes, and
	// public exactly where the route is.
	var routes, ops []string
	for _, r := range s.Routes() {
		method, path, _ := strings.Cut(r.Pattern, " ")
		routes = append(routes, r.Pattern)
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			continue // reported below
		}
		op := item.GetOperation(method)
		if public := op.Security != nil && len(*op.Security) == 0; public != r.Public {
			t.Errorf("%s: public %v in the spec, %v in Routes()", r.Pattern, public, r.Public)
		}
	}
	for path, item := range doc.Paths.Map() {
		if !inboundSpecPath(path) {
			continue
		}
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	slices.Sort(routes)
	slices.Sort(ops)
	if !slices.Equal(routes, ops) {
		t.Errorf("inbound routes and spec operations differ:\nroutes: %v\nspec:   %v", routes, ops)
	}

	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	strictRouter, err := gorillamux.NewRouter(strict)
	if err != nil {
		t.Fatal(err)
	}
	k := &contract{t: t, base: mountSpec(t, s), router: router, strictRouter: strictRouter, covered: map[string]bool{}}
	huge := strings.Repeat("a", maxAdminBody+1024)
	started := time.Now().UTC()
	since := started.Add(-time.Minute).Format(time.RFC3339)

	// Sources.
	var std sourceJSON
	r := k.decode(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"std","kind":"standard","tenant":"acme","type_prefix":"partner."}`, want: 201}, &std)
	if r.header.Get("Location") != "/v1/inbound/sources/std" || !strings.HasPrefix(std.Secret, "whsec_") {
		t.Fatalf("created %+v at %q", std, r.header.Get("Location"))
	}
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", want: 201, body: `{"id":"stripe","kind":"stripe","tenant":"acme","secret":"whsec_stripe",` +
		`"previous_secret":"whsec_old","tolerance_seconds":600,"max_body_bytes":4096,"type_field":"type","type_prefix":"",` +
		`"type_map":{"invoice.paid":"billing.paid"},"entity_field":"/data/object/id","revision_field":"data.object.rev","coalesce":true}`})
	var small sourceJSON
	k.decode(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"small","kind":"github","tenant":"acme","max_body_bytes":64}`, want: 201}, &small)
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"gone","kind":"github","tenant":"acme","secret":"k"}`, want: 201})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"std","kind":"standard","tenant":"acme"}`, want: 409})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"x","kind":"standard","tenant":"acme"}`,
		header: textPlain, want: 415, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"x","kind":"standard","tenant":7}`, want: 400, field: "tenant", invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"nosecret","kind":"stripe","tenant":"acme"}`, want: 400, field: "secret"})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"Bad ID","kind":"github","tenant":"acme"}`, want: 400, field: "id", invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"x","kind":"github","tenant":"acme","typo":1}`, want: 400, field: "typo", invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"x","kind":"github","tenant":"` + huge + `"}`, want: 413, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"x","kind":"github","tenant":"acme"}`, noAuth: true, want: 401, invalid: true})

	var list struct{ Data []sourceJSON }
	k.decode(specCall{method: "GET", path: "/v1/inbound/sources", want: 200}, &list)
	if len(list.Data) != 4 {
		t.Fatalf("listed %+v", list.Data)
	}
	k.do(specCall{method: "GET", path: "/v1/inbound/sources", noAuth: true, want: 401, invalid: true})
	k.do(specCall{method: "GET", path: "/v1/inbound/sources/std", want: 200})
	k.do(specCall{method: "GET", path: "/v1/inbound/sources/nope", want: 404})
	k.do(specCall{method: "GET", path: "/v1/inbound/sources/std", noAuth: true, want: 401, invalid: true})

	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/stripe", body: `{"tenant":"beta","type_map":{},"previous_secret":""}`, want: 200})
	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/std", body: `{"id":"std","kind":"standard","revision_field":"data.rev"}`, want: 200})
	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/std", body: `{"kind":"stripe"}`, want: 400, field: "id"})
	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/std", body: `{}`, header: textPlain, want: 415, invalid: true})
	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/std", body: `{"type_field":"data..type"}`, want: 400, field: "type_field"})
	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/std", body: `{"tolerance_seconds":0}`, want: 400, field: "tolerance_seconds", invalid: true})
	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/std", body: `{"max_body_bytes":999999999}`, want: 400, field: "max_body_bytes", invalid: true})
	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/nope", body: `{"tenant":"x"}`, want: 404})
	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/std", body: `{"tenant":"x"}`, noAuth: true, want: 401, invalid: true})
	k.do(specCall{method: "PATCH", path: "/v1/inbound/sources/std", body: `{"tenant":"` + huge + `"}`, want: 413, invalid: true})

	k.do(specCall{method: "GET", path: "/v1/inbound/sources/std/secret", want: 200})
	k.do(specCall{method: "GET", path: "/v1/inbound/sources/nope/secret", want: 404})
	k.do(specCall{method: "GET", path: "/v1/inbound/sources/std/secret", noAuth: true, want: 401, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/small/secret/rotate", want: 200})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/stripe/secret/rotate", body: `{"secret":"whsec_new"}`, want: 200})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/stripe/secret/rotate", want: 400, field: "secret"}) // stripe secrets come from Stripe
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/std/secret/rotate", body: `{"secret":"whsec_x","extra":1}`, want: 400, field: "extra", invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/nope/secret/rotate", want: 404})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/std/secret/rotate", body: `{}`, header: textPlain, want: 415, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/std/secret/rotate", noAuth: true, want: 401, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/std/secret/rotate", body: `{"secret":"` + huge + `"}`, want: 413, invalid: true})

	k.do(specCall{method: "DELETE", path: "/v1/inbound/sources/gone", want: 204})
	k.do(specCall{method: "DELETE", path: "/v1/inbound/sources/gone", want: 404})
	k.do(specCall{method: "DELETE", path: "/v1/inbound/sources/std", noAuth: true, want: 401, invalid: true})

	// The front door: public, authenticated by signatures later.
	now := time.Now()
	validBody := `{"type":"order.paid","data":{"id":"ord_1","rev":3}}`
	signed := standardHeaders(t, std.Secret, "msg_1", now, []byte(validBody))
	var valid, tampered, binary struct{ ID string }
	k.decode(specCall{method: "POST", path: "/in/std", body: validBody, header: signed, noAuth: true, want: 202}, &valid)
	k.do(specCall{method: "POST", path: "/in/std", body: `{"type":"order.paid","data":{"id":"ord_2"}}`, header: signed, noAuth: true, want: 401})
	unsigned := signed.Clone()
	unsigned.Del("Webhook-Signature")
	k.do(specCall{method: "POST", path: "/in/std", body: validBody, header: unsigned, noAuth: true, want: 400})
	k.do(specCall{method: "POST", path: "/in/nope", body: validBody, header: signed, noAuth: true, want: 404})
	hub := http.Header{"Content-Type": {"application/octet-stream"}, "X-Hub-Signature-256": {"sha256=00"}, "X-Github-Event": {"push"}}
	k.do(specCall{method: "POST", path: "/in/small", body: strings.Repeat("b", 100), header: hub, noAuth: true, want: 413})
	binHub := hub.Clone()
	binHub.Set("X-Hub-Signature-256", githubSignature(small.Secret, []byte("\xff\xfe\x00a")))
	k.decode(specCall{method: "POST", path: "/in/small", body: "\xff\xfe\x00a", header: binHub, noAuth: true, want: 202}, &binary)
	waitVerifier(t, s, "five outcomes", decidedAtLeast(5))

	// Listing.
	var page Page
	k.decode(specCall{method: "GET", path: "/v1/inbound/requests", want: 200}, &page)
	byID := map[string]Item{}
	var tooLarge string
	for _, it := range page.Items {
		byID[it.ID] = it
		if it.Reason == ReasonTooLarge {
			tooLarge = it.ID
		}
		if it.Reason == ReasonBadSignature {
			tampered.ID = it.ID // refused at the door: its id is only listed
		}
	}
	if byID[valid.ID].Status != StatusVerified || byID[tampered.ID].Reason != ReasonBadSignature || tooLarge == "" || len(page.Items) != 5 {
		t.Fatalf("listed %+v", page.Items)
	}
	k.decode(specCall{method: "GET", path: "/v1/inbound/requests?source=std&status=rejected&since=" + since + "&until=" + time.Now().Add(time.Minute).UTC().Format(time.RFC3339) + "&limit=10", want: 200}, &page)
	if reasons := countBy(page.Items, func(it Item) string { return it.Reason }); len(page.Items) != 2 ||
		reasons[ReasonBadSignature] != 1 || reasons[ReasonMissingSignature] != 1 {
		t.Fatalf("rejected of std: %+v", page.Items)
	}
	k.do(specCall{method: "GET", path: "/v1/inbound/requests?status=pending", want: 200})
	k.decode(specCall{method: "GET", path: "/v1/inbound/requests?limit=1", want: 200}, &page)
	if page.Next == "" {
		t.Fatal("a page of 1 of 5 has no next cursor")
	}
	k.do(specCall{method: "GET", path: "/v1/inbound/requests?limit=1&cursor=" + page.Next, want: 200})
	k.do(specCall{method: "GET", path: "/v1/inbound/requests?cursor=bad", want: 400, field: "cursor"})
	k.do(specCall{method: "GET", path: "/v1/inbound/requests?status=lost", want: 400, field: "status", invalid: true})
	k.do(specCall{method: "GET", path: "/v1/inbound/requests?since=yesterday", want: 400, field: "since", invalid: true})
	k.do(specCall{method: "GET", path: "/v1/inbound/requests?limit=0", want: 400, field: "limit", invalid: true})
	k.do(specCall{method: "GET", path: "/v1/inbound/requests", noAuth: true, want: 401, invalid: true})

	// Captured requests.
	var detail requestJSON
	k.decode(specCall{method: "GET", path: "/v1/inbound/requests/" + valid.ID, want: 200}, &detail)
	if detail.Body == nil || *detail.Body != validBody || detail.Headers.Get("Webhook-Id") != "msg_1" {
		t.Fatalf("detail %+v", detail)
	}
	if detail.Status != StatusVerified || detail.Outcome == nil || detail.Outcome.EventID == "" || detail.Outcome.VerifiedAt.IsZero() {
		t.Fatalf("a verified request's status and outcome: %q %+v", detail.Status, detail.Outcome)
	}
	detail = requestJSON{}
	k.decode(specCall{method: "GET", path: "/v1/inbound/requests/" + tampered.ID, want: 200}, &detail)
	if detail.Status != StatusRejected || detail.Outcome == nil || detail.Outcome.Reason != ReasonBadSignature {
		t.Fatalf("a rejected request's status and outcome: %q %+v", detail.Status, detail.Outcome)
	}
	detail = requestJSON{}
	k.decode(specCall{method: "GET", path: "/v1/inbound/requests/" + binary.ID, want: 200}, &detail)
	if detail.Body != nil || detail.BodyBase64 != "//4AYQ==" {
		t.Fatalf("a body that is not UTF-8: %+v", detail)
	}
	detail = requestJSON{}
	k.decode(specCall{method: "GET", path: "/v1/inbound/requests/" + tooLarge, want: 200}, &detail)
	if !detail.Truncated || detail.Refused != ReasonTooLarge {
		t.Fatalf("a request refused as too large: %+v", detail)
	}
	k.do(specCall{method: "GET", path: "/v1/inbound/requests/in_0_999999", want: 404})
	k.do(specCall{method: "GET", path: "/v1/inbound/requests/evt_1", want: 404, invalid: true})
	k.do(specCall{method: "GET", path: "/v1/inbound/requests/" + valid.ID, noAuth: true, want: 401, invalid: true})
	if r := k.do(specCall{method: "GET", path: "/v1/inbound/requests/" + valid.ID + "/body", want: 200}); string(r.body) != validBody {
		t.Fatalf("body %q", r.body)
	}
	k.do(specCall{method: "GET", path: "/v1/inbound/requests/in_0_999999/body", want: 404})
	k.do(specCall{method: "GET", path: "/v1/inbound/requests/" + valid.ID + "/body", noAuth: true, want: 401, invalid: true})

	// Replays.
	reverify := `{"action":"reverify","ids":["` + binary.ID + `"]}` // a refusal has no body to verify again
	var job ReplayJob
	r = k.decode(specCall{method: "POST", path: "/v1/inbound/replays", body: reverify, want: 202}, &job)
	if r.header.Get("Location") != "/v1/inbound/replays/"+job.ID {
		t.Fatalf("Location %q for job %s", r.header.Get("Location"), job.ID)
	}
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: reverify, want: 200})
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: reverify, header: textPlain, want: 415, invalid: true})
	var republish ReplayJob
	k.decode(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"republish","ids":["` + valid.ID + `"]}`,
		header: http.Header{"Idempotency-Key": {"k1"}}, want: 202}, &republish)
	// The same key for another request: refused, not answered with k1's job.
	r = k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"reverify","ids":["` + valid.ID + `"]}`,
		header: http.Header{"Idempotency-Key": {"k1"}}, want: 422})
	if !strings.Contains(string(r.body), "idempotency_key_reused") {
		t.Fatalf("a reused key answered %s, want the reason idempotency_key_reused", r.body)
	}
	var byRange ReplayJob
	k.decode(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"reverify","source":"std","status":"rejected","since":"` + since + `"}`, want: 202}, &byRange)
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"reverify"}`, want: 400, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"explode","ids":["` + valid.ID + `"]}`, want: 400, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"reverify","ids":["evt_1"]}`, want: 400, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"reverify","ids":["` + valid.ID + `"],"bogus":true}`, want: 400, field: "bogus", invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"reverify","since":"` + since + `","until":"2000-01-01T00:00:00Z"}`, want: 400})
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"reverify","since":"` + since + `","source":"nope"}`, want: 404})
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: reverify, noAuth: true, want: 401, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/replays", body: `{"action":"reverify","ids":["` + huge + `"]}`, want: 413, invalid: true})

	c := server(t, s)
	for _, id := range []string{job.ID, republish.ID, byRange.ID} {
		waitJob(t, s, c, id)
	}
	k.decode(specCall{method: "GET", path: "/v1/inbound/replays/" + job.ID, want: 200}, &job)
	if job.Status != jobs.StatusDone || job.Replayed != 1 || job.FinishedAt == nil {
		t.Fatalf("job %+v", job)
	}
	k.do(specCall{method: "GET", path: "/v1/inbound/replays/rp_missing", want: 404})
	k.do(specCall{method: "GET", path: "/v1/inbound/replays/" + job.ID, noAuth: true, want: 401, invalid: true})
	waitVerifier(t, s, "the replayed copies", decidedAtLeast(7)) // the range matches only refusals, which are skipped
	k.decode(specCall{method: "GET", path: "/v1/inbound/requests?job=" + job.ID, want: 200}, &page)
	if len(page.Items) != 1 || page.Items[0].ReplayOf != binary.ID || page.Items[0].Action != ActionReverify || page.Items[0].Reason != ReasonUnmapped {
		t.Fatalf("the copy's outcome: %+v", page.Items)
	}

	// A source with a capture token: its own path, the token's rotation.
	tokenPath := captureTokenCalls(t, k, s)

	// 503: a service whose Kafka clients and Redis are gone (stopped after
	// it read the sources).
	opts, err := redis.ParseURL(f.b.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	downRedis := redis.NewClient(opts)
	down := f.service(func(c *Config) { c.CaptureOnly, c.Redis, c.InstanceID = true, downRedis, "down" }, nil)
	testenv.Stop(t, down.Stop)
	_ = downRedis.Close()
	downURL := mountSpec(t, down)
	r = k.do(specCall{base: downURL, method: "POST", path: "/in/std", body: validBody, header: signed, noAuth: true, want: 503})
	if r.header.Get("Retry-After") == "" {
		t.Error("503 at the door without Retry-After")
	}
	k.do(specCall{base: downURL, method: "POST", path: "/v1/inbound/sources", body: `{"id":"new","kind":"github","tenant":"acme"}`, want: 503})
	k.do(specCall{base: downURL, method: "POST", path: tokenPath, body: validBody, header: signed, noAuth: true, want: 503})
	k.do(specCall{base: downURL, method: "POST", path: "/v1/inbound/sources/tok/capture-token/rotate", want: 503})

	// 429: a service whose address limit is one request.
	limited := f.service(func(c *Config) {
		c.CaptureOnly, c.InstanceID = true, "limited"
		c.RateLimits = RateLimits{PerAddress: 1e-9, PerAddressBurst: 1, PerSource: -1}
	}, nil)
	limitedURL := mountSpec(t, limited)
	k.do(specCall{base: limitedURL, method: "POST", path: "/in/nope", body: validBody, header: signed, noAuth: true, want: 404})
	r = k.do(specCall{base: limitedURL, method: "POST", path: "/in/nope", body: validBody, header: signed, noAuth: true, want: 429})
	if r.header.Get("Retry-After") == "" {
		t.Error("429 at the door without Retry-After")
	}
	k.do(specCall{base: limitedURL, method: "POST", path: tokenPath, body: validBody, header: signed, noAuth: true, want: 429})
	k.do(specCall{base: downURL, method: "PATCH", path: "/v1/inbound/sources/std", body: `{"tenant":"x"}`, want: 503})
	k.do(specCall{base: downURL, method: "DELETE", path: "/v1/inbound/sources/std", want: 503})
	k.do(specCall{base: downURL, method: "POST", path: "/v1/inbound/sources/small/secret/rotate", want: 503})
	k.do(specCall{base: downURL, method: "GET", path: "/v1/inbound/requests", want: 503})
	k.do(specCall{base: downURL, method: "GET", path: "/v1/inbound/requests/" + valid.ID, want: 503})
	k.do(specCall{base: downURL, method: "GET", path: "/v1/inbound/requests/" + valid.ID + "/body", want: 503})
	k.do(specCall{base: downURL, method: "POST", path: "/v1/inbound/replays", body: reverify, want: 503})
	k.do(specCall{base: downURL, method: "GET", path: "/v1/inbound/replays/" + job.ID, want: 503})

	// Every documented status was produced, but 500.
	for path, item := range doc.Paths.Map() {
		if !inboundSpecPath(path) {
			continue
		}
		for method, op := range item.Operations() {
			for status := range op.Responses.Map() {
				if key := method + " " + path + " " + status; status != "500" && !k.covered[key] {
					t.Errorf("%s: documented but never produced", key)
				}
			}
		}
	}
}

// captureTokenCalls exercises a source with a capture token through the
// spec: its capture path (202, 400, 401, 404, 413) and the token's
// rotation. It returns the source's capture path, signed with std's
// secret so that the 503 and 429 services can be called there too.
func captureTokenCalls(t *testing.T, k *contract, s *Service) string {
	t.Helper()
	first := NewCaptureToken()
	var tok sourceJSON
	k.decode(specCall{method: "POST", path: "/v1/inbound/sources", want: 201,
		body: `{"id":"tok","kind":"github","tenant":"acme","max_body_bytes":128,"capture_token":"` + first + `"}`}, &tok)
	if tok.CapturePath != "/in/tok/"+first || tok.CaptureToken != first || !tok.HasCaptureToken {
		t.Fatalf("created %+v", tok)
	}
	k.do(specCall{method: "POST", path: "/v1/inbound/sources", body: `{"id":"x","kind":"github","tenant":"acme","capture_token":"short"}`, want: 400, field: "capture_token", invalid: true})

	var rotated captureTokenJSON
	k.decode(specCall{method: "POST", path: "/v1/inbound/sources/tok/capture-token/rotate", want: 200}, &rotated)
	if rotated.PreviousCaptureToken != first || rotated.CapturePath != "/in/tok/"+rotated.CaptureToken {
		t.Fatalf("rotated %+v", rotated)
	}
	given := NewCaptureToken()
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/tok/capture-token/rotate", body: `{"capture_token":"` + given + `"}`, want: 200})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/tok/capture-token/rotate", body: `{"capture_token":"x"}`, want: 400, field: "capture_token", invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/nope/capture-token/rotate", want: 404})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/tok/capture-token/rotate", body: `{}`, header: textPlain, want: 415, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/tok/capture-token/rotate", noAuth: true, want: 401, invalid: true})
	k.do(specCall{method: "POST", path: "/v1/inbound/sources/tok/capture-token/rotate", body: `{"capture_token":"` + strings.Repeat("a", maxAdminBody) + `"}`, want: 413, invalid: true})
	var patched sourceJSON
	k.decode(specCall{method: "PATCH", path: "/v1/inbound/sources/tok", body: `{"previous_capture_token":""}`, want: 200}, &patched)
	if patched.CaptureToken != "" || patched.CapturePath != "/in/tok/{capture_token}" {
		t.Fatalf("PATCH shows %+v", patched)
	}
	var revealed secretsJSON
	k.decode(specCall{method: "GET", path: "/v1/inbound/sources/tok/secret", want: 200}, &revealed)
	if revealed.CaptureToken != given || revealed.PreviousCaptureToken != "" || revealed.CapturePath != "/in/tok/"+given {
		t.Fatalf("revealed %+v", revealed)
	}

	path := "/in/tok/" + given
	body := []byte(`{"repository":{"full_name":"acme/app"}}`)
	k.do(specCall{method: "POST", path: path, body: string(body), header: githubHeaders(tok.Secret, "d1", "push", body), noAuth: true, want: 202})
	k.do(specCall{method: "POST", path: path, body: string(body), header: githubHeaders("forged", "d2", "push", body), noAuth: true, want: 401})
	k.do(specCall{method: "POST", path: path, body: string(body), noAuth: true, want: 400})
	long := []byte(strings.Repeat("b", 200))
	k.do(specCall{method: "POST", path: path, body: string(long), header: githubHeaders(tok.Secret, "d3", "push", long), noAuth: true, want: 413})
	for _, wrong := range []string{"/in/tok", "/in/tok/" + first, "/in/tok/" + rotated.CaptureToken} {
		k.do(specCall{method: "POST", path: wrong, body: string(body), header: githubHeaders(tok.Secret, "d4", "push", body), noAuth: true, want: 404})
	}
	return path
}
