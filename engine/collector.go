package engine

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/endpoint"
)

// stageCollector reports per-endpoint and per-partition state at scrape
// time, so the hot path pays nothing for these gauges and endpoints that
// went idle stop being reported.
type stageCollector struct {
	s *DeliveryStage

	pending, inFlight, oldestAge, parked *prometheus.Desc
	breakerOpen                          *prometheus.Desc
	healthyOldest                        *prometheus.Desc
	watermarkLag, watermarkLagSeconds    *prometheus.Desc
}

// Collector returns a prometheus.Collector for the stage's live state.
func (s *DeliveryStage) Collector() prometheus.Collector {
	ep := []string{"endpoint"}
	part := []string{"partition"}
	return &stageCollector{
		s:        s,
		pending:  prometheus.NewDesc("laneway_endpoint_pending", "Deliveries waiting to start, per endpoint (this instance's lanes).", ep, nil),
		inFlight: prometheus.NewDesc("laneway_endpoint_in_flight", "Delivery attempts in flight, per endpoint.", ep, nil),
		oldestAge: prometheus.NewDesc("laneway_endpoint_oldest_pending_age_seconds",
			"Age of the oldest unfinished delivery per endpoint, parked ones included.", ep, nil),
		parked: prometheus.NewDesc("laneway_endpoint_parked", "Deliveries waiting in the parked topic, per endpoint.", ep, nil),
		breakerOpen: prometheus.NewDesc("laneway_endpoint_breaker_open",
			"1 while the endpoint's breaker is open or probing (paused after consecutive failures), else 0.", ep, nil),
		healthyOldest: prometheus.NewDesc("laneway_healthy_oldest_pending_age_seconds",
			"Age of the oldest unfinished delivery over this instance's healthy endpoints (not parked, not paused, breaker closed): "+
				"it grows when the platform lacks capacity, not when one customer is slow.", nil, nil),
		watermarkLag: prometheus.NewDesc("laneway_partition_watermark_lag_offsets",
			"Offsets between a deliveries partition's high watermark and its commit watermark.", part, nil),
		watermarkLagSeconds: prometheus.NewDesc("laneway_partition_watermark_lag_seconds",
			"How long the lowest unfinished offset of a deliveries partition has been waiting.", part, nil),
	}
}

func (c *stageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.inFlight, c.oldestAge, c.parked, c.breakerOpen, c.healthyOldest, c.watermarkLag, c.watermarkLagSeconds} {
		ch <- d
	}
}

func (c *stageCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.cfg.Now()
	healthyOldest := 0.0
	for _, op := range c.s.ownedPartitions() {
		op.mu.Lock()
		for id, ls := range op.lanes {
			pl := op.parked[id]
			if c.s.healthyLocked(id, pl) {
				healthyOldest = max(healthyOldest, oldestAge(ls, pl, now))
			}
			ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(ls.lane.Pending()), id)
			ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(ls.lane.InFlight()), id)
			ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, oldestAge(ls, pl, now), id)
			backlog := 0
			if pl != nil {
				backlog = pl.backlog
			}
			ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(backlog), id)
			if b := c.s.cfg.Breakers; b != nil {
				open := 0.0
				if b.Get(id).State != breaker.Closed && b.Get(id).State != "" {
					open = 1
				}
				ch <- prometheus.MustNewConstMetric(c.breakerOpen, prometheus.GaugeValue, open, id)
			}
		}
		if op.tracker != nil {
			p := strconv.Itoa(int(op.id))
			lag := max(0, op.highWatermark-op.tracker.Watermark())
			if op.tracker.Outstanding() == 0 && lag <= 1 {
				lag = 0 // the last offset of a transactional topic is a commit marker
			}
			ch <- prometheus.MustNewConstMetric(c.watermarkLag, prometheus.GaugeValue, float64(lag), p)
			lagSeconds := 0.0
			if since, ok := op.tracker.OldestPendingSince(); ok {
				lagSeconds = now.Sub(since).Seconds()
			}
			ch <- prometheus.MustNewConstMetric(c.watermarkLagSeconds, prometheus.GaugeValue, lagSeconds, p)
		}
		op.mu.Unlock()
	}
	ch <- prometheus.MustNewConstMetric(c.healthyOldest, prometheus.GaugeValue, healthyOldest)
}

// healthyLocked reports whether an endpoint keeps up by itself: not
// parked, not paused and its breaker closed.
func (s *DeliveryStage) healthyLocked(id string, pl *parkedLane) bool {
	if pl != nil {
		return false
	}
	if ep, ok := s.cfg.Endpoints.Get(id); !ok || ep.Paused || ep.Status != endpoint.StatusActive {
		return false
	}
	if b := s.cfg.Breakers; b != nil {
		if st := b.Get(id).State; st != "" && st != breaker.Closed {
			return false
		}
	}
	return true
}

// oldestAge is the age of the lane's oldest unfinished delivery, counting
// those still waiting in the parked topic.
func oldestAge(ls *laneState, pl *parkedLane, now time.Time) float64 {
	var oldest time.Time
	if at, ok := ls.lane.OldestEnqueuedAt(); ok {
		oldest = at
	}
	if pl != nil && pl.backlog > 0 && (oldest.IsZero() || pl.oldestBacklog.Before(oldest)) {
		oldest = pl.oldestBacklog
	}
	if oldest.IsZero() {
		return 0
	}
	return now.Sub(oldest).Seconds()
}
