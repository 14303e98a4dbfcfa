package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const batchEndpointJSON = `{"id":"ep_b","tenant":"acme","url":"https://example.com/b","event_types":[],"max_concurrency":4,"payload":"full","mode":"batch",` +
	`"batch":{"max_events":50,"max_bytes":1048576,"max_wait_ms":1},` +
	`"status":"active","paused":false,"disabled_reason":"","created_at":"2026-12-02T01:00:00Z","updated_at":"2026-12-02T01:00:00Z"`

// batchAPI answers the endpoint routes for a batch endpoint ep_b, and
// refuses batch sizes for the push endpoint ep_push as the API does. It
// records the requests it gets.
type batchAPI struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []seen
}

func newBatchAPI(t *testing.T) *batchAPI {
	f := &batchAPI{}
	mux := http.NewServeMux()
	reply := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}
	mux.Handle("POST /v1/endpoints", reply(201, batchEndpointJSON+`,"secret":"whsec_x"}`))
	mux.Handle("GET /v1/endpoints", reply(200, `{"data":[`+batchEndpointJSON+`}]}`))
	mux.Handle("GET /v1/endpoints/ep_b", reply(200, batchEndpointJSON+`}`))
	mux.Handle("PATCH /v1/endpoints/ep_b", reply(200, batchEndpointJSON+`}`))
	mux.Handle("PATCH /v1/endpoints/ep_push", reply(400, `{"error":"batch: is only for endpoints of mode \"batch\"","field":"batch"}`))
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, seen{method: r.Method, path: r.URL.Path, body: string(body)})
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *batchAPI) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

func wantRequests(t *testing.T, got, want []seen) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("requests %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestEndpointsCreateModeBatch(t *testing.T) {
	f := newBatchAPI(t)
	cli := newCLI(t, f.srv.URL)
	out := cli.ok("endpoints", "create", "--tenant", "acme", "--url", "https://example.com/b", "--mode", "batch",
		"--batch-max-events", "50", "--batch-max-bytes", "2048", "--batch-max-wait", "0")
	mustContain(t, out, "mode", "batch", "batch:", "max_events", "50", "max_bytes", "1048576", "max_wait", "1ms", "Keep the secret")
	cli.ok("endpoints", "create", "--tenant", "acme", "--url", "https://example.com/b", "--mode", "batch", "--batch-max-wait", "1.5s")
	cli.ok("endpoints", "create", "--tenant", "acme", "--url", "https://example.com/b", "--mode", "batch")

	for args, want := range map[string]string{
		"--tenant acme --url https://x --batch-max-events 5":                 "are for --mode batch",
		"--tenant acme --url https://x --mode push --batch-max-wait 1s":      "are for --mode batch",
		"--tenant acme --mode pull --batch-max-bytes 4096":                   "are for --mode batch",
		"--tenant acme --mode batch":                                         "--tenant and --url are required",
		"--url https://x --mode batch":                                       "--tenant and --url are required",
		"--tenant acme --url https://x --mode batch --batch-max-events 0":    "--batch-max-events must be between 1 and 1000",
		"--tenant acme --url https://x --mode batch --batch-max-bytes 0":     "--batch-max-bytes must be between 1024 and 16777216",
		"--tenant acme --url https://x --mode batch --batch-max-wait 1500us": "--batch-max-wait must be whole milliseconds",
		"--tenant acme --url https://x --mode batch --batch-max-wait -1s":    "batch-max-wait",
		"--tenant acme --url https://x --mode batch --batch-max-events lots": "batch-max-events",
		"--tenant acme --url https://x --mode stream":                        `--mode must be push, pull or batch, not "stream"`,
	} {
		mustContain(t, cli.fails(append([]string{"endpoints", "create"}, strings.Fields(args)...)...), want)
	}

	wantRequests(t, f.requests(), []seen{
		{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com/b","mode":"batch","batch":{"max_events":50,"max_bytes":2048,"max_wait_ms":1}}`},
		{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com/b","mode":"batch","batch":{"max_wait_ms":1500}}`},
		{method: "POST", path: "/v1/endpoints", body: `{"tenant":"acme","url":"https://example.com/b","mode":"batch"}`},
	})
}

func TestEndpointsGetAndUpdateBatch(t *testing.T) {
	f := newBatchAPI(t)
	cli := newCLI(t, f.srv.URL)
	out := cli.ok("endpoints", "get", "ep_b")
	mustContain(t, out, "mode", "batch", "url", "https://example.com/b", "batch:", "max_events", "50", "max_bytes", "1048576", "max_wait", "1ms")
	var ep struct {
		Batch struct {
			MaxEvents int `json:"max_events"`
		}
	}
	cli.jsonOf(&ep, "endpoints", "get", "ep_b")
	if ep.Batch.MaxEvents != 50 {
		t.Fatalf("get -o json batch = %+v", ep.Batch)
	}
	mustContain(t, cli.ok("endpoints", "list"), "MODE", "batch")

	mustContain(t, cli.ok("endpoints", "update", "ep_b", "--batch-max-bytes", "4096", "--batch-max-wait", "250ms"), "batch:")
	cli.ok("endpoints", "update", "ep_b", "--max-concurrency", "2")
	mustContain(t, cli.fails("endpoints", "update", "ep_push", "--batch-max-events", "10"), "(field: batch)")
	mustContain(t, cli.fails("endpoints", "update", "ep_b", "--batch-max-events", "0"), "--batch-max-events must be between 1 and 1000")
	mustContain(t, cli.fails("endpoints", "update", "ep_b"), "nothing to change", "--batch-max-events")

	wantRequests(t, f.requests(), []seen{
		{method: "GET", path: "/v1/endpoints/ep_b"},
		{method: "GET", path: "/v1/endpoints/ep_b"},
		{method: "GET", path: "/v1/endpoints"},
		{method: "PATCH", path: "/v1/endpoints/ep_b", body: `{"batch":{"max_bytes":4096,"max_wait_ms":250}}`},
		{method: "PATCH", path: "/v1/endpoints/ep_b", body: `{"max_concurrency":2}`},
		{method: "PATCH", path: "/v1/endpoints/ep_push", body: `{"batch":{"max_events":10}}`},
	})
}
