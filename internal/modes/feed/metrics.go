package feed

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collectEvery bounds how often a scrape reads feed positions from Kafka:
// scrapes in between (several Prometheus replicas) reuse the last read.
const collectEvery = 10 * time.Second

// Collector exports where each pull endpoint's consumer stands. Positions
// live in Kafka, not in this instance, so every instance reports the same
// figures: aggregate with max by (endpoint).
type Collector struct {
	svc  *Service
	list func() []string // the pull endpoints' ids
	now  func() time.Time

	mu     sync.Mutex
	readAt time.Time
	last   map[string]Position

	end, lag, age, acked *prometheus.Desc
}

// NewCollector reports the positions of the feeds list names.
func NewCollector(svc *Service, list func() []string, now func() time.Time) *Collector {
	if now == nil {
		now = time.Now
	}
	labels := []string{"endpoint"}
	return &Collector{
		svc: svc, list: list, now: now,
		end: prometheus.NewDesc("laneway_feed_end_sequence", "The sequence the pull endpoint's next event will get.", labels, nil),
		lag: prometheus.NewDesc("laneway_feed_lag_events", "Events of the feed after its acknowledged position (or its start).", labels, nil),
		age: prometheus.NewDesc("laneway_feed_oldest_unacked_age_seconds",
			"How long the oldest event after the acknowledged position has waited; 0 when the consumer is caught up.", labels, nil),
		acked: prometheus.NewDesc("laneway_feed_acknowledged",
			"1 when the feed's consumer acknowledges (its lag then counts), 0 when it keeps its cursor itself.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.end, c.lag, c.age, c.acked} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for id, p := range c.positions(now) {
		acked := 0.0
		if p.HasAcked {
			acked = 1
		}
		ch <- prometheus.MustNewConstMetric(c.end, prometheus.GaugeValue, float64(p.End), id)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(p.Lag()), id)
		ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, p.OldestUnackedAge(now).Seconds(), id)
		ch <- prometheus.MustNewConstMetric(c.acked, prometheus.GaugeValue, acked, id)
	}
}

// positions reads every feed's position, at most once per collectEvery.
// A feed that cannot be read is left out of this scrape.
func (c *Collector) positions(now time.Time) map[string]Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != nil && now.Sub(c.readAt) < collectEvery {
		return c.last
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string]Position{}
	for _, id := range c.list() {
		if p, err := c.svc.Position(ctx, id); err == nil {
			out[id] = p
		}
	}
	c.last, c.readAt = out, now
	return out
}
