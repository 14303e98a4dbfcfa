package api

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
)

// openAPISpec is the OpenAPI description of this API. It is written by hand
// and kept true by openapi_test.go, which checks it with an OpenAPI
// validator and validates real requests and responses against it.
//
//go:embed openapi.json
var openAPISpec []byte

// openAPIETag is a strong validator of openAPISpec: the document changes
// only with the binary.
var openAPIETag = func() string {
	sum := sha256.Sum256(openAPISpec)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}()

// OpenAPIRoute serves the API's OpenAPI document at GET /openapi.json,
// without authentication: it describes the API and holds no data. Mount it
// with Config.Routes.
func OpenAPIRoute() Route {
	return Route{Pattern: "GET /openapi.json", Handler: http.HandlerFunc(serveOpenAPI), Public: true}
}

// OpenAPISpec returns a copy of the OpenAPI document served at /openapi.json.
func OpenAPISpec() []byte { return append([]byte(nil), openAPISpec...) }

func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("ETag", openAPIETag)
	// no-cache: keep it, but revalidate, since a new deployment changes it
	// at the same URL; the ETag makes that a 304.
	h.Set("Cache-Control", "no-cache")
	if etagMatches(r.Header.Get("If-None-Match"), openAPIETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(openAPISpec)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPISpec) // a failed write means the client left
}

// etagMatches implements If-None-Match's weak comparison (RFC 9110, 13.1.2):
// any listed tag, with or without W/, or "*".
func etagMatches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
			return true
		}
	}
	return false
}
