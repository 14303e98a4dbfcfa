package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestNewRequiresStoreAndPublisher(t *testing.T) {
	ok := Config{Endpoints: newFakeStore(), Publisher: &fakePublisher{}}
	for name, mutate := range map[string]func(*Config){
		"no store":     func(c *Config) { c.Endpoints = nil },
		"no publisher": func(c *Config) { c.Publisher = nil },
		"negative ttl": func(c *Config) { c.IdempotencyTTL = -time.Second },
		"negative max": func(c *Config) { c.MaxBodyBytes = -1 },
	} {
		cfg := ok
		mutate(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded, want an error", name)
		}
	}
	if _, err := New(ok); err != nil {
		t.Fatalf("minimal config: %v", err)
	}
}

func TestHealthz(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AdminToken = testToken })
	h.token = "" // probes need no token
	r := h.do("GET", "/healthz", "")
	wantStatus(t, r, http.StatusOK)
	wantJSONContent(t, r)
	if got := r.json(t)["status"]; got != "ok" {
		t.Fatalf("status = %v, want ok", got)
	}
}

func TestReadyz(t *testing.T) {
	var notReady error
	h := newHarness(t, func(c *Config) {
		c.AdminToken = testToken
		c.Ready = func(context.Context) error { return notReady }
	})
	h.token = ""
	wantStatus(t, h.do("GET", "/readyz", ""), http.StatusOK)

	// An internal error names hosts and addresses: it goes to the log,
	// never to whoever can reach the public probe.
	notReady = errors.New("kafka: dial tcp 10.1.2.3:9093: connect: connection refused")
	r := h.do("GET", "/readyz", "")
	wantStatus(t, r, http.StatusServiceUnavailable)
	if strings.Contains(string(r.body), "10.1.2.3") || strings.Contains(string(r.body), "dial") {
		t.Fatalf("/readyz echoes the internal error: %s", r.body)
	}
	if got := r.json(t)["error"]; got != "not ready" {
		t.Fatalf("error = %v, want the generic \"not ready\"", got)
	}
	if !strings.Contains(h.logs.String(), "10.1.2.3:9093") {
		t.Fatalf("the Ready error is not logged:\n%s", h.logs.String())
	}
}

func TestMetricsIsServedWithoutAuth(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.AdminToken = testToken
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("laneway_up 1\n"))
		})
	})
	h.token = ""
	r := h.do("GET", "/metrics", "")
	wantStatus(t, r, http.StatusOK)
	if string(r.body) != "laneway_up 1\n" {
		t.Fatalf("body = %q, want the metrics handler's output", r.body)
	}
}

func TestNoMetricsRouteWithoutHandler(t *testing.T) {
	h := newHarness(t, nil)
	wantStatus(t, h.do("GET", "/metrics", ""), http.StatusNotFound)
}

func TestV1RoutesRequireToken(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AdminToken = testToken })
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook"}`},
		{"GET", "/v1/endpoints", ""},
		{"GET", "/v1/endpoints/ep_1", ""},
		{"PATCH", "/v1/endpoints/ep_1", `{"max_concurrency":2}`},
		{"DELETE", "/v1/endpoints/ep_1", ""},
		{"POST", "/v1/events", `{"type":"t","tenant":"acme","entity":"e"}`},
	}
	for _, auth := range []string{"", "Bearer wrong-token", "Bearer " + testToken + "x", "Basic " + testToken, testToken} {
		for _, rt := range routes {
			r := h.do(rt.method, rt.path, rt.body, "Authorization", auth)
			if r.status != http.StatusUnauthorized {
				t.Fatalf("%s %s with Authorization %q: status %d, want 401", rt.method, rt.path, auth, r.status)
			}
			if got := r.json(t)["error"]; got != "missing or invalid bearer token" {
				t.Fatalf("error = %v", got)
			}
			if r.header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		}
	}
	if h.store.len() != 0 || len(h.pub.published()) != 0 {
		t.Fatal("an unauthenticated request changed state")
	}
	wantStatus(t, h.do("GET", "/v1/endpoints", ""), http.StatusOK)
	wantStatus(t, h.do("GET", "/v1/endpoints", "", "Authorization", "bearer "+testToken), http.StatusOK)
}

