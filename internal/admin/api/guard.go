package api

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// Without an admin token the API trusts whoever can reach it, which
// app.Start restricts to loopback. A loopback listener is still reachable
// from the operator's browser, and so from any web page it shows: a page can
// send a cross-site POST (a form, or fetch in no-cors mode, neither of which
// asks the API first), and by DNS rebinding it can make its own name resolve
// to 127.0.0.1 and then read the answers as same-origin. The checks below
// refuse both while leaving curl, the CLI and the console (same origin)
// alone.

// guardTokenless answers the request with a refusal and returns false when
// it could come from a web page rather than from the operator.
func (s *Server) guardTokenless(w http.ResponseWriter, r *http.Request) bool {
	if !guardHost(w, r) {
		return false
	}
	if err := s.sameOrigin.Check(r); err != nil {
		httpjson.Error(w, http.StatusForbidden, "cross-origin request refused: without an admin token "+
			"only same-origin pages (the console) may write; "+err.Error())
		return false
	}
	if ct := r.Header.Get("Content-Type"); r.Method == http.MethodPost && (ct == "" || !httpjson.IsJSON(ct)) {
		// POST is the one write a browser sends cross-site without asking
		// first (a CORS preflight, which this API never grants), and only
		// with no Content-Type or a form or text one: a second line of
		// defence for browsers that send no Origin.
		httpjson.Error(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json: "+
			"without an admin token every POST must declare a JSON body, even an empty one")
		return false
	}
	return true
}

// guardHost refuses a request whose Host is not a loopback name. DNS
// rebinding: the browser sends the attacker's name as Host. No name but
// "localhost" can be trusted to mean this machine.
func guardHost(w http.ResponseWriter, r *http.Request) bool {
	if loopbackHost(r.Host) {
		return true
	}
	httpjson.Error(w, http.StatusForbidden, "Host "+quoteHost(r.Host)+" is not a loopback address: "+
		"without an admin token the API only answers requests addressed to 127.0.0.1, [::1] or localhost")
	return false
}

// tokenlessHostOnly guards a route that needs no token but names what a
// web page must not learn (/metrics: endpoint and source ids): without an
// admin token, only a loopback Host is answered, as on /v1; with one the
// route stays open, for scrapers.
func (s *Server) tokenlessHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.tokenHashes) == 0 && !guardHost(w, r) {
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost accepts a Host header naming this machine: a loopback IP
// literal or "localhost", with any port (kubectl port-forward and ssh -L
// change the port, not the name).
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// quoteHost quotes a client-supplied Host for an error message, cut short.
func quoteHost(h string) string {
	const limit = 100
	if len(h) > limit {
		h = h[:limit]
	}
	return strconv.Quote(h)
}
