package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/laneway/laneway/endpoint"
	"github.com/laneway/laneway/eventsearch"
	"github.com/laneway/laneway/internal/logscan"
)

// EventFinder searches the events topic by time range.
type EventFinder interface {
	Find(ctx context.Context, filter eventsearch.Filter, cursor string, limit int) (eventsearch.Page, error)
}

// listEvents answers GET /v1/events?tenant=&type=&entity=&since=&until=&cursor=&limit=
// for reconciliation: the events Laneway accepted in a time range (by the
// time Kafka stored them), read from the offsets Kafka finds for since.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	if s.events == nil {
		writeError(w, http.StatusNotImplemented, "event search is not configured")
		return
	}
	q := r.URL.Query()
	filter := eventsearch.Filter{Tenant: q.Get("tenant"), Type: q.Get("type"), Entity: q.Get("entity")}
	var err error
	if filter.Since, err = parseTimeParam(q.Get("since"), "since"); err == nil {
		filter.Until, err = parseTimeParam(q.Get("until"), "until")
	}
	limit := logscan.DefaultLimit
	if err == nil {
		limit, err = parseLimit(q.Get("limit"))
	}
	if err == nil && q.Get("cursor") == "" && filter.Since.IsZero() {
		err = &endpoint.ValidationError{Field: "since", Reason: "is required: searches read a time range, not the whole topic"}
	}
	if err != nil {
		writeInvalid(w, err)
		return
	}
	page, err := s.events.Find(r.Context(), filter, q.Get("cursor"), limit)
	switch {
	case errors.Is(err, logscan.ErrBadCursor):
		writeInvalid(w, &endpoint.ValidationError{Field: "cursor", Reason: "is not a cursor from this listing"})
	case err != nil:
		s.logger.ErrorContext(r.Context(), "api: event search failed", "error", err)
		writeError(w, http.StatusServiceUnavailable, "event search failed, retry: "+err.Error())
	default:
		writeJSON(w, http.StatusOK, page)
	}
}
