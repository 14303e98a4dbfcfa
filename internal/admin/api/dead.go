package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/laneway/laneway/internal/admin/adminhttp"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/ops/deadletter"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
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
	s.search(w, r, "dead-letter search", s.dead != nil, func(q url.Values, sp adminhttp.Search) (any, error) {
		filter := deadletter.Filter{EndpointID: q.Get("endpoint_id"), Reason: q.Get("reason"), Since: sp.Since, Until: sp.Until}
		return s.dead.Find(r.Context(), filter, sp.Cursor, sp.Limit)
	})
}

// search answers a time-range search (what names it; 501 when it is not
// configured) with the page find reads for the request's query, or with
// why it could not.
func (s *Server) search(w http.ResponseWriter, r *http.Request, what string, configured bool, find func(url.Values, adminhttp.Search) (any, error)) {
	if !configured {
		httpjson.Error(w, http.StatusNotImplemented, what+" is not configured")
		return
	}
	q := r.URL.Query()
	sp, err := adminhttp.ParseSearch(q)
	var page any
	if err == nil {
		page, err = find(q, sp)
	}
	if adminhttp.WritePage(w, what, page, err) {
		s.logger.ErrorContext(r.Context(), "api: "+what+" failed", "error", err)
	}
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
	adminhttp.WriteSubmitted(w, r, s.logger, "redrive", "/v1/redrives/"+job.ID, created, jobJSON(job), err)
}

func (s *Server) getRedrive(w http.ResponseWriter, r *http.Request) {
	if s.redrives == nil {
		httpjson.Error(w, http.StatusNotImplemented, "redrive is not configured")
		return
	}
	job, ok, err := s.redrives.Get(r.Context(), r.PathValue("id"))
	adminhttp.WriteFound(w, "redrive", jobJSON(job), ok, err)
}

// jobJSON hides the job's internal cursor.
func jobJSON(j deadletter.Job) deadletter.Job {
	j.Cursor = ""
	return j
}
