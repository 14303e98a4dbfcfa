// Package console is Laneway's web console: one small page, served by the
// binary itself with its HTML, CSS and JavaScript embedded (no CDN, no
// external fonts, no build step). It lists the endpoints most behind first,
// with each one's mode and, for a pull endpoint, where its feed's consumer
// stands (for a batch endpoint, its batch sizes and how far its feed was
// sent), and lets an operator pause, resume and tune an endpoint, search and
// redrive dead letters, search accepted events by time range, and follow
// the webhooks taken by the inbound front door (sources, captured requests
// with their outcome, headers and body, re-verify and re-publish).
//
// The console holds no data and no credentials. Its JavaScript calls the
// JSON API under /v1 from the browser and, when the API answers 401, asks
// for the admin token, keeps it in sessionStorage and sends it as a Bearer
// token. The pages themselves show nothing without the API, so their routes
// are Public; mount them on the API's listener with api.Config.Routes:
//
//	api.Config{..., Routes: console.Routes()}
//
// The script is split by page: static/console.js (DOM helpers, the API
// client, the token, the router), then endpoints.js, search.js and
// inbound.js, classic deferred scripts that share one global scope and run
// in the order the page lists them.
//
// Every response carries a strict Content-Security-Policy (default-src
// 'self', no inline script or style). Assets are named in the page by a
// hash of their content, so they are cached for a year and a new binary is
// picked up at the next page load; the page itself is revalidated by ETag.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/laneway/laneway/internal/admin/api"
)

//go:embed static
var static embed.FS

// AssetPrefix is the path under which the assets are served.
const AssetPrefix = "/console/"

// CSP is the Content-Security-Policy of every console response.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Routes are the console's routes, all Public (see the package comment):
// GET / for the page and GET /console/ for its assets.
func Routes() []api.Route {
	h := Handler()
	return []api.Route{
		{Pattern: "GET /{$}", Handler: h, Public: true},
		{Pattern: "GET " + AssetPrefix, Handler: h, Public: true},
	}
}

// Handler serves the page at / and the assets under /console/, and 404
// for anything else.
func Handler() http.Handler { return handler }

var handler = mustLoad()

// asset is one file, ready to serve.
type asset struct {
	body, gz []byte // gz is nil when compressing does not pay
	ctype    string
	etag     string // quoted, of body
	version  string // short content hash, the ?v= of the page's links
}

type server struct {
	index  *asset
	assets map[string]*asset // by name under AssetPrefix
}

func mustLoad() *server {
	s, err := load(static)
	if err != nil {
		panic("console: " + err.Error()) // the embedded files are part of the build
	}
	return s
}

func load(fsys fs.FS) (*server, error) {
	s := &server{assets: map[string]*asset{}}
	entries, err := fs.ReadDir(fsys, "static")
	if err != nil {
		return nil, err
	}
	var index []byte
	for _, e := range entries {
		body, err := fs.ReadFile(fsys, "static/"+e.Name())
		if err != nil {
			return nil, err
		}
		if e.Name() == "index.html" {
			index = body
			continue
		}
		s.assets[e.Name()] = newAsset(e.Name(), body)
	}
	// Link each asset by content hash: the browser keeps it until the
	// binary serves different content.
	for name, a := range s.assets {
		index = bytes.ReplaceAll(index, []byte(`"`+AssetPrefix+name+`"`),
			[]byte(`"`+AssetPrefix+name+"?v="+a.version+`"`))
	}
	s.index = newAsset("index.html", index)
	return s, nil
}

func newAsset(name string, body []byte) *asset {
	sum := sha256.Sum256(body)
	a := &asset{body: body, etag: `"` + hex.EncodeToString(sum[:12]) + `"`, version: hex.EncodeToString(sum[:6])}
	a.ctype = mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) { // not left to the system's mime tables
	case ".html":
		a.ctype = "text/html; charset=utf-8"
	case ".css":
		a.ctype = "text/css; charset=utf-8"
	case ".js":
		a.ctype = "text/javascript; charset=utf-8"
	case ".svg":
		a.ctype = "image/svg+xml"
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(body)
	_ = zw.Close()
	if buf.Len() < len(body)*9/10 {
		a.gz = buf.Bytes()
	}
	return a
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/" {
		h.Set("Cache-Control", "no-cache")
		s.index.serve(w, r)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, AssetPrefix)
	a := s.assets[name]
	if !ok || a == nil {
		http.NotFound(w, r)
		return
	}
	if r.URL.Query().Get("v") == a.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	a.serve(w, r)
}

// serve writes the asset, gzipped when the client takes it, or 304 when the
// client's copy is current.
func (a *asset) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	body, etag := a.body, a.etag
	if a.gz != nil {
		h.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			body, etag = a.gz, strings.TrimSuffix(a.etag, `"`)+`-gz"`
			h.Set("Content-Encoding", "gzip")
		}
	}
	h.Set("ETag", etag)
	if matches(r.Header.Get("If-None-Match"), etag) {
		h.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// matches reports whether an If-None-Match header names etag (weak
// comparison, as RFC 9110 asks for If-None-Match).
func matches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}