func TestNoTokenMeansNoAuth(t *testing.T) {
	h := newHarness(t, nil)
	wantStatus(t, h.do("GET", "/v1/endpoints", ""), http.StatusOK)
}

func TestUnknownRouteIsJSON404(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("GET", "/v1/nope", "")
	wantStatus(t, r, http.StatusNotFound)
	wantJSONContent(t, r)
	if got := r.json(t)["error"]; got != "not found" {
		t.Fatalf("error = %v", got)
	}
}

func TestWrongMethodIsJSON405(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("PUT", "/v1/endpoints/ep_1", `{}`)
	wantStatus(t, r, http.StatusMethodNotAllowed)
	wantJSONContent(t, r)
	if got := r.json(t)["error"]; got != "method not allowed" {
		t.Fatalf("error = %v", got)
	}
	allow := r.header.Get("Allow")
	for _, m := range []string{"GET", "PATCH", "DELETE"} {
		if !strings.Contains(allow, m) {
			t.Fatalf("Allow = %q, missing %s", allow, m)
		}
	}
}

func TestPanicBecomesLogged500(t *testing.T) {
	h := newHarness(t, nil)
	h.store.mu.Lock()
	h.store.listPanic = true
	h.store.mu.Unlock()
	r := h.do("GET", "/v1/endpoints", "")
	wantStatus(t, r, http.StatusInternalServerError)
	wantJSONContent(t, r)
	if got := r.json(t)["error"]; got != "internal error" {
		t.Fatalf("error = %v", got)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "handler panicked") || !strings.Contains(logs, "List exploded") {
		t.Fatalf("panic not logged: %s", logs)
	}
	if !strings.Contains(logs, `"status":500`) {
		t.Fatalf("access log lacks the 500: %s", logs)
	}
	h.store.mu.Lock()
	h.store.listPanic = false
	h.store.mu.Unlock()
	wantStatus(t, h.do("GET", "/v1/endpoints", ""), http.StatusOK)
}

func TestAccessLogAtDebugWithoutSecretsOrPayloads(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AdminToken = testToken })
	created := h.do("POST", "/v1/endpoints", `{"tenant":"acme","url":"https://example.com/hook"}`)
	wantStatus(t, created, http.StatusCreated)
	secret, _ := created.json(t)["secret"].(string)
	if secret == "" {
		t.Fatalf("create returned no secret: %s", created.body)
	}
	wantStatus(t, h.do("POST", "/v1/events", `{"type":"t","tenant":"acme","entity":"e","data":{"card":"4111-PAYLOAD"}}`), http.StatusAccepted)

	logs := h.logs.String()
	if !strings.Contains(logs, `"msg":"api: request"`) || !strings.Contains(logs, `"level":"DEBUG"`) ||
		!strings.Contains(logs, `"path":"/v1/endpoints"`) || !strings.Contains(logs, `"status":201`) {
		t.Fatalf("no Debug access log line for the create: %s", logs)
	}
	// A capture URL's last segment is a secret token (package inbound).
	captureToken := "tok3n-0123456789abcdef0123456789abcdef"
	h.do("POST", "/in/partner/"+captureToken, "")
	logs = h.logs.String()
	if !strings.Contains(logs, `"path":"/in/partner/{capture_token}"`) {
		t.Fatalf("no access log line for the capture URL: %s", logs)
	}
	for _, leak := range []string{secret, "4111-PAYLOAD", testToken, captureToken} {
		if strings.Contains(logs, leak) {
			t.Fatalf("logs contain %q: %s", leak, logs)
		}
	}
}
