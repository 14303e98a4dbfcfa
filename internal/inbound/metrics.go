package inbound

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// unknownSourceLabel labels requests to sources that do not exist, so that
// random paths cannot create series. It cannot clash with a source id,
// which starts with a letter or digit.
const unknownSourceLabel = "_unknown"

// metrics are the front door's Prometheus metrics, all laneway_inbound_*.
type metrics struct {
	ack           *prometheus.HistogramVec // source, code
	verifications *prometheus.CounterVec   // source, outcome, reason
	verifyDelay   *prometheus.HistogramVec // source
	forwarded     *prometheus.CounterVec   // source
	dedupErrors   prometheus.Counter
	replayed      *prometheus.CounterVec // action
	refused       *prometheus.CounterVec // source, reason
	refusedUnkept prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		ack: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "laneway_inbound_ack_duration_seconds",
			Help:    "Time from a request's arrival at POST /in/{source} to its answer (202 only after acks=all), by source and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"source", "code"}),
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "laneway_inbound_verifications_total",
			Help: "Verification outcomes committed by the verify stage (verified, rejected, duplicate), by source and rejection reason.",
		}, []string{"source", "outcome", "reason"}),
		verifyDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "laneway_inbound_verify_delay_seconds",
			Help:    "Time from a request's receipt to the commit of its verification outcome (replays excluded), by source.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800},
		}, []string{"source"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "laneway_inbound_forwarded_total",
			Help: "Verified requests published to the events topic, by source.",
		}, []string{"source"}),
		dedupErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "laneway_inbound_dedup_errors_total",
			Help: "Verify batches whose dedup claims failed (Redis unavailable); their requests were forwarded without dedup.",
		}),
		replayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "laneway_inbound_replayed_total",
			Help: "Captured requests copied for another verification by replay jobs, by action (reverify, republish).",
		}, []string{"action"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "laneway_inbound_refused_total",
			Help: "Requests the front door refused before storing them whole, by source (_unknown for unknown sources) and reason.",
		}, []string{"source", "reason"}),
		refusedUnkept: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "laneway_inbound_refused_unkept_total",
			Help: "Refused requests only counted, not kept as metadata, because the keep budget (RefusedKeepRate) was spent.",
		}),
	}
	reg.MustRegister(m.ack, m.verifications, m.verifyDelay, m.forwarded, m.dedupErrors, m.replayed, m.refused, m.refusedUnkept)
	return m
}

func (m *metrics) observeAck(source string, code int, d time.Duration) {
	m.ack.WithLabelValues(source, strconv.Itoa(code)).Observe(d.Seconds())
}

// committed records the outcomes of one committed verify transaction.
func (m *metrics) committed(items []Item, now time.Time) {
	for i := range items {
		it := &items[i]
		m.verifications.WithLabelValues(it.Source, it.Status, it.Reason).Inc()
		if it.Status == StatusVerified {
			m.forwarded.WithLabelValues(it.Source).Inc()
		}
		if it.ReplayOf == "" {
			m.verifyDelay.WithLabelValues(it.Source).Observe(now.Sub(it.ReceivedAt).Seconds())
		}
	}
}
