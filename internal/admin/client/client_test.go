package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestRequestsCarryTokenAndJSON(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"id":"ev1","partition":3,"offset":42}`))
	}))
	defer srv.Close()
	c, err := New(srv.URL+"/", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.PublishEvent(context.Background(), json.RawMessage(`{"type":"x"}`), "key-1")
	if err != nil {
		t.Fatal(err)
	}
	if res.ID != "ev1" || res.Partition != 3 || res.Offset != 42 || !res.Duplicate || string(res.Raw) != `{"id":"ev1","partition":3,"offset":42}` {
		t.Errorf("result = %+v", res)
	}
	if got.URL.Path != "/v1/events" || got.Header.Get("Authorization") != "Bearer s3cret" ||
		got.Header.Get("Idempotency-Key") != "key-1" || got.Header.Get("Content-Type") != "application/json" || string(body) != `{"type":"x"}` {
		t.Errorf("request: %s %v %s", got.URL, got.Header, body)
	}
}

func TestQueryParameters(t *testing.T) {
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		_, _ = w.Write([]byte(`{"data":[],"next_cursor":"","scanned":0}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "")
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	if _, err := c.ListDead(context.Background(), DeadQuery{EndpointID: "ep_1", Since: since, Limit: 5, Cursor: "c/1"}); err != nil {
		t.Fatal(err)
	}
	if want := "cursor=c%2F1&endpoint_id=ep_1&limit=5&since=2026-01-02T02%3A04%3A05Z"; query != want {
		t.Errorf("query %q, want %q", query, want)
	}
}

func TestAPIErrorsKeepTheBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"max_concurrency: must be between 1 and 1000","field":"max_concurrency"}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "")
	_, err := c.CreateEndpoint(context.Background(), NewEndpoint{Tenant: "t", URL: "https://x", MaxConcurrency: -1})
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Field != "max_concurrency" {
		t.Fatalf("err = %#v", err)
	}
	if want := "API 400 Bad Request: max_concurrency: must be between 1 and 1000 (field: max_concurrency)"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}

func TestNonJSONErrorAndNoRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/endpoints/ep_1" {
			http.Redirect(w, r, "http://elsewhere.invalid/", http.StatusFound)
			return
		}
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "tok")
	_, err := c.GetEndpoint(context.Background(), "ep_1")
	var ae *APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusFound {
		t.Fatalf("a redirect must not be followed: %v", err)
	}
	_, err = c.Health(context.Background())
	if err == nil || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "bad gateway") {
		t.Fatalf("err = %v", err)
	}
}

func TestUnreachableAPI(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	c, _ := New(strings.TrimPrefix(addr, "http://"), "") // scheme added
	_, err := c.Health(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach the Laneway API at "+addr) {
		t.Fatalf("err = %v", err)
	}
	if _, err := New("ftp://x", ""); err == nil {
		t.Error("ftp:// accepted")
	}
}

func TestFeedTokenRequests(t *testing.T) {
	type request struct{ method, path, body string }
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, request{r.Method, r.URL.EscapedPath(), string(body)})
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodGet:
			_, _ = w.Write([]byte(`{"data":[{"id":"ft_1","created_at":"2026-12-02T01:00:00Z","expires_at":"2026-12-02T02:00:00Z"},{"id":"ft_2","created_at":"2026-12-02T01:30:00Z"}]}`))
		default:
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"ft_2","token":"lwf_abc","created_at":"2026-12-02T01:30:00Z"}`))
		}
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "admin")
	ctx := context.Background()
	tok, err := c.CreateFeedToken(ctx, "ep_1")
	if err != nil || tok.ID != "ft_2" || tok.Token != "lwf_abc" || tok.ExpiresAt != nil || len(tok.Raw) == 0 {
		t.Fatalf("CreateFeedToken = %+v, %v", tok, err)
	}
	l, err := c.ListFeedTokens(ctx, "ep_1")
	if err != nil || len(l.Data) != 2 || l.Data[0].ExpiresAt == nil || l.Data[1].ExpiresAt != nil || l.Data[0].Token != "" {
		t.Fatalf("ListFeedTokens = %+v, %v", l, err)
	}
	if _, err := c.RotateFeedToken(ctx, "ep_1", "ft_1", 90*time.Minute+time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RotateFeedToken(ctx, "ep_1", "ft/2", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.RevokeFeedToken(ctx, "ep_1", "ft_1"); err != nil {
		t.Fatal(err)
	}
	want := []request{
		{"POST", "/v1/endpoints/ep_1/feed-tokens", ""},
		{"GET", "/v1/endpoints/ep_1/feed-tokens", ""},
		{"POST", "/v1/endpoints/ep_1/feed-tokens/ft_1/rotate", `{"overlap_seconds":5401}`},
		{"POST", "/v1/endpoints/ep_1/feed-tokens/ft%2F2/rotate", ""},
		{"DELETE", "/v1/endpoints/ep_1/feed-tokens/ft_1", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("requests %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestPullEndpointModeAndFeedPosition(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body = string(b)
		_, _ = w.Write([]byte(`{"id":"ep_1","tenant":"acme","url":"","mode":"pull","feed":{"acked_cursor":"c1","start_cursor":"c0","end_cursor":"c9","lag":8,"oldest_unacked_age_seconds":2.5}}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "admin")
	ep, err := c.CreateEndpoint(context.Background(), NewEndpoint{Tenant: "acme", Mode: ModePull})
	if err != nil {
		t.Fatal(err)
	}
	if body != `{"tenant":"acme","mode":"pull"}` {
		t.Errorf("body %s, want no url", body)
	}
	want := FeedPosition{AckedCursor: "c1", StartCursor: "c0", EndCursor: "c9", Lag: 8, OldestUnackedAgeSeconds: 2.5}
	if ep.Mode != ModePull || ep.Feed == nil || *ep.Feed != want {
		t.Errorf("endpoint mode %q feed %+v, want pull %+v", ep.Mode, ep.Feed, want)
	}
}

