package api

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/laneway/laneway/internal/health"
	"github.com/laneway/laneway/internal/httpjson"
	"github.com/laneway/laneway/internal/model/endpoint"
)

// HealthReader reads the endpoints' live health, published by their owners.
type HealthReader interface {
	Get(ctx context.Context, ids []string) (map[string]health.Snapshot, error)
}

// healthJSON is an endpoint's health as the API shows it. Ages are
// computed at read time from the owner's snapshot.
type healthJSON struct {
	Pending                 int              `json:"pending"`
	InFlight                int              `json:"in_flight"`
	Parked                  int              `json:"parked"`
	OldestPendingAgeSeconds float64          `json:"oldest_pending_age_seconds"`
	ParkedReason            string           `json:"parked_reason"`
	Breaker                 health.Breaker   `json:"breaker"`
	LastError               string           `json:"last_error"`
	LastErrorAt             *time.Time       `json:"last_error_at"`
	LastSuccessAt           *time.Time       `json:"last_success_at"`
	PerMinute               health.PerMinute `json:"per_minute"`
	Owner                   string           `json:"owner"`
	UpdatedAt               *time.Time       `json:"updated_at"`

	// laneAge is OldestPendingAgeSeconds of the endpoint's lane alone,
	// before a feed consumer's or a batch receiver's backlog is added: the
	// platform's healthy figure reads it, since a consumer's own pace says
	// nothing about the platform's capacity.
	laneAge float64
}

func toHealthJSON(s health.Snapshot, known bool, now time.Time) *healthJSON {
	h := &healthJSON{Breaker: health.Breaker{State: "closed"}}
	if !known {
		return h // no owner has reported it: nothing pending anywhere
	}
	at := s.UpdatedAt
	*h = healthJSON{
		Pending: s.Pending, InFlight: s.InFlight, Parked: s.Parked, ParkedReason: s.ParkedReason,
		OldestPendingAgeSeconds: s.OldestPendingAge(now).Seconds(), Breaker: s.Breaker,
		LastError: s.LastError, LastErrorAt: s.LastErrorAt, LastSuccessAt: s.LastSuccessAt,
		PerMinute: s.PerMinute, Owner: s.Owner, UpdatedAt: &at, laneAge: s.OldestPendingAge(now).Seconds(),
	}
	if h.Breaker.State == "" {
		h.Breaker.State = "closed"
	}
	return h
}

// withHealth adds the health of each endpoint; without a reader, or when
// Redis fails, endpoints are shown without it rather than not at all.
func (s *Server) withHealth(ctx context.Context, eps []endpointJSON) []endpointJSON {
	if s.health == nil || len(eps) == 0 {
		s.withFeedPositions(ctx, eps, s.now())
		return eps
	}
	ids := make([]string, len(eps))
	for i, e := range eps {
		ids[i] = e.ID
	}
	snaps, err := s.health.Get(ctx, ids)
	if err != nil {
		s.logger.WarnContext(ctx, "api: health snapshots unavailable", "error", err)
		return eps
	}
	now := s.now()
	for i := range eps {
		snap, ok := snaps[eps[i].ID]
		eps[i].Health = toHealthJSON(snap, ok, now)
	}
	s.withFeedPositions(ctx, eps, now)
	return eps
}

// sortByOldestPending orders endpoints most behind first.
func sortByOldestPending(eps []endpointJSON) {
	age := func(e endpointJSON) float64 {
		if e.Health == nil {
			return 0
		}
		return e.Health.OldestPendingAgeSeconds
	}
	slices.SortStableFunc(eps, func(a, b endpointJSON) int {
		switch x, y := age(a), age(b); {
		case x > y:
			return -1
		case x < y:
			return 1
		}
		return 0
	})
}

// platformJSON is GET /v1/health: the figures that tell one slow customer
// from a platform short of capacity.
type platformJSON struct {
	// OldestPendingAgeSeconds is over every endpoint.
	OldestPendingAgeSeconds float64 `json:"oldest_pending_age_seconds"`
	// HealthyOldestPendingAgeSeconds is over endpoints that keep up by
	// themselves (active, not paused, not parked, breaker closed): it
	// grows only when the platform itself lacks capacity.
	HealthyOldestPendingAgeSeconds float64 `json:"healthy_oldest_pending_age_seconds"`
	MostBehind                     string  `json:"most_behind_endpoint_id"`
	Endpoints                      struct {
		Total       int `json:"total"`
		Disabled    int `json:"disabled"`
		Paused      int `json:"paused"`
		Parked      int `json:"parked"`
		BreakerOpen int `json:"breaker_open"`
	} `json:"endpoints"`
}

func (s *Server) platformHealth(w http.ResponseWriter, r *http.Request) {
	if s.health == nil {
		httpjson.Error(w, http.StatusNotImplemented, "health is not configured")
		return
	}
	eps := s.withHealth(r.Context(), allEndpointsJSON(s.endpoints.List(), ""))
	var p platformJSON
	p.Endpoints.Total = len(eps)
	for _, e := range eps {
		p.add(e)
	}
	httpjson.Write(w, http.StatusOK, p)
}

func (p *platformJSON) add(e endpointJSON) {
	switch {
	case e.Status != endpoint.StatusActive:
		p.Endpoints.Disabled++
		return
	case e.Paused:
		p.Endpoints.Paused++
	}
	h := e.Health
	if h == nil {
		return
	}
	if h.Parked > 0 || h.ParkedReason != "" {
		p.Endpoints.Parked++
	}
	open := h.Breaker.State != "closed"
	if open {
		p.Endpoints.BreakerOpen++
	}
	if h.OldestPendingAgeSeconds > p.OldestPendingAgeSeconds {
		p.OldestPendingAgeSeconds, p.MostBehind = h.OldestPendingAgeSeconds, e.ID
	}
	if !e.Paused && !open && h.ParkedReason == "" && h.laneAge > p.HealthyOldestPendingAgeSeconds {
		p.HealthyOldestPendingAgeSeconds = h.laneAge
	}
}

func allEndpointsJSON(eps []endpoint.Endpoint, tenant string) []endpointJSON {
	out := []endpointJSON{}
	for _, e := range eps {
		if tenant == "" || e.Tenant == tenant {
			out = append(out, toJSON(e))
		}
	}
	return out
}

// listQuery is GET /v1/endpoints' query: tenant, sort and limit.
type listQuery struct {
	tenant string
	sort   string
	limit  int
}

func parseListQuery(r *http.Request) (listQuery, error) {
	q := r.URL.Query()
	lq := listQuery{tenant: q.Get("tenant"), sort: q.Get("sort")}
	if lq.sort != "" && lq.sort != "id" && lq.sort != "oldest_pending_age" {
		return lq, &endpoint.ValidationError{Field: "sort", Reason: "must be id or oldest_pending_age"}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return lq, &endpoint.ValidationError{Field: "limit", Reason: "must be a positive integer"}
		}
		lq.limit = n
	}
	return lq, nil
}
