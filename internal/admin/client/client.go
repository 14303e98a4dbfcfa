// Package client is a small typed client of Laneway's HTTP API, used by the
// `laneway` command's subcommands and the demo, and by the benchmark and the
// chaos harness.
//
// Every method takes a context and returns the decoded response; responses
// that the CLI may print verbatim also keep the API's JSON in Raw. A non-2xx
// answer is returned as an *APIError carrying the API's error body.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds one request unless WithTimeout or WithHTTPClient says
// otherwise.
const DefaultTimeout = 30 * time.Second

// maxResponseBytes caps what is read of one response (a page of 1,000 dead
// letters with payloads is well below it).
const maxResponseBytes = 64 << 20

// Client calls one Laneway API. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	token     string
	http      *http.Client
	userAgent string
}

// Option changes a Client.
type Option func(*Client)

// WithTimeout bounds each request (connect, send, whole response).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.http.Timeout = d } }

// WithHTTPClient replaces the underlying HTTP client.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client of the API at base (e.g. "http://127.0.0.1:8080"),
// sending token as a Bearer token when it is not empty.
func New(base, token string, opts ...Option) (*Client, error) {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("api address %q: %w", base, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api address %q: want http(s)://host:port", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	c := &Client{
		base: u, token: token, userAgent: "laneway-cli",
		http: &http.Client{
			Timeout: DefaultTimeout,
			// The API never redirects; following one could send the token elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Base is the API address, without a trailing slash.
func (c *Client) Base() string { return c.base.String() }

// APIError is a non-2xx answer. Message, Field and Reason come from the API's
// JSON error body ({"error","field","reason"}); Body is the raw body.
type APIError struct {
	StatusCode int
	Status     string
	Message    string
	Field      string
	Reason     string
	Body       []byte
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = strings.TrimSpace(string(e.Body))
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
	}
	if msg == "" {
		msg = "no error message"
	}
	s := "API " + e.Status + ": " + msg
	if e.Field != "" {
		s += " (field: " + e.Field + ")"
	}
	if e.Reason != "" && !strings.Contains(msg, e.Reason) {
		s += " (reason: " + e.Reason + ")"
	}
	return s
}

// IsNotFound reports whether err is the API's 404.
func IsNotFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound
}

// Response is a raw API answer.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// Do sends one request: path is escaped already (pathID), body, when not
// nil, is sent as JSON (a json.RawMessage or []byte verbatim). A non-2xx
// answer is an *APIError.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body any, header http.Header) (*Response, error) {
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return nil, fmt.Errorf("request path %q: %w", path, err)
	}
	u := *c.base
	// RawPath keeps an escaped "/" of an id from being escaped again.
	u.RawPath = u.EscapedPath() + path
	u.Path += unescaped
	if len(query) > 0 {
		u.RawQuery = query.Encode()
	}
	var rd io.Reader
	if body != nil {
		var b []byte
		switch v := body.(type) {
		case json.RawMessage:
			b = v
		case []byte:
			b = v
		default:
			var err error
			if b, err = json.Marshal(body); err != nil {
				return nil, fmt.Errorf("encode request: %w", err)
			}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	// Every POST declares JSON, even without a body: a tokenless Laneway
	// refuses POSTs a web page could forge, which cannot carry this type.
	if body != nil || method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, ctxErr)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its text repeats the whole URL
		}
		return nil, fmt.Errorf("%s %s: cannot reach the Laneway API at %s: %w", method, path, c.Base(), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &APIError{StatusCode: resp.StatusCode, Status: resp.Status, Body: raw}
		var eb struct {
			Error  string `json:"error"`
			Field  string `json:"field"`
			Reason string `json:"reason"`
		}
		if json.Unmarshal(raw, &eb) == nil {
			ae.Message, ae.Field, ae.Reason = eb.Error, eb.Field, eb.Reason
		}
		return nil, ae
	}
	return &Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}

// Call sends a request as Do does and decodes a 2xx JSON answer into out
// (unless out is nil or the answer has no body), for a call the typed
// methods do not cover.
func (c *Client) Call(ctx context.Context, method, path string, query url.Values, body any, header http.Header, out any) (*Response, error) {
	resp, err := c.Do(ctx, method, path, query, body, header)
	if err != nil {
		return nil, err
	}
	if out != nil && len(bytes.TrimSpace(resp.Body)) > 0 {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return nil, fmt.Errorf("%s %s: decoding the response: %w", method, path, err)
		}
	}
	return resp, nil
}

// rawJSON keeps the API's JSON of a response in Raw, for the CLI to print
// verbatim; the response types that may be printed embed it.
type rawJSON struct {
	Raw json.RawMessage `json:"-"`
}

func (r *rawJSON) keepRaw(raw json.RawMessage) { r.Raw = raw }

// rawKeeper is a response type (a pointer to T) that embeds rawJSON.
type rawKeeper[T any] interface {
	*T
	keepRaw(raw json.RawMessage)
}

// fetch sends a request and decodes its 2xx answer into a T that keeps the
// API's JSON as well.
func fetch[T any, P rawKeeper[T]](ctx context.Context, c *Client, method, path string, query url.Values, body any) (T, error) {
	out, _, err := fetchResponse[T, P](ctx, c, method, path, query, body, nil)
	return out, err
}

// fetchResponse is fetch with request headers, answering the response too
// (for its status and headers). On an error the value is zero.
func fetchResponse[T any, P rawKeeper[T]](ctx context.Context, c *Client, method, path string, query url.Values, body any, header http.Header) (T, *Response, error) {
	var out T
	resp, err := c.Call(ctx, method, path, query, body, header, &out)
	if err != nil {
		var zero T
		return zero, nil, err
	}
	P(&out).keepRaw(json.RawMessage(resp.Body))
	return out, resp, nil
}

// setSearch sets the parameters every time-range search shares.
func setSearch(q url.Values, since, until time.Time, cursor string, limit int) {
	setTime(q, "since", since)
	setTime(q, "until", until)
	setString(q, "cursor", cursor)
	setInt(q, "limit", limit)
}

func setTime(q url.Values, key string, t time.Time) {
	if !t.IsZero() {
		q.Set(key, t.UTC().Format(time.RFC3339Nano))
	}
}

func setInt(q url.Values, key string, n int) {
	if n > 0 {
		q.Set(key, strconv.Itoa(n))
	}
}

func setString(q url.Values, key, v string) {
	if v != "" {
		q.Set(key, v)
	}
}

func pathID(id string) string { return url.PathEscape(id) }
