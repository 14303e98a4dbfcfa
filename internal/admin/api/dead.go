package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/laneway/laneway/internal/deadletter"
	"github.com/laneway/laneway/internal/httpjson"
	"github.com/laneway/laneway/internal/kafka/logscan"
	"github.com/laneway/laneway/internal/model/endpoint"
)

// DeadLetterFinder searches the dead-letter topic.
type DeadLetterFinder interface {
	Find(ctx context.Context, filter deadletter.Filter, cursor string, limit int) (deadletter.Page, error)
}

// Redriver runs redrive jobs.
type Redriver interface {
	Submit(ctx context.Context, req deadletter.Request, idempotencyKey string) (deadletter.Job, bool, error)
	Get(ctx context.Context, id string) (deadletter.Job, bool, error)
}

// listDead answers GET /v1/dead?endpoint_id=&reason=&since=&until=&cursor=&limit=.
// since and until (RFC 3339) narrow the search by time of death; the
// cursor of a previous page carries them on.
func (s *Server) listDead(w http.ResponseWriter, r *http.Request) {
	if s.dead == nil {
		httpjson.Error(w, http.StatusNotImplemented, "dead-letter search is not configured")
		return
	}
	q := r.URL.Query()
	sp, err := parseSearch(q)
	if err != nil {
		httpjson.Invalid(w, err)
		return
	}
	filter := deadletter.Filter{EndpointID: q.Get("endpoint_id"), Reason: q.Get("reason"), Since: sp.since, Until: sp.until}
	page, err := s.dead.Find(r.Context(), filter, sp.cursor, sp.limit)
	s.writeSearch(w, r, "dead-letter search", page, err)
}

// searchParams are the query parameters every time-range search shares.
type searchParams struct {
	since, until time.Time
	cursor       string
	limit        int
}

func parseSearch(q url.Values) (searchParams, error) {
	sp := searchParams{cursor: q.Get("cursor")}
	var err error
	if sp.since, err = parseTimeParam(q.Get("since"), "since"); err != nil {
		return sp, err
	}
	if sp.until, err = parseTimeParam(q.Get("until"), "until"); err != nil {
		return sp, err
	}
	sp.limit, err = parseLimit(q.Get("limit"))
	return sp, err
}

// writeSearch answers a search with its page, or with the error a search
// can end in: a foreign cursor (400) or Kafka failing (503).
func (s *Server) writeSearch(w http.ResponseWriter, r *http.Request, what string, page any, err error) {
	switch {
	case errors.Is(err, logscan.ErrBadCursor):
		httpjson.Invalid(w, &endpoint.ValidationError{Field: "cursor", Reason: "is not a cursor from this listing"})
	case err != nil:
		s.logger.ErrorContext(r.Context(), "api: "+what+" failed", "error", err)
		httpjson.Error(w, http.StatusServiceUnavailable, what+" failed, retry: "+err.Error())
	default:
		httpjson.Write(w, http.StatusOK, page)
	}
}

func parseTimeParam(v, field string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &endpoint.ValidationError{Field: field, Reason: "must be an RFC 3339 time"}
	}
	return t, nil
}

func parseLimit(v string) (int, error) {
	if v == "" {
		return logscan.DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > logscan.MaxLimit {
		return 0, &endpoint.ValidationError{Field: "limit", Reason: "must be between 1 and " + strconv.Itoa(logscan.MaxLimit)}
	}
	return n, nil
}

// redrive answers POST /v1/dead/redrive: 202 with the job when this request
// started (or resumed) it, 200 with its progress when the same request
// (same body, or same Idempotency-Key) already did.
func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	if s.redrives == nil {
		httpjson.Error(w, http.StatusNotImplemented, "redrive is not configured")
		return
	}
	var req deadletter.Request
	if !httpjson.ReadStrict(w, r, s.maxBody, &req) {
		return
	}
	if req.EndpointID != "" {
		ep, ok := s.endpoints.Get(req.EndpointID)
		if !ok {
			httpjson.Error(w, http.StatusNotFound, "endpoint not found")
			return
		}
		if ep.Status != endpoint.StatusActive {
			httpjson.Error(w, http.StatusConflict, "endpoint is disabled; re-enable it (PATCH status) before redriving")
			return
		}
	}
	job, created, err := s.redrives.Submit(r.Context(), req, r.Header.Get("Idempotency-Key"))
	var re *deadletter.RequestError
	switch {
	case errors.As(err, &re):
		httpjson.Write(w, http.StatusBadRequest, httpjson.ErrorBody{Error: re.Error(), Reason: re.Reason})
		return
	case err != nil:
		s.logger.ErrorContext(r.Context(), "api: redrive failed to start", "error", err)
		httpjson.Error(w, http.StatusServiceUnavailable, "could not start the redrive, retry: "+err.Error())
		return
	}
	w.Header().Set("Location", "/v1/redrives/"+job.ID)
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
	}
	httpjson.Write(w, status, jobJSON(job))
}

func (s *Server) getRedrive(w http.ResponseWriter, r *http.Request) {
	if s.redrives == nil {
		httpjson.Error(w, http.StatusNotImplemented, "redrive is not configured")
		return
	}
	job, ok, err := s.redrives.Get(r.Context(), r.PathValue("id"))
	switch {
	case err != nil:
		httpjson.Error(w, http.StatusServiceUnavailable, "could not read the redrive, retry: "+err.Error())
	case !ok:
		httpjson.Error(w, http.StatusNotFound, "redrive not found")
	default:
		httpjson.Write(w, http.StatusOK, jobJSON(job))
	}
}

// jobJSON hides the job's internal cursor.
func jobJSON(j deadletter.Job) deadletter.Job {
	j.Cursor = ""
	return j
}
