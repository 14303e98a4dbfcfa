// Package adminhttp holds what the admin API's routes answer alike, both
// the server's own (internal/admin/api) and those other components mount
// on it (the inbound front door's): the time-range search query, a
// search's page or failure, a background job's answer and a lookup's.
package adminhttp

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/laneway/laneway/internal/kafka/logscan"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// Search is the query every time-range search shares: since, until (RFC
// 3339), cursor and limit.
type Search struct {
	Since, Until time.Time
	Cursor       string
	Limit        int
}

// ParseSearch reads q's search parameters, the limit defaulting to
// logscan.DefaultLimit. Its errors (*httpjson.FieldError) name the
// parameter at fault.
func ParseSearch(q url.Values) (Search, error) {
	sp := Search{Cursor: q.Get("cursor")}
	var err error
	if sp.Since, err = parseTime(q.Get("since"), "since"); err != nil {
		return sp, err
	}
	if sp.Until, err = parseTime(q.Get("until"), "until"); err != nil {
		return sp, err
	}
	sp.Limit, err = parseLimit(q.Get("limit"))
	return sp, err
}

func parseTime(v, field string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &httpjson.FieldError{Field: field, Reason: "must be an RFC 3339 time"}
	}
	return t, nil
}

func parseLimit(v string) (int, error) {
	if v == "" {
		return logscan.DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > logscan.MaxLimit {
		return 0, &httpjson.FieldError{Field: "limit", Reason: "must be between 1 and " + strconv.Itoa(logscan.MaxLimit)}
	}
	return n, nil
}

// WritePage answers a search (what names it: "dead-letter search") with
// its page, or with the error a search can end in: a refused query
// parameter (a *httpjson.FieldError, 400), a foreign cursor (400) or the
// log failing (503). It reports the failure, which the caller logs.
func WritePage(w http.ResponseWriter, what string, page any, err error) (failed bool) {
	var fe *httpjson.FieldError
	switch {
	case errors.As(err, &fe):
		httpjson.Invalid(w, err)
	case errors.Is(err, logscan.ErrBadCursor):
		httpjson.Invalid(w, &httpjson.FieldError{Field: "cursor", Reason: "is not a cursor from this listing"})
	case err != nil:
		httpjson.Error(w, http.StatusServiceUnavailable, what+" failed, retry: "+err.Error())
		return true
	default:
		httpjson.Write(w, http.StatusOK, page)
	}
	return false
}

// WriteSubmitted answers a request that submitted a background job (what:
// "redrive") with what the job runner's Submit returned: 202 when this
// request started (or resumed) the job, 200 with its progress when the
// same request already had, and the job's address (location) in either
// case; or the failure (writeSubmitFailure).
func WriteSubmitted(w http.ResponseWriter, r *http.Request, logger *slog.Logger, what, location string, created bool, job any, err error) {
	if err != nil {
		writeSubmitFailure(w, r, logger, what, err)
		return
	}
	w.Header().Set("Location", location)
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
	}
	httpjson.Write(w, status, job)
}

// writeSubmitFailure answers a job submission that failed: 400 with the
// reason when the runner refused the request (a *jobs.RequestError); 422
// idempotency_key_reused when its Idempotency-Key already names a job of a
// different request (the client must send it under a new key); else 503
// (retry), logged.
func writeSubmitFailure(w http.ResponseWriter, r *http.Request, logger *slog.Logger, what string, err error) {
	if re, ok := errors.AsType[*jobs.RequestError](err); ok {
		httpjson.Write(w, http.StatusBadRequest, httpjson.ErrorBody{Error: re.Error(), Reason: re.Reason})
		return
	}
	if errors.Is(err, jobs.ErrKeyReused) {
		httpjson.Write(w, http.StatusUnprocessableEntity, httpjson.ErrorBody{Reason: "idempotency_key_reused",
			Error: "this Idempotency-Key was used for a different " + what + " request; send it under a new key"})
		return
	}
	logger.ErrorContext(r.Context(), what+" failed to start", "err", err)
	httpjson.Error(w, http.StatusServiceUnavailable, "could not start the "+what+", retry: "+err.Error())
}

// WriteFound answers a lookup of one what ("redrive"): v, or 404 when it
// was not found, or 503 when the lookup failed.
func WriteFound(w http.ResponseWriter, what string, v any, found bool, err error) {
	switch {
	case err != nil:
		httpjson.Error(w, http.StatusServiceUnavailable, "could not read the "+what+", retry: "+err.Error())
	case !found:
		httpjson.Error(w, http.StatusNotFound, what+" not found")
	default:
		httpjson.Write(w, http.StatusOK, v)
	}
}
