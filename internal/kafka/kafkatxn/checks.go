package kafkatxn

import (
	"cmp"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The safety checks a Repair runs, by name (the metric's check label).
const (
	// CheckMarkers is Landed: a commit's markers reached its partitions.
	CheckMarkers = "markers"
	// CheckHanging is the periodic check for this producer's hanging
	// transactions on its outputs.
	CheckHanging = "hanging"
	// CheckGroupOffsets is the part of both that looks at the group's
	// pending offsets in __consumer_offsets (needs Describe and Read on
	// that topic).
	CheckGroupOffsets = "group_offsets"
)

// Checks tells whether each safety check of a transactional producer could
// run: a check that cannot (the principal lacks a grant, the cluster lacks
// a request) leaves the failure it guards against (F2, F3 of
// docs/reliability.md) unrepaired, so it is said loudly, once: an ERROR
// line when it first cannot run, an INFO line when it can again, and a
// gauge per check, 1 while it cannot, for an alert. It outlives the
// sessions and repairs that report to it. Safe for concurrent use; a nil
// *Checks only logs nothing.
type Checks struct {
	producer    string // the stage: fanout, inbound
	logger      *slog.Logger
	unavailable *prometheus.GaugeVec

	mu   sync.Mutex
	down map[string]bool
}

// NewChecks registers the gauge laneway_txn_safety_check_unavailable
// {producer, check} with reg (nil: none) for the transactional producer of
// stage producer.
func NewChecks(reg prometheus.Registerer, producer string, logger *slog.Logger) *Checks {
	c := &Checks{producer: producer, logger: cmp.Or(logger, slog.Default()), down: map[string]bool{}}
	c.unavailable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name:        "laneway_txn_safety_check_unavailable",
		Help:        "1 while a transaction safety check (markers, hanging, group_offsets) of a stage's transactional producer cannot run, for want of a grant or a request the cluster supports: the broker faults it repairs would go unrepaired.",
		ConstLabels: prometheus.Labels{"producer": producer},
	}, []string{"check"})
	for _, check := range []string{CheckMarkers, CheckHanging, CheckGroupOffsets} {
		c.unavailable.WithLabelValues(check).Set(0)
	}
	if reg != nil {
		reg.MustRegister(c.unavailable)
	}
	return c
}

// Unavailable records that check could not run for err.
func (c *Checks) Unavailable(check string, err error) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down[check] {
		return
	}
	c.down[check] = true
	c.unavailable.WithLabelValues(check).Set(1)
	c.logger.Error("a transaction safety check cannot run: the broker faults it repairs would go unrepaired; grant what docs/deploy.md's ACL table lists",
		"producer", c.producer, "check", check, "err", err)
}

// Ran records that check ran.
func (c *Checks) Ran(check string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.down[check] {
		return
	}
	c.down[check] = false
	c.unavailable.WithLabelValues(check).Set(0)
	c.logger.Info("a transaction safety check runs again", "producer", c.producer, "check", check)
}

// Down reports whether check could not run when last tried.
func (c *Checks) Down(check string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down[check]
}
