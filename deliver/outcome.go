package deliver

import (
	"errors"
	"net/http"
	"strconv"
	"time"
)

// StatusError is a non-2xx, non-3xx response.
type StatusError struct {
	Code int
	// Body is the start of the response body, at most Config.MaxErrorBody
	// bytes: the receiver's own words, kept for last_error.
	Body string
}

func (e *StatusError) Error() string {
	msg := "deliver: HTTP " + statusText(e.Code)
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// RedirectError is a 3xx response. Redirects are never followed.
type RedirectError struct {
	Code     int
	Location string // capped at Config.MaxErrorBody bytes
}

func (e *RedirectError) Error() string {
	msg := "deliver: HTTP " + statusText(e.Code) + " (redirects are not followed)"
	if e.Location != "" {
		msg += " to " + e.Location
	}
	return msg
}

// TimeoutError is an attempt that got no response headers in time.
type TimeoutError struct {
	// After is the configured Timeout. The caller's context may have ended
	// the attempt sooner.
	After time.Duration
}

func (e *TimeoutError) Error() string {
	return "deliver: no response within " + e.After.String()
}

// Timeout reports true, like net.Error.
func (e *TimeoutError) Timeout() bool { return true }

// TransportError is a failure to exchange the request and response: DNS,
// connection refused or reset, TLS, a malformed response.
type TransportError struct {
	Err error // the underlying error, without the URL
}

func (e *TransportError) Error() string { return "deliver: " + e.Err.Error() }

func (e *TransportError) Unwrap() error { return e.Err }

// RequestError is a request that could not be built: a bad URL, no signer.
// It needs a configuration fix, so it is retried like a blocked target.
type RequestError struct {
	Reason string // never quotes the URL
}

func (e *RequestError) Error() string { return "deliver: bad request: " + e.Reason }

// MessageError is a request its own message makes impossible to send: a
// webhook-id that is empty or holds control characters. No receiver and no
// configuration can fix it, so it is dead at once and says nothing about the
// endpoint's health.
type MessageError struct {
	Reason string
}

func (e *MessageError) Error() string { return "deliver: unsendable message: " + e.Reason }

// FeedError is a pull endpoint's attempt that could not append to its
// feed (a broker unavailable, the feed's topic missing). It is retried.
type FeedError struct {
	Err error
}

func (e *FeedError) Error() string { return "deliver: append to the feed: " + e.Err.Error() }

func (e *FeedError) Unwrap() error { return e.Err }

// CanceledError is an attempt the caller abandoned by canceling its context,
// typically at shutdown or on partition loss. It says nothing about the
// endpoint; callers may choose not to count it as an attempt.
type CanceledError struct {
	Cause error // context.Cause of the caller's context
}

func (e *CanceledError) Error() string { return "deliver: attempt canceled: " + e.Cause.Error() }

func (e *CanceledError) Unwrap() error { return e.Cause }

// Outcome is what an attempt means for its delivery. The zero value is not a
// valid outcome.
type Outcome int

// Outcomes.
const (
	// Delivered: a 2xx. The delivery is done.
	Delivered Outcome = iota + 1
	// Retry: schedule another attempt (RetryPolicy.Delay), unless the
	// policy says the delivery is exhausted.
	Retry
	// Dead: the delivery can never succeed (413, or a *MessageError);
	// dead-letter it now. It does not count against the endpoint.
	Dead
	// Gone: the endpoint said 410. Disable the endpoint and dead-letter the
	// delivery.
	Gone
	// Canceled: the caller abandoned the attempt (shutdown, a revoked
	// partition). It says nothing about the endpoint, so it is neither
	// counted as an attempt nor fed to the breaker; the delivery is simply
	// not finished, and its next owner makes it.
	Canceled
)

// String returns the outcome's metric label.
func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Retry:
		return "retry"
	case Dead:
		return "dead"
	case Gone:
		return "gone"
	case Canceled:
		return "canceled"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Classify maps an attempt's error to its Outcome, per the delivery
// contract: nil is Delivered; 410 is Gone; 413 is Dead; a request its own
// message makes unsendable (*MessageError) is Dead, since retrying it would
// only hold its entity and blame the receiver; an attempt the caller
// canceled is Canceled; every other failure is Retry. That includes a target refused by the SSRF guard
// (*ssrf.BlockedError) and a *RequestError: both are fixed by configuration
// (an allow-list entry, a corrected URL), and retrying lets the delivery
// recover then instead of being lost, while the retry policy still
// dead-letters it after MaxAttempts or MaxAge.
func Classify(err error) Outcome {
	if err == nil {
		return Delivered
	}
	var ce *CanceledError
	if errors.As(err, &ce) {
		return Canceled
	}
	var me *MessageError
	if errors.As(err, &me) {
		return Dead
	}
	var se *StatusError
	if errors.As(err, &se) {
		switch se.Code {
		case http.StatusGone:
			return Gone
		case http.StatusRequestEntityTooLarge:
			return Dead
		}
	}
	return Retry
}

// statusText is "503 Service Unavailable", or just the code if unknown.
func statusText(code int) string {
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}
