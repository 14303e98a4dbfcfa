package receiver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FeedError is an answer of the feed API that is neither a success nor a
// 410, or the failure to get an answer (StatusCode 0).
type FeedError struct {
	// StatusCode is the HTTP status; 0 when no answer came.
	StatusCode int
	// Message is the API's error message, or what went wrong.
	Message string
	// Field names the refused parameter of a 400 ("cursor", "limit", "wait").
	Field string
	// RetryAfter is the answer's Retry-After; 0 when it had none.
	RetryAfter time.Duration
	// Err is the network error when StatusCode is 0.
	Err error

	oldest string // a 410's oldest_cursor
}

func (e *FeedError) Error() string {
	if e.StatusCode == 0 {
		return "receiver: feed unreachable: " + e.Message
	}
	s := "receiver: feed answered " + strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode) + ": " + e.Message
	if e.Field != "" {
		s += " (field: " + e.Field + ")"
	}
	return s
}

func (e *FeedError) Unwrap() error { return e.Err }

// Transient reports whether retrying may succeed: no answer, 408, 429 or a
// 5xx other than 501 (a Laneway that serves no feeds). Run retries exactly
// these.
func (e *FeedError) Transient() bool {
	return e.StatusCode == 0 || e.StatusCode == http.StatusRequestTimeout ||
		e.StatusCode == http.StatusTooManyRequests || (e.StatusCode >= 500 && e.StatusCode != http.StatusNotImplemented)
}

// apiFeedError reads a non-2xx answer: the API's {"error","field"} body,
// with what the status means for a consumer.
func apiFeedError(endpointID string, resp *http.Response, raw []byte) *FeedError {
	var body struct {
		Error  string `json:"error"`
		Field  string `json:"field"`
		Oldest string `json:"oldest_cursor"`
	}
	if json.Unmarshal(raw, &body) != nil || body.Error == "" {
		body.Error = strings.TrimSpace(string(raw[:min(len(raw), 300)]))
	}
	e := &FeedError{StatusCode: resp.StatusCode, Message: body.Error, Field: body.Field, oldest: body.Oldest,
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		// Laneway answers an unknown endpoint as it does a wrong token,
		// so as not to tell which endpoints exist.
		e.Message += " (the consumer token is missing, wrong, revoked or expired, or endpoint " + endpointID + " does not exist)"
	case http.StatusNotFound:
		e.Message += " (no endpoint " + endpointID + ")"
	case http.StatusConflict:
		e.Message += " (endpoint " + endpointID + " is not a pull endpoint)"
	}
	return e
}

// retryAfter parses a Retry-After header: delay seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// CursorExpiredError says that a read's cursor is older than the feed's
// retention: the events between it and Oldest are gone. A consumer
// resynchronises from its source of truth, then starts again at Oldest.
type CursorExpiredError struct {
	// Cursor is the cursor read from ("" for the server's position).
	Cursor string
	// Oldest is the oldest position the feed still holds.
	Oldest string
}

func (e *CursorExpiredError) Error() string {
	cursor := e.Cursor
	if cursor == "" {
		cursor = "(the acknowledged position)"
	}
	return "receiver: feed cursor " + cursor + " is older than the feed's retention; the oldest retained cursor is " +
		e.Oldest + " (the events in between are gone)"
}
