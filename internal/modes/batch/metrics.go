package batch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics count batch endpoints' batches.
type metrics struct {
	batches  *prometheus.CounterVec
	events   *prometheus.CounterVec
	duration prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "laneway_batch_attempts_total",
			Help: "Batch attempts to batch endpoints, by outcome."}, []string{"outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "laneway_batch_attempt_events_total",
			Help: "Events carried by batch attempts, by outcome."}, []string{"outcome"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "laneway_batch_attempt_duration_seconds",
			Help: "Batch attempt latency.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
	}
	if reg != nil {
		reg.MustRegister(m.batches, m.events, m.duration)
	}
	return m
}

func (m *metrics) batch(outcome string, events int, took time.Duration) {
	m.batches.WithLabelValues(outcome).Inc()
	m.events.WithLabelValues(outcome).Add(float64(events))
	m.duration.Observe(took.Seconds())
}
