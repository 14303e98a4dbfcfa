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
		ack: histogramVec("laneway_inbound_ack_duration_seconds", "Time from a request's arrival at POST /in/{source} to its answer (202 only after acks=all), by source and status code.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "source", "code"),
		verifications: counterVec("laneway_inbound_verifications_total", "Verification outcomes committed by the verify stage (verified, rejected, duplicate), by source and rejection reason.", "source", "outcome", "reason"),
		verifyDelay: histogramVec("laneway_inbound_verify_delay_seconds", "Time from a request's receipt to the commit of its verification outcome (replays excluded), by source.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800}, "source"),
		forwarded:     counterVec("laneway_inbound_forwarded_total", "Verified requests published to the events topic, by source.", "source"),
		dedupErrors:   counter("laneway_inbound_dedup_errors_total", "Verify batches whose dedup claims failed (Redis unavailable); their requests were forwarded without dedup."),
		replayed:      counterVec("laneway_inbound_replayed_total", "Captured requests copied for another verification by replay jobs, by action (reverify, republish).", "action"),
		refused:       counterVec("laneway_inbound_refused_total", "Requests the front door refused before storing them whole, by source (_unknown for unknown sources) and reason.", "source", "reason"),
		refusedUnkept: counter("laneway_inbound_refused_unkept_total", "Refused requests only counted, not kept as metadata, because the keep budget (RefusedKeepRate) was spent."),
	}
	reg.MustRegister(m.ack, m.verifications, m.verifyDelay, m.forwarded, m.dedupErrors, m.replayed, m.refused, m.refusedUnkept)
	return m
}

// counterVec, counter and histogramVec make the metrics.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
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
