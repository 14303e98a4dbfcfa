package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

type drainReport struct {
	Limit             int     `json:"max_concurrency"`
	Entities          int     `json:"entities"`
	AnswerMs          float64 `json:"answer_ms"`
	Backlog           int     `json:"backlog"`
	BuildSeconds      float64 `json:"build_s"`
	ParkedAtRecovery  float64 `json:"parked_at_recovery"`
	PendingAtRecovery float64 `json:"pending_in_memory_at_recovery"`
	HeldAtRecovery    int64   `json:"held_at_recovery"`
	LanesParked       float64 `json:"lanes_parked"`
	DrainSeconds      float64 `json:"drain_s"`
	DrainPerSecond    float64 `json:"drain_per_s"`
	ExpectedPerSecond float64 `json:"expected_per_s"`
	ParkedAtEnd       float64 `json:"parked_at_end"`
	// EntityFirstWait is, per entity, how long after recovery its first
	// delivery arrived: entities that can go in parallel should all start
	// within about one answer time.
	EntityFirstWaitP50S float64            `json:"entity_first_delivery_wait_p50_s"`
	EntityFirstWaitMaxS float64            `json:"entity_first_delivery_wait_max_s"`
	MaxInFlight         int64              `json:"max_in_flight"`
	Attempts            map[string]float64 `json:"attempts_by_outcome"`
	Receiver            benchrecv.Stats    `json:"receiver"`
	Incomplete          string             `json:"incomplete,omitempty"`
}

// runDrain builds a parked backlog behind an endpoint that hangs, lets it
// recover to a healthy endpoint answering in R, and measures how fast the
// backlog drains against the ideal C/R.
func runDrain(ctx context.Context, cfg config, stderr io.Writer) (report, error) {
	n := cfg.DrainBacklog
	p := newPlan(cfg.DataBytes, false, stream{count: n, endpoints: 1, entities: cfg.DrainEntities})
	r, err := startRig(ctx, cfg, p, 1, func(int) int { return cfg.DrainLimit }, stderr)
	if err != nil {
		return nil, err
	}
	defer r.close(stderr)
	hold := make(chan struct{})
	r.recv.SetBehavior(0, benchrecv.Behavior{Hold: hold})
	rep := &drainReport{
		Limit: cfg.DrainLimit, Entities: cfg.DrainEntities, AnswerMs: ms(cfg.DrainDelay), Backlog: n,
		ExpectedPerSecond: float64(cfg.DrainLimit) / cfg.DrainDelay.Seconds(),
	}
	buildDrainBacklog(ctx, cfg, r, rep, stderr)
	if rep.Incomplete != "" {
		close(hold)
		return rep, nil
	}
	// Recovery: new requests are answered in R, and the held ones now.
	r.recv.SetBehavior(0, benchrecv.Behavior{Delay: cfg.DrainDelay})
	recovered := time.Now()
	close(hold)
	measureDrain(ctx, cfg, r, rep, recovered, stderr)
	return rep, nil
}

// buildDrainBacklog publishes the backlog and waits until the lane is
// parked and every delivery is in the parked topic.
func buildDrainBacklog(ctx context.Context, cfg config, r *rig, rep *drainReport, stderr io.Writer) {
	fmt.Fprintf(stderr, "publishing %d events to an endpoint that hangs (park-after %s)...\n", rep.Backlog, cmpDur(cfg.ParkAfter, 30*time.Second))
	start := time.Now()
	pb := &publishing{}
	if err := publishPlan(ctx, r.prod, r.plan, pb); err != nil {
		rep.Incomplete = err.Error()
		return
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute+cfg.ParkAfter)
	defer cancel()
	parked := func() bool {
		snap := snapshot(r.lw.app.Registry())
		return snap.sum("laneway_lanes_parked_total") >= 1 && allParked(waitCtx, r, rep.Backlog)
	}
	smp := startSampler(cfg.Sample, func(now time.Time) {
		snap := snapshot(r.lw.app.Registry())
		fmt.Fprintf(stderr, "  %5.1fs  published %d  fanned out %.0f  held %d  lanes parked %.0f  watermark lag %.0f\n", now.Sub(start).Seconds(),
			pb.acked.Load(), snap.sum("laneway_fanout_deliveries_total"), r.recv.InFlight(0),
			snap.sum("laneway_lanes_parked_total"), snap.sum("laneway_partition_watermark_lag_offsets"))
	})
	defer smp.stop()
	if err := pollUntil(waitCtx, 200*time.Millisecond, parked); err != nil {
		rep.Incomplete = fmt.Sprintf("the backlog was not parked: %v", err)
		return
	}
	rep.BuildSeconds = time.Since(start).Seconds()
	snap := snapshot(r.lw.app.Registry())
	rep.ParkedAtRecovery = snap.value("laneway_endpoint_parked", "endpoint", r.ids[0])
	rep.PendingAtRecovery = snap.value("laneway_endpoint_pending", "endpoint", r.ids[0])
	rep.LanesParked = snap.sum("laneway_lanes_parked_total")
	rep.HeldAtRecovery = r.recv.InFlight(0)
	fmt.Fprintf(stderr, "  parked after %.1fs: %.0f in the parked topic, %.0f read back into the lane, %d held; recovering\n",
		rep.BuildSeconds, rep.ParkedAtRecovery, rep.PendingAtRecovery, rep.HeldAtRecovery)
}

