package engine

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/laneway/laneway/partition"
)

// stageCollector reports per-endpoint and per-partition state at scrape
// time, so the hot path pays nothing for these gauges and endpoints that
// went idle stop being reported.
type stageCollector struct {
	s *DeliveryStage

	pending, inFlight, oldestAge, parked *prometheus.Desc
	parkedAge                            *prometheus.Desc
	breakerOpen                          *prometheus.Desc
	healthyOldest                        *prometheus.Desc
	watermarkLag, watermarkLagSeconds    *prometheus.Desc
	slotsUsed, slotsCap                  *prometheus.Desc
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
		parkedAge: prometheus.NewDesc("laneway_endpoint_parked_oldest_age_seconds",
			"Age of the oldest parked delivery not yet read back, per endpoint; alert well before it reaches the parked topic's retention.", ep, nil),
		breakerOpen: prometheus.NewDesc("laneway_endpoint_breaker_open",
			"1 while the endpoint's breaker is open or probing (paused after consecutive failures), else 0.", ep, nil),
		healthyOldest: prometheus.NewDesc("laneway_healthy_oldest_pending_age_seconds",
			"Age of the oldest unfinished delivery over this instance's healthy endpoints (not parked, not paused, breaker closed): "+
				"it grows when the platform lacks capacity, not when one customer is slow.", nil, nil),
		watermarkLag: prometheus.NewDesc("laneway_partition_watermark_lag_offsets",
			"Offsets between a deliveries partition's high watermark and its commit watermark.", part, nil),
		watermarkLagSeconds: prometheus.NewDesc("laneway_partition_watermark_lag_seconds",
			"How long the lowest unfinished offset of a deliveries partition has been waiting.", part, nil),
		slotsUsed: prometheus.NewDesc("laneway_attempt_slots_in_use", "Delivery attempts in flight on this instance.", nil, nil),
		slotsCap:  prometheus.NewDesc("laneway_attempt_slots", "The instance's cap on attempts in flight (--max-inflight).", nil, nil),
	}
}

func (c *stageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.inFlight, c.oldestAge, c.parked, c.parkedAge, c.breakerOpen, c.healthyOldest, c.watermarkLag, c.watermarkLagSeconds, c.slotsUsed, c.slotsCap} {
		ch <- d
	}
}

func (c *stageCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.s.cfg.Now()
	healthyOldest := 0.0
	for _, d := range c.s.ownedPartitions() {
		var pg partition.PartitionGauge
		d.do(func(o *partition.Owner) {
			pg = o.Gauges(now, func(g partition.EndpointGauge) {
				if g.Healthy {
					healthyOldest = max(healthyOldest, g.OldestAge)
				}
				c.endpoint(ch, g)
			})
		})
		if pg.Tracked {
			p := strconv.Itoa(int(pg.Partition))
			ch <- prometheus.MustNewConstMetric(c.watermarkLag, prometheus.GaugeValue, float64(pg.WatermarkLag), p)
			ch <- prometheus.MustNewConstMetric(c.watermarkLagSeconds, prometheus.GaugeValue, pg.WatermarkAge, p)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.healthyOldest, prometheus.GaugeValue, healthyOldest)
	used, capacity := c.s.slots.InUse()
	ch <- prometheus.MustNewConstMetric(c.slotsUsed, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(c.slotsCap, prometheus.GaugeValue, float64(capacity))
}

func (c *stageCollector) endpoint(ch chan<- prometheus.Metric, g partition.EndpointGauge) {
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(g.Pending), g.ID)
	ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(g.InFlight), g.ID)
	ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, g.OldestAge, g.ID)
	ch <- prometheus.MustNewConstMetric(c.parked, prometheus.GaugeValue, float64(g.Parked), g.ID)
	ch <- prometheus.MustNewConstMetric(c.parkedAge, prometheus.GaugeValue, g.ParkedAge, g.ID)
	if c.s.cfg.Breakers != nil {
		open := 0.0
		if g.BreakerOpen {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(c.breakerOpen, prometheus.GaugeValue, open, g.ID)
	}
}
