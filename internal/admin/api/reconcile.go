package api

import (
	"context"
	"net/http"

	"github.com/laneway/laneway/internal/eventsearch"
	"github.com/laneway/laneway/internal/httpjson"
	"github.com/laneway/laneway/internal/model/endpoint"
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
		httpjson.Error(w, http.StatusNotImplemented, "event search is not configured")
		return
	}
	q := r.URL.Query()
	sp, err := parseSearch(q)
	if err == nil && sp.cursor == "" && sp.since.IsZero() {
		err = &endpoint.ValidationError{Field: "since", Reason: "is required: searches read a time range, not the whole topic"}
	}
	if err != nil {
		httpjson.Invalid(w, err)
		return
	}
	filter := eventsearch.Filter{Tenant: q.Get("tenant"), Type: q.Get("type"), Entity: q.Get("entity"), Since: sp.since, Until: sp.until}
	page, err := s.events.Find(r.Context(), filter, sp.cursor, sp.limit)
	s.writeSearch(w, r, "event search", page, err)
}
