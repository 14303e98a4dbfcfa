package deliver

import (
	"crypto/tls"
	"encoding/base64"
	"net"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/laneway/laneway/internal/plumbing/reqtarget"
)

// target is an endpoint URL parsed once for the wire: where to dial, what to
// send as Host and request-target, and the pool its connections share.
type target struct {
	addr   string      // host:port to dial (through the guard)
	host   string      // the Host header: the URL's host as written
	uri    string      // the request-target: path and query, escaped
	auth   string      // an Authorization value from the URL's userinfo, or ""
	tls    *tls.Config // nil for http
	poolID string      // scheme://addr: connections are shared per pool id
}

// parseTarget checks raw and splits it for the wire. Its errors never quote
// the URL, which may carry a token.
func parseTarget(raw string, base *tls.Config) (*target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, &RequestError{Reason: "invalid URL"}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &RequestError{Reason: "URL must be absolute http or https"}
	}
	host := u.Hostname()
	if !isASCII(host) {
		return nil, &RequestError{Reason: "URL host must be ASCII (use its punycode form)"}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	// The path comes escaped from url.URL, the query as written; escaping
	// both makes a request line that no URL can bend or break (a stored
	// one from before the API refused such URLs).
	t := &target{addr: net.JoinHostPort(host, port), host: u.Host, uri: reqtarget.Escape(u.RequestURI())}
	if u.User != nil {
		pass, _ := u.User.Password()
		t.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass))
	}
	if u.Scheme == "https" {
		t.tls = base.Clone()
		if t.tls.ServerName == "" {
			t.tls.ServerName = host
		}
	}
	t.poolID = u.Scheme + "://" + t.addr
	return t, nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// maxCachedTargets bounds the target cache; past it the cache starts
// afresh (a few thousand endpoints is the usual case, and a parse is cheap).
const maxCachedTargets = 10_000

// targetCache keeps parsed targets by URL, so an attempt does not parse its
// endpoint's URL again.
type targetCache struct {
	base *tls.Config
	m    sync.Map // URL → *target
	n    atomic.Int64
}

func (c *targetCache) get(raw string) (*target, error) {
	if t, ok := c.m.Load(raw); ok {
		return t.(*target), nil
	}
	t, err := parseTarget(raw, c.base)
	if err != nil {
		return nil, err
	}
	if c.n.Add(1) > maxCachedTargets {
		c.m.Clear()
		c.n.Store(1)
	}
	c.m.Store(raw, t)
	return t, nil
}
