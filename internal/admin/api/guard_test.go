package api

import (
	"net/http"
	"strings"
	"testing"
)

const createBody = `{"tenant":"acme","url":"https://example.com/hooks","max_concurrency":4}`

// rawDo sends a request exactly as given: no token, no Content-Type unless
// listed in headers, and Host overridden by a "Host" pair.
func (h *harness) rawDo(method, path, body string, headers ...string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	return h.roundTrip(req)
}

// hostPort is the test server's host:port, what a browser sends as Host.
func (h *harness) hostPort() string { return strings.TrimPrefix(h.srv.URL, "http://") }

// TestTokenlessCrossSiteWritesAreRefused performs the cross-site request
// forgery a web page the operator visits can send to the tokenless loopback
// API: a fetch in no-cors mode or a form post, which a browser sends without
// a preflight when the Content-Type is absent or a form type. None may
// create an endpoint (whose response carries its secret).
func TestTokenlessCrossSiteWritesAreRefused(t *testing.T) {
	h := newHarness(t, nil)
	for name, headers := range map[string][]string{
		// fetch(url, {method: "POST", mode: "no-cors", body: new Blob([json])})
		// sends no Content-Type; a browser that strips Origin leaves nothing else.
		"no content type, no origin":   {},
		"no content type, evil origin": {"Origin", "https://evil.example"},
		"form post":                    {"Content-Type", "application/x-www-form-urlencoded", "Origin", "https://evil.example"},
		"text/plain":                   {"Content-Type", "text/plain", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"},
		"json from a foreign origin":   {"Content-Type", "application/json", "Origin", "https://evil.example"},
		"json, cross-site fetch":       {"Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"},
		"json from a sandboxed frame":  {"Content-Type", "application/json", "Origin", "null"},
		"json from another local port": {"Content-Type", "application/json", "Origin", "http://127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			r := h.rawDo("POST", "/v1/endpoints", createBody, headers...)
			if r.status < 400 {
				t.Fatalf("status = %d, want a refusal; body %s", r.status, r.body)
			}
			if strings.Contains(string(r.body), "whsec_") {
				t.Fatalf("refused response carries a secret: %s", r.body)
			}
			wantJSONContent(t, r)
			if r.json(t)["error"] == "" {
				t.Fatalf("refusal gives no reason: %s", r.body)
			}
		})
	}
	// The bodiless writes too: a form can pause an endpoint.
	r := h.rawDo("POST", "/v1/endpoints/ep_1/pause", "", "Content-Type", "application/x-www-form-urlencoded")
	if r.status != http.StatusUnsupportedMediaType {
		t.Fatalf("form POST to pause: status = %d, want 415; body %s", r.status, r.body)
	}
	if n := len(h.store.List()); n != 0 {
		t.Fatalf("store holds %d endpoints after the forged requests, want 0", n)
	}
}

// TestTokenlessDNSRebindingIsRefused performs DNS rebinding: the attacker's
// name resolves to 127.0.0.1, so the browser treats the API as the
// attacker's own origin and sends Host and Origin of that name. Neither a
// write nor a read of a secret may succeed.
func TestTokenlessDNSRebindingIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	created := h.rawDo("POST", "/v1/endpoints", createBody, "Content-Type", "application/json")
	wantStatus(t, created, http.StatusCreated)
	id, _ := created.json(t)["id"].(string)

	_, port, _ := strings.Cut(h.hostPort(), ":")
	evil := "rebind.evil.example:" + port
	for name, req := range map[string]struct{ method, path, body string }{
		"create":        {"POST", "/v1/endpoints", createBody},
		"reveal secret": {"GET", "/v1/endpoints/" + id + "/secret", ""},
		"list":          {"GET", "/v1/endpoints", ""},
	} {
		t.Run(name, func(t *testing.T) {
			r := h.rawDo(req.method, req.path, req.body,
				"Host", evil, "Origin", "http://"+evil, "Content-Type", "application/json", "Sec-Fetch-Site", "same-origin")
			wantStatus(t, r, http.StatusForbidden)
			if strings.Contains(string(r.body), "whsec_") {
				t.Fatalf("refused response carries a secret: %s", r.body)
			}
			if !strings.Contains(r.json(t)["error"].(string), "Host") {
				t.Fatalf("refusal does not name the Host: %s", r.body)
			}
		})
	}
	if n := len(h.store.List()); n != 1 {
		t.Fatalf("store holds %d endpoints, want the 1 created legitimately", n)
	}
}

