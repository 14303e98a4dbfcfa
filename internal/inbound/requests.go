package inbound

// The admin routes of captured requests and their replays.

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/laneway/laneway/internal/admin/adminhttp"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// listRequests answers GET /v1/inbound/requests?source=&status=&job=&since=&until=&cursor=&limit=.
func (s *Service) listRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter := Filter{Source: q.Get("source"), Status: q.Get("status"), Job: q.Get("job")}
	switch filter.Status {
	case "", StatusPending, StatusVerified, StatusRejected, StatusDuplicate:
	default:
		httpjson.Invalid(w, &ValidationError{Field: "status", Reason: "must be pending, verified, rejected or duplicate"})
		return
	}
	sp, err := adminhttp.ParseSearch(q)
	var page Page
	if err == nil {
		filter.Since, filter.Until = sp.Since, sp.Until
		page, err = s.finder.Find(r.Context(), filter, sp.Cursor, sp.Limit)
	}
	if adminhttp.WritePage(w, "listing", page, err) {
		s.logger.ErrorContext(r.Context(), "inbound: listing failed", "err", err)
	}
}

// requestJSON is a captured request as received. body_base64 is exact;
// body is the same bytes as a string when they are valid UTF-8.
type requestJSON struct {
	ID         string      `json:"id"`
	Source     string      `json:"source"`
	ReceivedAt time.Time   `json:"received_at"`
	Method     string      `json:"method"`
	Path       string      `json:"path"`
	Host       string      `json:"host"`
	RemoteAddr string      `json:"remote_addr"`
	Headers    http.Header `json:"headers"`
	BodyBytes  int         `json:"body_bytes"`
	BodyBase64 string      `json:"body_base64"`
	Body       *string     `json:"body,omitempty"`
	Truncated  bool        `json:"truncated,omitempty"`
	Refused    string      `json:"refused,omitempty"`
	Detail     string      `json:"detail,omitempty"`
	ReplayOf   string      `json:"replay_of,omitempty"`
	Action     string      `json:"action,omitempty"`
	Job        string      `json:"job,omitempty"`
	// Status is the verify stage's decision (pending, verified, rejected,
	// duplicate) and Outcome its details, as in a listing; both are absent
	// when the outcome could not be found.
	Status  string `json:"status,omitempty"`
	Outcome *Item  `json:"outcome,omitempty"`
}

func (s *Service) getRequest(w http.ResponseWriter, r *http.Request) {
	c, ok := s.lookupCapture(w, r)
	if !ok {
		return
	}
	out := requestJSON{
		ID: c.ID, Source: c.Source, ReceivedAt: c.ReceivedAt, Method: c.Method, Path: c.Path, Host: c.Host,
		RemoteAddr: c.RemoteAddr, Headers: c.Header, BodyBytes: len(c.Body),
		BodyBase64: base64.StdEncoding.EncodeToString(c.Body), Truncated: c.Truncated,
		Refused: c.Reject, Detail: c.Detail, ReplayOf: c.ReplayOf, Action: c.Action, Job: c.Job,
	}
	if utf8.Valid(c.Body) {
		body := string(c.Body)
		out.Body = &body
	}
	it, found, err := s.finder.Outcome(r.Context(), &c)
	switch {
	case err != nil: // the request itself is known: answer without its status
		s.logger.WarnContext(r.Context(), "inbound: looking up a request's outcome", "id", c.ID, "err", err)
	case found:
		out.Status, out.Outcome = it.Status, &it
	}
	httpjson.Write(w, http.StatusOK, out)
}

// getRequestBody answers with the captured body bytes, exactly. It is
// served as an attachment of type application/octet-stream whatever the
// sender declared, so a browser never renders it.
func (s *Service) getRequestBody(w http.ResponseWriter, r *http.Request) {
	c, ok := s.lookupCapture(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", `attachment; filename="`+c.ID+`.body"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(c.Body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(c.Body)
}

func (s *Service) lookupCapture(w http.ResponseWriter, r *http.Request) (Capture, bool) {
	id := r.PathValue("id")
	if _, _, ok := ParseRequestID(id); !ok {
		httpjson.Error(w, http.StatusNotFound, "request not found")
		return Capture{}, false
	}
	c, ok, err := s.finder.Get(r.Context(), id)
	switch {
	case err != nil:
		httpjson.Error(w, http.StatusServiceUnavailable, "could not read the request, retry: "+err.Error())
		return Capture{}, false
	case !ok:
		httpjson.Error(w, http.StatusNotFound, "request not found")
		return Capture{}, false
	}
	return c, true
}

// submitReplay answers POST /v1/inbound/replays: 202 with the job when
// this call started (or resumed) it, 200 with its progress when the same
// request (same body, or same Idempotency-Key) already did.
func (s *Service) submitReplay(w http.ResponseWriter, r *http.Request) {
	var req ReplayRequest
	if !httpjson.ReadStrict(w, r, maxAdminBody, &req) {
		return
	}
	if req.Source != "" {
		if _, ok := s.sources.Get(req.Source); !ok {
			httpjson.Error(w, http.StatusNotFound, "source not found")
			return
		}
	}
	job, created, err := s.replays.Submit(r.Context(), req, r.Header.Get("Idempotency-Key"))
	job.Cursor = ""
	adminhttp.WriteSubmitted(w, r, s.logger, "replay", "/v1/inbound/replays/"+job.ID, created, job, err)
}

func (s *Service) getReplay(w http.ResponseWriter, r *http.Request) {
	job, ok, err := s.replays.Get(r.Context(), r.PathValue("id"))
	job.Cursor = ""
	adminhttp.WriteFound(w, "replay", job, ok, err)
}

// decodeInto decodes body strictly into v, answering the request itself
// and returning false when it cannot.
