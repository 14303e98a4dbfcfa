package app_test

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestPublicListenerServesTheFrontDoorOnly: with --public-addr the front
// door is there and only there; the API, console and metrics stay on the
// HTTP address.
func TestPublicListenerServesTheFrontDoorOnly(t *testing.T) {
	a := startApp(t, testenv.Embedded, func(c *app.Config) { c.PublicAddr = "127.0.0.1:0" })
	admin, public := "http://"+a.HTTPAddr(), "http://"+a.PublicAddr()
	secret := createGitHubSource(t, admin, "gh")
	body := []byte(`{"repository":{"full_name":"acme/app"}}`)

	for _, path := range []string{"/metrics", "/", "/v1/endpoints", "/v1/inbound/sources", "/openapi.json", "/healthz"} {
		if code := get(t, public+path); code != http.StatusNotFound {
			t.Errorf("public GET %s: %d, want 404", path, code)
		}
	}
	if code := get(t, admin+"/metrics"); code != http.StatusOK {
		t.Errorf("admin GET /metrics: %d", code)
	}
	if code := postGitHub(t, public+"/in/gh", secret, body, nil); code != http.StatusAccepted {
		t.Errorf("public POST /in/gh: %d, want 202", code)
	}
	if code := postGitHub(t, admin+"/in/gh", secret, body, nil); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Errorf("admin POST /in/gh: %d, want the door not served there", code)
	}
}

// TestMetricsOnAPublicDoorListenerHaveNoSourceIDs is the attack on a
// deployment without --public-addr whose API listens beyond loopback: an
// anonymous sender who reaches the door also reaches that listener's
// /metrics, whose series name every source that took a request, and with
// it the capture path. There /metrics needs the admin token.
func TestMetricsOnAPublicDoorListenerHaveNoSourceIDs(t *testing.T) {
	const token, source = "metrics-test-87cace9ef8b86db63ea9c49ab16d8af0", "gh-hidden-source-7f3a"
	a := startApp(t, testenv.Embedded, func(c *app.Config) { c.HTTPAddr, c.AdminToken = "0.0.0.0:0", token })
	_, port, err := net.SplitHostPort(a.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	base := "http://127.0.0.1:" + port
	secret := createGitHubSourceAs(t, base, token, source)
	if code := postGitHub(t, base+"/in/"+source, secret, []byte(`{"repository":{"full_name":"acme/app"}}`), nil); code != http.StatusAccepted {
		t.Fatalf("POST /in/%s: %d, want 202", source, code)
	}

	code, body := metricsAs(t, base, "")
	if code != http.StatusUnauthorized || strings.Contains(body, source) {
		t.Errorf("anonymous GET /metrics: %d, source id in it: %v; want 401 without it", code, strings.Contains(body, source))
	}
	code, body = metricsAs(t, base, token)
	if code != http.StatusOK || !strings.Contains(body, `source="`+source+`"`) {
		t.Errorf("GET /metrics with the admin token: %d, want 200 with the source's series", code)
	}
}

// metricsAs GETs base/metrics, with the admin token when one is given.
func metricsAs(t *testing.T, base, token string) (int, string) {
	t.Helper()
	resp := doAs(t, http.MethodGet, base+"/metrics", token, nil)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// doAs sends a request with the admin token (none when empty) and a JSON
// body (when not nil); the caller closes the response body.
func doAs(t *testing.T, method, url, token string, body io.Reader) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestServerLimitsCutTricklesAndHugeHeaders is the attack on the server:
// a sender that trickles its body is cut at ReadTimeout, and a 500 KB
// header is refused with 431 before anything is stored.
func TestServerLimitsCutTricklesAndHugeHeaders(t *testing.T) {
	a := startApp(t, testenv.Embedded, func(c *app.Config) { c.HTTPLimits.ReadTimeout = time.Second })
	base := "http://" + a.HTTPAddr()
	secret := createGitHubSource(t, base, "gh")

	huge := http.Header{"X-Padding": {strings.Repeat("h", 500<<10)}}
	body := []byte(`{"repository":{"full_name":"acme/app"}}`)
	if code := postGitHub(t, base+"/in/gh", secret, body, huge); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("500 KB header: %d, want 431", code)
	}
	if n := countRequests(t, base, "gh"); n != 0 {
		t.Errorf("%d requests stored after the 500 KB header, want 0", n)
	}

	t.Run("an idle keep-alive connection is closed after IdleTimeout", func(t *testing.T) {
		// A server of its own: ReadTimeout, when IdleTimeout is unset,
		// would bound the idle wait too. Here it keeps its 30 s default.
		a := startApp(t, testenv.Embedded, func(c *app.Config) { c.HTTPLimits.IdleTimeout = time.Second })
		secret := createGitHubSource(t, "http://"+a.HTTPAddr(), "gh")
		checkIdleConnectionClosed(t, a.HTTPAddr(), secret, 10*time.Second)
	})

	// Trickle: announce 100 KB, send a byte every 100 ms. The test's own
	// deadline (20 s) is far above the server's 1 s.
	conn, err := net.Dial("tcp", a.HTTPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /in/gh HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256=00\r\nContent-Length: 100000\r\n\r\n")
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_, _ = io.Copy(io.Discard, bufio.NewReader(conn)) // returns when the server closes
	}()
	deadline := time.After(20 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return
		case <-deadline:
			t.Fatal("a connection trickling its body was still open after 20 s (ReadTimeout 1 s)")
		case <-tick.C:
			_, _ = conn.Write([]byte("x")) // fails once the server has cut us; closed then follows
		}
	}
}

// checkIdleConnectionClosed sends one signed request to the door on a
// keep-alive connection, reads its answer, then idles: the server must
// close the connection within limit.
func checkIdleConnectionClosed(t *testing.T, addr, secret string, limit time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"repository":{"full_name":"acme/app"}}`
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	fmt.Fprintf(conn, "POST /in/gh HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: push\r\nX-Hub-Signature-256: sha256=%s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", hex.EncodeToString(mac.Sum(nil)), len(body), body)
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Close {
		t.Fatalf("POST /in/gh: %d (close %v), want 202 on a connection kept alive", resp.StatusCode, resp.Close)
	}
	idleFrom := time.Now()
	if err := conn.SetReadDeadline(idleFrom.Add(limit)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("after %s idle: %v, want the server to have closed the connection (EOF) within %s",
			time.Since(idleFrom).Round(time.Millisecond), err, limit)
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func createGitHubSource(t *testing.T, base, id string) string {
	t.Helper()
	return createGitHubSourceAs(t, base, "", id)
}

// createGitHubSourceAs creates a GitHub source with the admin token (none
// when empty) and returns its secret.
func createGitHubSourceAs(t *testing.T, base, token, id string) string {
	t.Helper()
	resp := doAs(t, http.MethodPost, base+"/v1/inbound/sources", token,
		strings.NewReader(`{"id":"`+id+`","kind":"github","tenant":"acme"}`))
	defer resp.Body.Close()
	var out struct{ Secret string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated || out.Secret == "" {
		t.Fatalf("create source: %d %v", resp.StatusCode, err)
	}
	return out.Secret
}

func postGitHub(t *testing.T, url, secret string, body []byte, extra http.Header) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("X-GitHub-Event", "push")
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func countRequests(t *testing.T, base, source string) int {
	t.Helper()
	resp, err := http.Get(base + "/v1/inbound/requests?source=" + source)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct{ Data []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	return len(page.Data)
}
