package console

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
)

func get(t *testing.T, h http.Handler, target string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPageLoadsEveryScript checks that the page runs every script under
// static, console.js (the helpers and the router) first: a script left
// out would leave its pages undefined.
func TestPageLoadsEveryScript(t *testing.T) {
	entries, err := fs.ReadDir(static, "static")
	if err != nil {
		t.Fatal(err)
	}
	var scripts []string
	for _, e := range entries {
		if path.Ext(e.Name()) == ".js" {
			scripts = append(scripts, e.Name())
		}
	}
	page := body(t, get(t, Handler(), "/"))
	var loaded []string
	for _, m := range regexp.MustCompile(`<script src="/console/([a-z]+\.js)\?v=[0-9a-f]{12}" defer></script>`).FindAllStringSubmatch(page, -1) {
		loaded = append(loaded, m[1])
	}
	if len(loaded) == 0 || loaded[0] != "console.js" {
		t.Fatalf("the page loads %v, want console.js first", loaded)
	}
	slices.Sort(loaded)
	if !slices.Equal(loaded, scripts) {
		t.Fatalf("the page loads %v (sorted), want every script under static: %v", loaded, scripts)
	}
}

func TestPageLinksAssetsByContentHash(t *testing.T) {
	resp := get(t, Handler(), "/")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d", resp.StatusCode)
	}
	page := body(t, resp)
	for _, h := range []struct{ name, want string }{
		{"Content-Type", "text/html; charset=utf-8"},
		{"Cache-Control", "no-cache"},
		{"Content-Security-Policy", CSP},
		{"X-Content-Type-Options", "nosniff"},
		{"X-Frame-Options", "DENY"},
	} {
		if got := resp.Header.Get(h.name); got != h.want {
			t.Errorf("GET / %s = %q, want %q", h.name, got, h.want)
		}
	}
	if !strings.Contains(CSP, "default-src 'self'") || strings.Contains(CSP, "unsafe") {
		t.Errorf("CSP is not strict: %s", CSP)
	}
	links := regexp.MustCompile(`"/console/([a-z.]+)\?v=([0-9a-f]{12})"`).FindAllStringSubmatch(page, -1)
	if len(links) < 3 {
		t.Fatalf("page links %d hashed assets, want the script, the stylesheet and the icon:\n%s", len(links), page)
	}
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
	for _, l := range links {
		name, version := l[1], l[2]
		resp := get(t, Handler(), "/console/"+name+"?v="+version)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", name, resp.StatusCode)
		}
		ext := name[strings.LastIndex(name, "."):]
		if got := resp.Header.Get("Content-Type"); got != types[ext] {
			t.Errorf("%s Content-Type = %q, want %q", name, got, types[ext])
		}
		if got := resp.Header.Get("Cache-Control"); got != "public, max-age=31536000, immutable" {
			t.Errorf("%s with its hash: Cache-Control = %q", name, got)
		}
		if got := get(t, Handler(), "/console/"+name+"?v=stale").Header.Get("Cache-Control"); got != "no-cache" {
			t.Errorf("%s with another hash: Cache-Control = %q, want no-cache", name, got)
		}
		if resp.Header.Get("Content-Security-Policy") != CSP {
			t.Errorf("%s has no CSP", name)
		}
	}
}

func TestETagAndGzip(t *testing.T) {
	plain := get(t, Handler(), "/console/console.js")
	etag := plain.Header.Get("ETag")
	js := body(t, plain)
	if etag == "" || plain.Header.Get("Content-Encoding") != "" || !strings.Contains(js, "use strict") {
		t.Fatalf("plain GET: etag %q, encoding %q", etag, plain.Header.Get("Content-Encoding"))
	}
	if resp := get(t, Handler(), "/console/console.js", "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || body(t, resp) != "" {
		t.Errorf("If-None-Match with the current ETag: %d, want 304 without a body", resp.StatusCode)
	}
	if resp := get(t, Handler(), "/console/console.js", "If-None-Match", `"old"`); resp.StatusCode != http.StatusOK {
		t.Errorf("If-None-Match with another ETag: %d, want 200", resp.StatusCode)
	}
	gz := get(t, Handler(), "/console/console.js", "Accept-Encoding", "br, gzip")
	if gz.Header.Get("Content-Encoding") != "gzip" || gz.Header.Get("ETag") == etag || gz.Header.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("gzip GET: encoding %q, etag %q, vary %q", gz.Header.Get("Content-Encoding"), gz.Header.Get("ETag"), gz.Header.Get("Vary"))
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	unzipped, _ := io.ReadAll(zr)
	if !bytes.Equal(unzipped, []byte(js)) {
		t.Error("gzipped script differs from the plain one")
	}
	if got := get(t, Handler(), "/console/console.js", "Accept-Encoding", "gzip;q=0").Header.Get("Content-Encoding"); got != "" {
		t.Errorf("gzip;q=0 got Content-Encoding %q", got)
	}
}

func TestUnknownPathsAndMethods(t *testing.T) {
	for _, p := range []string{"/console/", "/console/nope.js", "/console/../console.go", "/index.html", "/console/index.html"} {
		if resp := get(t, Handler(), p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /: %d, want 405", rec.Code)
	}
}

// TestStaticFilesStaySafe guards the rules the CSP and the review rely on:
// no inline script or style, no external resource, no HTML built from
// strings.
func TestStaticFilesStaySafe(t *testing.T) {
	for name, a := range handler.assets {
		text := string(a.body)
		for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s uses %s", name, bad)
			}
		}
		if m := regexp.MustCompile(`(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`).FindString(text); m != "" && !strings.Contains(m, "www.w3.org") {
			t.Errorf("%s loads something from elsewhere: %s", name, m)
		}
	}
	page := string(handler.index.body)
	for _, bad := range []string{"<style", " style=", "<script>", " onclick=", " onload=", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html contains %q", bad)
		}
	}
}

// TestMountsOnTheAPI mounts Routes on a real api.Server with an admin
// token: the page and its assets are public, the API is not, and the
// patterns do not clash with the API's own.
func TestMountsOnTheAPI(t *testing.T) {
	srv, err := api.New(api.Config{
		Endpoints: noEndpoints{}, Publisher: noPublisher{}, AdminToken: "s3cret", Routes: Routes(),
	})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	if resp := get(t, h, "/"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET / through the API: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp := get(t, h, "/console/console.css"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /console/console.css through the API: %d", resp.StatusCode)
	}
	if resp := get(t, h, "/v1/endpoints"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/endpoints without the token: %d, want 401", resp.StatusCode)
	}
	if resp := get(t, h, "/v1/endpoints", "Authorization", "Bearer s3cret"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/endpoints with the token: %d, want 200", resp.StatusCode)
	}
	if resp := get(t, h, "/nope"); resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("GET /nope: %d %s, want the API's JSON 404", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

type noEndpoints struct{}

func (noEndpoints) Get(string) (endpoint.Endpoint, bool)         { return endpoint.Endpoint{}, false }
func (noEndpoints) List() []endpoint.Endpoint                    { return nil }
func (noEndpoints) Put(context.Context, endpoint.Endpoint) error { return nil }
func (noEndpoints) Delete(context.Context, string) error         { return nil }

type noPublisher struct{}

func (noPublisher) Publish(context.Context, event.Envelope) (int32, int64, error) { return 0, 0, nil }
