package engine

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// stageCollector reports per-endpoint and per-partition state at scrape
// time, so the hot path pays nothing for these gauges and endpoints that
// went idle stop being reported.
type stageCollector struct {
	s *DeliveryStage

	pending, inFlight, oldestAge      *prometheus.Desc
	watermarkLag, watermarkLagSeconds *prometheus.Desc
}

// Collector returns a prometheus.Collector for the stage's live state.
func (s *DeliveryStage) Collector() prometheus.Collector {
	ep := []string{"endpoint"}
	part := []string{"partition"}
	return &stageCollector{
		s:         s,
		pending:   prometheus.NewDesc("laneway_endpoint_pending", "Deliveries waiting to start, per endpoint (this instance's lanes).", ep, nil),
		inFlight:  prometheus.NewDesc("laneway_endpoint_in_flight", "Delivery attempts in flight, per endpoint.", ep, nil),
		oldestAge: prometheus.NewDesc("laneway_endpoint_oldest_pending_age_seconds", "Age of the oldest unfinished delivery, per endpoint.", ep, nil),
		watermarkLag: prometheus.NewDesc("laneway_partition_watermark_lag_offsets",
			"Offsets between a deliveries partition's high watermark and its commit watermark.", part, nil),
		watermarkLagSeconds: prometheus.NewDesc("laneway_partition_watermark_lag_seconds",
			"How long the lowest unfinished offset of a deliveries partition has been waiting.", part, nil),
	}
}

func (c *stageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.inFlight, c.oldestAge, c.watermarkLag, c.watermarkLagSeconds} {
		ch <- d
	}
}

func (c *stageCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.cfg.Now()
	for _, op := range c.s.ownedPartitions() {
		op.mu.Lock()
		for id, ls := range op.lanes {
			ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(ls.lane.Pending()), id)
			ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(ls.lane.InFlight()), id)
			age := 0.0
			if at, ok := ls.lane.OldestEnqueuedAt(); ok {
				age = now.Sub(at).Seconds()
			}
			ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, age, id)
		}
		if op.tracker != nil {
			p := strconv.Itoa(int(op.id))
			lag := max(0, op.highWatermark-op.tracker.Watermark())
			ch <- prometheus.MustNewConstMetric(c.watermarkLag, prometheus.GaugeValue, float64(lag), p)
			lagSeconds := 0.0
			if since, ok := op.tracker.OldestPendingSince(); ok {
				lagSeconds = now.Sub(since).Seconds()
			}
			ch <- prometheus.MustNewConstMetric(c.watermarkLagSeconds, prometheus.GaugeValue, lagSeconds, p)
		}
		op.mu.Unlock()
	}
}
