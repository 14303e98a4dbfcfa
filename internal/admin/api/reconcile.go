package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/laneway/laneway/internal/admin/adminhttp"
	"github.com/laneway/laneway/internal/ops/eventsearch"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// EventFinder searches the events topic by time range.
type EventFinder interface {
	Find(ctx context.Context, filter eventsearch.Filter, cursor string, limit int) (eventsearch.Page, error)
}

// listEvents answers GET /v1/events?tenant=&type=&entity=&since=&until=&cursor=&limit=
// for reconciliation: the events Laneway accepted in a time range (by the
// time Kafka stored them), read from the offsets Kafka finds for since.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	s.search(w, r, "event search", s.events != nil, func(q url.Values, sp adminhttp.Search) (any, error) {
		if sp.Cursor == "" && sp.Since.IsZero() {
			return nil, &httpjson.FieldError{Field: "since", Reason: "is required: searches read a time range, not the whole topic"}
		}
		filter := eventsearch.Filter{Tenant: q.Get("tenant"), Type: q.Get("type"), Entity: q.Get("entity"), Since: sp.Since, Until: sp.Until}
		return s.events.Find(r.Context(), filter, sp.Cursor, sp.Limit)
	})
}
