package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/kafka/logscan"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/ops/eventsearch"
)

type fakeEvents struct{ filter eventsearch.Filter }

func (f *fakeEvents) Find(_ context.Context, filter eventsearch.Filter, cursor string, _ int) (eventsearch.Page, error) {
	f.filter = filter
	if cursor == "bad" {
		return eventsearch.Page{}, logscan.ErrBadCursor
	}
	return eventsearch.Page{Items: []eventsearch.Event{{Envelope: event.Envelope{ID: "ev1", Tenant: filter.Tenant}}}}, nil
}

func TestListEventsNeedsATimeRange(t *testing.T) {
	fe := &fakeEvents{}
	h := newHarness(t, func(c *Config) { c.Events = fe })
	r := h.do("GET", "/v1/events?tenant=acme&type=order.updated&since=2026-03-01T00:00:00Z&until=2026-03-01T01:00:00Z", "")
	wantStatus(t, r, http.StatusOK)
	if fe.filter.Tenant != "acme" || fe.filter.Type != "order.updated" || !fe.filter.Until.Equal(time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("filter %+v", fe.filter)
	}
	if data := r.json(t)["data"].([]any); len(data) != 1 {
		t.Fatalf("body %s", r.body)
	}
	wantStatus(t, h.do("GET", "/v1/events?tenant=acme", ""), http.StatusBadRequest) // no since: would read the whole topic
	wantStatus(t, h.do("GET", "/v1/events?cursor=bad", ""), http.StatusBadRequest)
	wantStatus(t, h.do("GET", "/v1/events?cursor=ok", ""), http.StatusOK)
}