// measureDrain waits for every delivery and derives the drain rate: the
// deliveries that arrived after recovery, over the time from recovery until
// the last of them was answered (its arrival plus R).
func measureDrain(ctx context.Context, cfg config, r *rig, rep *drainReport, recovered time.Time, stderr io.Writer) {
	before := r.recv.Received()
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute+time.Duration(float64(rep.Backlog)/rep.ExpectedPerSecond*float64(time.Second)))
	defer cancel()
	smp := startSampler(cfg.Sample, func(now time.Time) {
		fmt.Fprintf(stderr, "  %5.1fs after recovery: %d of %d delivered\n", now.Sub(recovered).Seconds(), r.recv.Received(), rep.Backlog)
	})
	err := waitUntil(waitCtx, func() bool { return r.recv.Received() >= int64(rep.Backlog) })
	smp.stop()
	if err != nil {
		rep.Incomplete = fmt.Sprintf("drain: %d of %d delivered: %v", r.recv.Received(), rep.Backlog, err)
	}
	var last int64
	for slot := range rep.Backlog {
		last = max(last, r.recv.ReceivedAt(slot))
	}
	drained := time.Unix(0, last).Add(cfg.DrainDelay)
	rep.DrainSeconds = drained.Sub(recovered).Seconds()
	rep.DrainPerSecond = float64(r.recv.Received()-before) / rep.DrainSeconds
	waits := entityFirstWaits(r, recovered)
	rep.EntityFirstWaitP50S, rep.EntityFirstWaitMaxS = percentile(waits, 50).Seconds(), percentile(waits, 100).Seconds()
	snap := snapshot(r.lw.app.Registry())
	rep.ParkedAtEnd = snap.value("laneway_endpoint_parked", "endpoint", r.ids[0])
	rep.Attempts = snap.byLabel("laneway_delivery_attempts_total", "outcome")
	rep.MaxInFlight = r.recv.MaxInFlight(0)
	rep.Receiver = r.recv.Stats()
}

// entityFirstWaits is, for each entity with a delivery after recovery, the
// time from recovery to its first such delivery, sorted.
func entityFirstWaits(r *rig, recovered time.Time) []time.Duration {
	s := r.plan.streams[0]
	first := map[int]int64{}
	for k := range s.count {
		at := r.recv.ReceivedAt(s.base + k)
		if at < recovered.UnixNano() {
			continue
		}
		if f, ok := first[s.entity(k)]; !ok || at < f {
			first[s.entity(k)] = at
		}
	}
	waits := make([]time.Duration, 0, len(first))
	for _, at := range first {
		waits = append(waits, time.Duration(at-recovered.UnixNano()))
	}
	slices.Sort(waits)
	return waits
}

func (rep *drainReport) failures() []string {
	var out []string
	if rep.Incomplete != "" {
		out = append(out, rep.Incomplete)
	}
	if rep.MaxInFlight > int64(rep.Limit) {
		out = append(out, fmt.Sprintf("the endpoint saw %d concurrent requests, limit %d", rep.MaxInFlight, rep.Limit))
	}
	return append(out, receiptsCheck(rep.Receiver)...)
}

func (rep *drainReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "  one endpoint, max_concurrency C=%d: hangs while %d events over %d entities are published, then answers in R=%s\n",
		rep.Limit, rep.Backlog, rep.Entities, fmtMs(rep.AnswerMs))
	fmt.Fprintf(w, "\nBacklog built in %.1fs: %.0f in the parked topic, %.0f read back into the lane, %d held in flight; %.0f lane parks\n",
		rep.BuildSeconds, rep.ParkedAtRecovery, rep.PendingAtRecovery, rep.HeldAtRecovery, rep.LanesParked)
	fmt.Fprintf(w, "Drain: %.1fs from recovery to the last answer: %.2f deliveries/s; expected C/R = %.2f/s (%.0f%%)\n",
		rep.DrainSeconds, rep.DrainPerSecond, rep.ExpectedPerSecond, 100*rep.DrainPerSecond/rep.ExpectedPerSecond)
	fmt.Fprintf(w, "  first delivery of each entity after recovery: p50 %.1fs, max %.1fs\n", rep.EntityFirstWaitP50S, rep.EntityFirstWaitMaxS)
	fmt.Fprintf(w, "  parked at the end %.0f; max in flight %d (limit %d); attempts by outcome %v\n",
		rep.ParkedAtEnd, rep.MaxInFlight, rep.Limit, rep.Attempts)
	fmt.Fprintf(w, "Receiver: %+v\n", rep.Receiver)
}
