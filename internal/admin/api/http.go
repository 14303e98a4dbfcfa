package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/laneway/laneway/internal/plumbing/httpjson"
	"github.com/laneway/laneway/internal/plumbing/statuswriter"
)

// requireToken refuses requests without an admin bearer token, or, when
// no token is configured, requests a web page could have sent
// (guardTokenless). Admin responses are never stored by caches: several
// carry endpoint secrets.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if len(s.tokenHashes) == 0 {
			if s.guardTokenless(w, r) {
				next.ServeHTTP(w, r)
			}
			return
		}
		if !s.validToken(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="laneway"`)
			httpjson.Error(w, http.StatusUnauthorized, "missing or invalid bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// validToken compares the presented token with every accepted one. Both
// sides are hashed before the constant-time compare so that the tokens'
// lengths do not leak either, and every token is compared so that the time
// taken does not tell which one matched.
func (s *Server) validToken(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for _, want := range s.tokenHashes {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

// noSniff stops browsers from guessing a response's type: an API answer
// that echoes user input must never be rendered as HTML.
func noSniff(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// jsonMisses answers unknown routes (404) and wrong methods (405) with JSON
// instead of the mux's plain text, keeping the mux's Allow header.
func jsonMisses(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r) // ServeHTTP, not h, so that PathValue is set
			return
		}
		probe := &statusProbe{header: w.Header()}
		h.ServeHTTP(probe, r)
		if probe.status == http.StatusMethodNotAllowed {
			httpjson.Error(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		httpjson.Error(w, http.StatusNotFound, "not found")
	})
}

// statusProbe records the status a handler chose and discards its body.
type statusProbe struct {
	header http.Header
	status int
}

func (p *statusProbe) Header() http.Header         { return p.header }
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(status int)      { p.status = status }

// recoverPanics turns a panicking handler into a logged 500 instead of a
// dropped connection. http.ErrAbortHandler keeps its meaning.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := statuswriter.Wrap(w)
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { // the documented way to abort a response
				panic(v)
			}
			s.logger.ErrorContext(r.Context(), "api: handler panicked",
				slog.String("method", r.Method), slog.String("path", logPath(r)),
				slog.Any("panic", v), slog.String("stack", string(debug.Stack())))
			if rw.Status == 0 { // too late for a status once one was sent
				httpjson.Error(rw, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(rw, r)
	})
}

// logPath is the path to log: a capture URL's token (/in/{source}/{token},
// a secret) is left out.
func logPath(r *http.Request) string {
	rest, ok := strings.CutPrefix(r.URL.Path, "/in/")
	if source, _, hasToken := strings.Cut(rest, "/"); ok && hasToken {
		return "/in/" + source + "/{capture_token}"
	}
	return r.URL.Path
}

// accessLog logs one Debug line per request: method, path, status, size and
// duration. Never headers, query strings or bodies, which may hold secrets.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.logger.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := s.now()
		rw := statuswriter.Wrap(w)
		next.ServeHTTP(rw, r)
		s.logger.LogAttrs(r.Context(), slog.LevelDebug, "api: request",
			slog.String("method", r.Method), slog.String("path", logPath(r)),
			slog.Int("status", rw.Status), slog.Int64("bytes", rw.Bytes),
			slog.Duration("duration", s.now().Sub(start)))
	})
}
