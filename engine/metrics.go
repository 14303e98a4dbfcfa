package engine

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's Prometheus metrics. A nil *Metrics is valid and
// records nothing, so components can be used without a registry in tests.
type Metrics struct {
	eventsConsumed    prometheus.Counter
	invalidEvents     prometheus.Counter
	deliveriesCreated prometheus.Counter
	unmatchedEvents   prometheus.Counter
	attempts          *prometheus.CounterVec
	attemptSeconds    prometheus.Histogram
	deliveries        *prometheus.CounterVec
	deadLetters       *prometheus.CounterVec
	superseded        prometheus.Counter
	parks             *prometheus.CounterVec
}

// NewMetrics registers the engine metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		eventsConsumed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "laneway_fanout_events_total", Help: "Events read by the fan-out stage and committed.",
		}),
		invalidEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "laneway_fanout_invalid_events_total", Help: "Events that were not valid envelopes and went to dead letters.",
		}),
		deliveriesCreated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "laneway_fanout_deliveries_total", Help: "Deliveries written by the fan-out stage.",
		}),
		unmatchedEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "laneway_fanout_unmatched_events_total", Help: "Valid events no endpoint subscribed to.",
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "laneway_delivery_attempts_total", Help: "HTTP delivery attempts by classified outcome.",
		}, []string{"outcome"}),
		attemptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "laneway_delivery_attempt_duration_seconds", Help: "Duration of one HTTP delivery attempt.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "laneway_deliveries_total", Help: "Deliveries ended, by final outcome (delivered, dead, superseded).",
		}, []string{"outcome"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "laneway_dead_letters_total", Help: "Dead letters written, by reason.",
		}, []string{"reason"}),
		superseded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "laneway_deliveries_superseded_total", Help: "Pending state updates replaced by a newer revision (coalescing).",
		}),
		parks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "laneway_lanes_parked_total", Help: "Lanes moved to the parked topic, by reason (park_after, lane_buffer, paused).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.parks, m.eventsConsumed, m.invalidEvents, m.deliveriesCreated, m.unmatchedEvents,
		m.attempts, m.attemptSeconds, m.deliveries, m.deadLetters, m.superseded)
	return m
}

func (m *Metrics) addFanout(c fanoutCounts) {
	if m == nil {
		return
	}
	m.eventsConsumed.Add(float64(c.events))
	m.invalidEvents.Add(float64(c.invalid))
	m.deliveriesCreated.Add(float64(c.deliveries))
	m.unmatchedEvents.Add(float64(c.unmatched))
}

func (m *Metrics) attempt(outcome string, seconds float64) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(outcome).Inc()
	m.attemptSeconds.Observe(seconds)
}

func (m *Metrics) ended(outcome string) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(outcome).Inc()
}

func (m *Metrics) dead(reason string) {
	if m == nil {
		return
	}
	m.deadLetters.WithLabelValues(reason).Inc()
	m.deliveries.WithLabelValues("dead").Inc()
}

func (m *Metrics) supersededN(n int) {
	if m == nil || n == 0 {
		return
	}
	m.superseded.Add(float64(n))
	m.deliveries.WithLabelValues("superseded").Add(float64(n))
}

func (m *Metrics) parked(reason string) {
	if m == nil {
		return
	}
	m.parks.WithLabelValues(reason).Inc()
}
