package api

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/ops/health"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
)

// HealthReader reads the endpoints' live health, published by their owners.
type HealthReader interface {
	Get(ctx context.Context, ids []string) (map[string]health.Snapshot, error)
}

// toHealthJSON is an endpoint's health as the API shows it, its ages
// computed at read time from the owner's snapshot.
func toHealthJSON(s health.Snapshot, known bool, now time.Time) *wire.EndpointHealth {
	h := &wire.EndpointHealth{LaneState: wire.LaneState{Breaker: wire.Breaker{State: "closed"}}}
	if !known {
		return h // no owner has reported it: nothing pending anywhere
	}
	at := s.UpdatedAt
	*h = wire.EndpointHealth{LaneState: s.LaneState, OldestPendingAgeSeconds: s.OldestPendingAge(now).Seconds(), UpdatedAt: &at}
	if h.Breaker.State == "" {
		h.Breaker.State = "closed"
	}
	return h
}

// withHealth adds the health of each endpoint; without a reader, or when
// Redis fails, endpoints are shown without it rather than not at all.
func (s *Server) withHealth(ctx context.Context, eps []wire.Endpoint) []wire.Endpoint {
	s.addHealth(ctx, eps)
	return eps
}

// addHealth is withHealth, answering as well the oldest pending age of
// each endpoint's lane alone (0 without health), before a feed consumer's
// or a batch receiver's backlog is added: the capacity figures' age over
// the endpoints keeping up reads it, since a consumer's own pace says
// nothing about the platform's capacity.
func (s *Server) addHealth(ctx context.Context, eps []wire.Endpoint) (laneAges []float64) {
	laneAges = make([]float64, len(eps))
	if s.health == nil || len(eps) == 0 {
		s.withFeedPositions(ctx, eps, s.now())
		return laneAges
	}
	ids := make([]string, len(eps))
	for i, e := range eps {
		ids[i] = e.ID
	}
	snaps, err := s.health.Get(ctx, ids)
	if err != nil {
		s.logger.WarnContext(ctx, "api: health snapshots unavailable", "error", err)
		return laneAges
	}
	now := s.now()
	for i := range eps {
		snap, ok := snaps[eps[i].ID]
		eps[i].Health = toHealthJSON(snap, ok, now)
		laneAges[i] = eps[i].Health.OldestPendingAgeSeconds
	}
	s.withFeedPositions(ctx, eps, now)
	return laneAges
}

// sortByOldestPending orders endpoints most behind first.
func sortByOldestPending(eps []wire.Endpoint) {
	age := func(e wire.Endpoint) float64 {
		if e.Health == nil {
			return 0
		}
		return e.Health.OldestPendingAgeSeconds
	}
	slices.SortStableFunc(eps, func(a, b wire.Endpoint) int {
		switch x, y := age(a), age(b); {
		case x > y:
			return -1
		case x < y:
			return 1
		}
		return 0
	})
}

// platformHealth answers GET /v1/health with the capacity figures, which
// tell one slow customer from a platform short of capacity.
func (s *Server) platformHealth(w http.ResponseWriter, r *http.Request) {
	if s.health == nil {
		httpjson.Error(w, http.StatusNotImplemented, "health is not configured")
		return
	}
	eps := allEndpointsJSON(s.endpoints.List(), "")
	laneAges := s.addHealth(r.Context(), eps)
	var p wire.PlatformHealth
	p.Endpoints.Total = len(eps)
	for i, e := range eps {
		addToPlatform(&p, e, laneAges[i])
	}
	httpjson.Write(w, http.StatusOK, p)
}

// addToPlatform counts e, whose lane alone is laneAge behind, into p.
func addToPlatform(p *wire.PlatformHealth, e wire.Endpoint, laneAge float64) {
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
		p.OldestPendingAgeSeconds, p.MostBehindEndpointID = h.OldestPendingAgeSeconds, e.ID
	}
	if !e.Paused && !open && h.ParkedReason == "" && laneAge > p.HealthyOldestPendingAgeSeconds {
		p.HealthyOldestPendingAgeSeconds = laneAge
	}
}

func allEndpointsJSON(eps []endpoint.Endpoint, tenant string) []wire.Endpoint {
	out := []wire.Endpoint{}
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