// TestTokenlessMetricsRefuseAForeignHost: /metrics names endpoint and
// source ids; in tokenless loopback mode a web page using DNS rebinding
// read them as same-origin (#27, item 11). Without a token it answers only
// a loopback Host, like /v1; with a token it stays open to scrapers.
func TestTokenlessMetricsRefuseAForeignHost(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("laneway_endpoint_pending{endpoint=\"ep_secret_name\"} 1\n"))
	})
	tokenless := newHarness(t, func(c *Config) { c.Metrics = metrics })
	_, port, _ := strings.Cut(tokenless.hostPort(), ":")
	evil := "rebind.evil.example:" + port
	r := tokenless.rawDo("GET", "/metrics", "", "Host", evil)
	wantStatus(t, r, http.StatusForbidden)
	if strings.Contains(string(r.body), "ep_secret_name") {
		t.Fatalf("refused /metrics carries the series: %s", r.body)
	}
	wantStatus(t, tokenless.rawDo("GET", "/metrics", "", "Host", "localhost:"+port), http.StatusOK)

	withToken := newHarness(t, func(c *Config) { c.Metrics, c.AdminToken = metrics, testToken })
	wantStatus(t, withToken.rawDo("GET", "/metrics", "", "Host", evil), http.StatusOK)
}

// TestTokenlessLocalClientsWork: curl, the CLI and the console (same
// origin) keep working on every loopback spelling of the address.
func TestTokenlessLocalClientsWork(t *testing.T) {
	h := newHarness(t, nil)
	_, port, _ := strings.Cut(h.hostPort(), ":")
	for name, headers := range map[string][]string{
		"curl":                 {"Content-Type", "application/json"},
		"curl via localhost":   {"Host", "localhost:" + port, "Content-Type", "application/json"},
		"curl via ::1":         {"Host", "[::1]:" + port, "Content-Type", "application/json; charset=utf-8"},
		"console":              {"Origin", h.srv.URL, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"},
		"console on localhost": {"Host", "localhost:" + port, "Origin", "http://localhost:" + port, "Content-Type", "application/json"},
		"port-forwarded":       {"Host", "localhost:18080", "Origin", "http://localhost:18080", "Content-Type", "application/json"},
	} {
		t.Run(name, func(t *testing.T) {
			wantStatus(t, h.rawDo("POST", "/v1/endpoints", createBody, headers...), http.StatusCreated)
		})
	}
	id := h.store.List()[0].ID
	wantStatus(t, h.rawDo("POST", "/v1/endpoints/"+id+"/pause", "", "Content-Type", "application/json"), http.StatusOK)
	wantStatus(t, h.rawDo("GET", "/v1/endpoints/"+id+"/secret", ""), http.StatusOK)
}

// TestTokenGuardsLeaveTokenModeAlone: with a token, the bearer header is
// the proof (a browser never attaches it across sites), so requests from
// any Host and clients that omit the Content-Type keep working.
func TestTokenGuardsLeaveTokenModeAlone(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.AdminToken = testToken })
	r := h.rawDo("POST", "/v1/endpoints", createBody, "Host", "laneway.internal.example", "Authorization", "Bearer "+testToken)
	wantStatus(t, r, http.StatusCreated)
	r = h.rawDo("POST", "/v1/endpoints", createBody, "Host", "laneway.internal.example", "Content-Type", "application/json")
	wantStatus(t, r, http.StatusUnauthorized)
}

// TestSecurityHeaders: every JSON response carries nosniff, so a browser
// never renders an API answer as HTML; admin responses, secrets among
// them, are never stored by a cache.
func TestSecurityHeaders(t *testing.T) {
	h := newHarness(t, nil)
	created := h.do("POST", "/v1/endpoints", createBody)
	wantStatus(t, created, http.StatusCreated)
	id, _ := created.json(t)["id"].(string)
	rotated := h.do("POST", "/v1/endpoints/"+id+"/secret/rotate", "")
	wantStatus(t, rotated, http.StatusOK)
	revealed := h.do("GET", "/v1/endpoints/"+id+"/secret", "")
	wantStatus(t, revealed, http.StatusOK)
	for name, r := range map[string]response{"create": created, "rotate": rotated, "reveal": revealed} {
		if got := r.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control = %q, want no-store", name, got)
		}
	}
	for name, r := range map[string]response{
		"create": created, "reveal": revealed,
		"healthz":   h.do("GET", "/healthz", ""),
		"not found": h.do("GET", "/nowhere", ""),
		"refused":   h.rawDo("POST", "/v1/endpoints", createBody, "Host", "evil.example"),
		"invalid":   h.do("POST", "/v1/endpoints", `{"tenant":1}`),
	} {
		wantJSONContent(t, r)
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options = %q, want nosniff", name, got)
		}
	}
}

// TestTwoTokensDuringRotation: the new and the old token are both
// accepted; any other is refused.
func TestTwoTokensDuringRotation(t *testing.T) {
	const next = "next-admin-token-0123456789abcdef"
	h := newHarness(t, func(c *Config) { c.AdminToken = testToken; c.AdminTokens = []string{next} })
	for _, tok := range []string{testToken, next} {
		wantStatus(t, h.rawDo("GET", "/v1/endpoints", "", "Authorization", "Bearer "+tok), http.StatusOK)
	}
	for _, tok := range []string{"", testToken + "x", next[:len(next)-1]} {
		wantStatus(t, h.rawDo("GET", "/v1/endpoints", "", "Authorization", "Bearer "+tok), http.StatusUnauthorized)
	}
}
