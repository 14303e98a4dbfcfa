package engine

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/laneway/laneway/partition"
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
	parkedExpired     prometheus.Counter
	staleSkipped      prometheus.Counter
	fenceHeartbeats   *prometheus.CounterVec
	leaseRemaining    prometheus.Gauge
	withheld          prometheus.Counter
	timestampRefused  *prometheus.CounterVec
}

// NewMetrics registers the engine metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		eventsConsumed:    counter("laneway_fanout_events_total", "Events read by the fan-out stage and committed."),
		invalidEvents:     counter("laneway_fanout_invalid_events_total", "Events that were not valid envelopes and went to dead letters."),
		deliveriesCreated: counter("laneway_fanout_deliveries_total", "Deliveries written by the fan-out stage."),
		unmatchedEvents:   counter("laneway_fanout_unmatched_events_total", "Valid events no endpoint subscribed to."),
		attempts:          counterVec("laneway_delivery_attempts_total", "HTTP delivery attempts by classified outcome.", "outcome"),
		attemptSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "laneway_delivery_attempt_duration_seconds", Help: "Duration of one HTTP delivery attempt.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		deliveries:  counterVec("laneway_deliveries_total", "Deliveries ended, by final outcome (delivered, dead, superseded).", "outcome"),
		deadLetters: counterVec("laneway_dead_letters_total", "Dead letters written, by reason.", "reason"),
		superseded:  counter("laneway_deliveries_superseded_total", "Pending state updates replaced by a newer revision (coalescing)."),
		parks:       counterVec("laneway_lanes_parked_total", "Lanes moved to the parked topic, by reason (park_after, lane_buffer, lane_bytes, instance_bytes, paused, breaker).", "reason"),
		parkedExpired: counter("laneway_parked_expired_offsets_total",
			"Parked offsets deleted by retention before a parked lane read them back (an upper bound of parked deliveries lost); it must stay 0."),
		staleSkipped: counter("laneway_parked_stale_skipped_total",
			"Times an owner skipped a stale parked record: an earlier owner's append that landed after a later owner took the partition over. Nothing is lost; the delivery is replayed."),
		fenceHeartbeats: counterVec("laneway_fence_heartbeats_total",
			"The delivery stage's own group heartbeats, by outcome (renewed, rebalancing, fenced, failed, not_joined); fenced: the group no longer counts this member in.", "outcome"),
		leaseRemaining: prometheus.NewGauge(prometheus.GaugeOpts{Name: "laneway_fence_lease_remaining_seconds",
			Help: "How long the member's group lease had left after its last fence heartbeat; below the attempt timeout, no attempt starts."}),
		withheld: counter("laneway_fence_attempts_withheld_total",
			"Attempts not sent because the member's lease would end before them (made again once it is renewed, or by the next owner)."),
		timestampRefused: counterVec("laneway_produce_timestamp_refused_total",
			"Parked appends and dead letters (kind) the broker refused for their timestamp (INVALID_TIMESTAMP: this host's clock runs ahead of the broker's). They are retried but cannot land until the clock or the topic is fixed; it must stay 0.", "kind"),
	}
	// Both series exist from the start, so an alert on their increase
	// sees the first refusal.
	for _, kind := range []string{produceParked, produceDead} {
		m.timestampRefused.WithLabelValues(kind)
	}
	reg.MustRegister(m.fenceHeartbeats, m.leaseRemaining, m.withheld, m.timestampRefused, m.parks, m.parkedExpired, m.staleSkipped,
		m.eventsConsumed, m.invalidEvents, m.deliveriesCreated, m.unmatchedEvents,
		m.attempts, m.attemptSeconds, m.deliveries, m.deadLetters, m.superseded)
	return m
}

// counter and counterVec leave each metric's definition its name and help.
func counter(name, help string) prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

func counterVec(name, help, label string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
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

// ownerMetrics is what a partition.Owner reports to; nil-safe. It also
// tells the stage's OnEvent hook about lanes parked and unparked.
type ownerMetrics struct {
	m         *Metrics
	partition int32
	onEvent   func(Event)
}

func (m *Metrics) forOwner(p int32, onEvent func(Event)) partition.Metrics {
	return ownerMetrics{m: m, partition: p, onEvent: onEvent}
}

func (o ownerMetrics) Attempt(endpointID, outcome string, seconds float64) {
	if o.m != nil {
		o.m.attempts.WithLabelValues(outcome).Inc()
		o.m.attemptSeconds.Observe(seconds)
	}
	o.event(Event{Kind: EventAttempt, Endpoint: endpointID, Reason: outcome})
}

func (o ownerMetrics) Ended(outcome string) {
	if o.m != nil {
		o.m.deliveries.WithLabelValues(outcome).Inc()
	}
}

func (o ownerMetrics) Dead(reason string) {
	if o.m == nil {
		return
	}
	o.m.deadLetters.WithLabelValues(reason).Inc()
	o.m.deliveries.WithLabelValues("dead").Inc()
}

func (o ownerMetrics) Superseded(n int) {
	if o.m == nil || n == 0 {
		return
	}
	o.m.superseded.Add(float64(n))
	o.m.deliveries.WithLabelValues("superseded").Add(float64(n))
}

func (o ownerMetrics) Parked(endpointID, reason string) {
	if o.m != nil {
		o.m.parks.WithLabelValues(reason).Inc()
	}
	o.event(Event{Kind: EventLaneParked, Endpoint: endpointID, Reason: reason})
}

func (o ownerMetrics) Unparked(endpointID string) {
	o.event(Event{Kind: EventLaneUnparked, Endpoint: endpointID})
}

func (o ownerMetrics) event(e Event) {
	if o.onEvent != nil {
		e.Partition = o.partition
		o.onEvent(e)
	}
}

func (o ownerMetrics) ParkedExpired(n int) {
	if o.m != nil {
		o.m.parkedExpired.Add(float64(n))
	}
}

func (o ownerMetrics) StaleSkipped() {
	if o.m != nil {
		o.m.staleSkipped.Inc()
	}
}

// CountDeadLetters counts n dead letters written for reason outside the
// stage: by a batch endpoint's runner, whose events the stage counted as
// delivered to the endpoint's topic already.
func (m *Metrics) CountDeadLetters(reason string, n int) {
	if m != nil {
		m.deadLetters.WithLabelValues(reason).Add(float64(n))
	}
}

// fenceHeartbeat counts one fence heartbeat and the lease it left.
func (m *Metrics) fenceHeartbeat(outcome string, remaining time.Duration) {
	if m == nil {
		return
	}
	m.fenceHeartbeats.WithLabelValues(outcome).Inc()
	m.leaseRemaining.Set(max(0, remaining.Seconds()))
}

// attemptWithheld counts an attempt the lease kept from being sent.
func (m *Metrics) attemptWithheld() {
	if m != nil {
		m.withheld.Inc()
	}
}