// A batch endpoint's sizes go in the create and update bodies, only the
// non-zero ones, and come back on the endpoint.
func TestBatchEndpointBodies(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		_, _ = w.Write([]byte(`{"id":"ep_1","tenant":"acme","url":"https://x","mode":"batch","batch":{"max_events":50,"max_bytes":1048576,"max_wait_ms":1000}}`))
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "admin")
	ctx := context.Background()
	ep, err := c.CreateEndpoint(ctx, NewEndpoint{Tenant: "acme", URL: "https://x", Mode: ModeBatch, Batch: &BatchConfig{MaxEvents: 50}})
	if err != nil {
		t.Fatal(err)
	}
	if want := (BatchConfig{MaxEvents: 50, MaxBytes: 1 << 20, MaxWaitMS: 1000}); ep.Mode != ModeBatch || ep.Batch == nil || *ep.Batch != want {
		t.Errorf("endpoint mode %q batch %+v, want batch %+v", ep.Mode, ep.Batch, want)
	}
	if _, err := c.UpdateEndpoint(ctx, "ep_1", EndpointUpdate{Batch: &BatchConfig{MaxWaitMS: 250}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateEndpoint(ctx, NewEndpoint{Tenant: "acme", URL: "https://x"}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"tenant":"acme","url":"https://x","mode":"batch","batch":{"max_events":50}}`,
		`{"batch":{"max_wait_ms":250}}`,
		`{"tenant":"acme","url":"https://x"}`,
	}
	if len(bodies) != len(want) {
		t.Fatalf("bodies %q, want %q", bodies, want)
	}
	for i := range want {
		if bodies[i] != want[i] {
			t.Errorf("body %d = %s, want %s", i, bodies[i], want[i])
		}
	}
}

// Call sends what Do sends and decodes a 2xx answer into out: an answer
// without a body leaves out alone, one that is not JSON is an error, and
// any other status is an *APIError.
func TestCallDecodesTheAnswer(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Idempotency-Key")+" "+string(body))
		switch r.URL.Path {
		case "/created":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"ep_1","secret":"whsec_x"}`))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/text":
			_, _ = w.Write([]byte("not json"))
		default:
			http.Error(w, `{"error":"taken"}`, http.StatusConflict)
		}
	}))
	defer srv.Close()
	c, _ := New(srv.URL, "")
	ctx := context.Background()
	var out struct{ ID, Secret string }
	resp, err := c.Call(ctx, http.MethodPost, "/created", url.Values{"a": {"1"}}, map[string]any{"tenant": "t"}, http.Header{"Idempotency-Key": {"k1"}}, &out)
	if err != nil || resp.StatusCode != http.StatusCreated || out.ID != "ep_1" || out.Secret != "whsec_x" {
		t.Fatalf("Call = %+v, %v; out %+v", resp, err, out)
	}
	if _, err := c.Call(ctx, http.MethodDelete, "/empty", nil, nil, nil, &out); err != nil || out.ID != "ep_1" {
		t.Fatalf("Call of an empty answer = %v; out %+v", err, out)
	}
	if _, err := c.Call(ctx, http.MethodGet, "/text", nil, nil, nil, &out); err == nil || !strings.HasPrefix(err.Error(), "GET /text: decoding the response: ") {
		t.Fatalf("Call of a text answer = %v", err)
	}
	if _, err := c.Call(ctx, http.MethodGet, "/text", nil, nil, nil, nil); err != nil {
		t.Fatalf("Call without out = %v", err)
	}
	var ae *APIError
	if _, err := c.Call(ctx, http.MethodPost, "/taken", nil, nil, nil, &out); !errors.As(err, &ae) || ae.StatusCode != http.StatusConflict || ae.Message != "taken" {
		t.Fatalf("Call of a 409 = %v", err)
	}
	want := []string{`POST /created?a=1 k1 {"tenant":"t"}`, "DELETE /empty  ", "GET /text  ", "GET /text  ", "POST /taken  "}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
