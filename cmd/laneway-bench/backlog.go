package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// backlogLimit is the hanging endpoint's max_concurrency in the backlog
// scenario: one attempt at a time, every one of them timing out.
const backlogLimit = 1

// backlogSample is the state sampled every -sample interval.
type backlogSample struct {
	Seconds      float64 `json:"t_s"`
	Published    int64   `json:"published"`
	FannedOut    float64 `json:"fanned_out"`
	Parked       float64 `json:"parked_backlog"`
	Pending      float64 `json:"pending_in_memory"`
	WatermarkLag float64 `json:"watermark_lag_offsets"`
	memory
}

type backlogReport struct {
	Events           int                `json:"events"`
	Entities         int                `json:"entities"`
	States           bool               `json:"states"` // state updates (coalesce: true) rather than facts
	Embedded         bool               `json:"embedded_broker"`
	PublishSeconds   float64            `json:"publish_s"`
	PublishPerSecond float64            `json:"publish_per_s"`
	AllParkedSeconds float64            `json:"all_parked_after_s"`
	Baseline         memory             `json:"baseline"`
	MaxRSSMB         float64            `json:"max_rss_mb"`
	MaxHeapInuseMB   float64            `json:"max_heap_inuse_mb"`
	FinalParked      float64            `json:"final_parked_backlog"`
	Superseded       float64            `json:"superseded"` // states replaced by a newer revision
	ParksByReason    map[string]float64 `json:"lanes_parked_by_reason"`
	Attempts         map[string]float64 `json:"attempts_by_outcome"`
	MaxInFlight      int64              `json:"max_in_flight"`
	Samples          []backlogSample    `json:"samples"`
	Receiver         benchrecv.Stats    `json:"receiver"`
	Incomplete       string             `json:"incomplete,omitempty"`
}

// rssGoalMB is the bounded-memory goal for a backlog of a million.
const rssGoalMB = 256

func runBacklog(ctx context.Context, cfg config, stderr io.Writer) (report, error) {
	p := newPlan(cfg.DataBytes, false, stream{count: cfg.Events, endpoints: 1, entities: cfg.Entities, rate: cfg.Rate, states: cfg.States})
	r, err := startRig(ctx, cfg, p, 1, func(int) int { return backlogLimit }, stderr)
	if err != nil {
		return nil, err
	}
	defer r.close(stderr)
	hold := make(chan struct{})
	// Released before the rig closes, so Laneway's stop has nothing to wait for.
	defer close(hold)
	r.recv.SetBehavior(0, benchrecv.Behavior{Hold: hold})
	rep := &backlogReport{Events: cfg.Events, Entities: cfg.Entities, States: cfg.States, Embedded: len(cfg.KafkaBrokers) == 0}
	measureBacklog(ctx, cfg, r, rep, stderr)
	return rep, nil
}

func measureBacklog(ctx context.Context, cfg config, r *rig, rep *backlogReport, stderr io.Writer) {
	runtime.GC()
	rep.Baseline = readMemory()
	pb := &publishing{}
	start := time.Now()
	var mu sync.Mutex
	take := func(now time.Time) {
		s := backlogSampleOf(r, pb, now.Sub(start))
		mu.Lock()
		rep.Samples = append(rep.Samples, s)
		mu.Unlock()
		fmt.Fprintf(stderr, "  %5.1fs  published %d  fanned out %.0f  parked %.0f  pending %.0f  watermark lag %.0f  rss %.0fMB  heap %.0fMB\n",
			s.Seconds, s.Published, s.FannedOut, s.Parked, s.Pending, s.WatermarkLag, s.RSSMB, s.HeapInuseMB)
	}
	smp := startSampler(cfg.Sample, take)
	defer smp.stop()
	fmt.Fprintf(stderr, "publishing %d %s to one endpoint that never answers...\n", cfg.Events, rep.kind())
	if err := publishPlan(ctx, r.prod, r.plan, pb); err != nil {
		rep.Incomplete = err.Error()
		return
	}
	rep.PublishSeconds = pb.end.Sub(pb.start).Seconds()
	rep.PublishPerSecond = float64(cfg.Events) / rep.PublishSeconds
	if err := pollUntil(ctx, time.Second, func() bool { return allParked(ctx, r, cfg.Events) }); err != nil {
		rep.Incomplete = fmt.Sprintf("the backlog was not all parked: %v", err)
	}
	rep.AllParkedSeconds = time.Since(start).Seconds()
	timing.Sleep(ctx, cfg.BacklogSettle)
	smp.stop()
	take(time.Now())
	rep.finish(r)
}

func backlogSampleOf(r *rig, pb *publishing, since time.Duration) backlogSample {
	snap := snapshot(r.lw.app.Registry())
	id := r.ids[0]
	return backlogSample{
		Seconds: since.Seconds(), Published: pb.acked.Load(),
		FannedOut: snap.sum("laneway_fanout_deliveries_total"), Parked: snap.value("laneway_endpoint_parked", "endpoint", id),
		Pending: snap.value("laneway_endpoint_pending", "endpoint", id), WatermarkLag: snap.sum("laneway_partition_watermark_lag_offsets"),
		memory: readMemory(),
	}
}

// allParked: every event is fanned out and every deliveries partition's
// commit is at its end, so the whole backlog waits in the parked topic (or
// in the lane's window). The commit is read from Kafka rather than from
// laneway_partition_watermark_lag_offsets, which counts the transaction
// marker at the end of each partition and so never drops below 1.
func allParked(ctx context.Context, r *rig, events int) bool {
	if snapshot(r.lw.app.Registry()).sum("laneway_fanout_deliveries_total") < float64(events) {
		return false
	}
	off, err := r.offsets(ctx)
	if err != nil {
		return false
	}
	for _, pp := range commitProgress([]offsetSample{off}) {
		if !pp.CaughtUp {
			return false
		}
	}
	return true
}

// pollUntil checks cond every interval until it holds or ctx ends: for
// conditions too costly to check at waitUntil's pace (a registry gather).
func pollUntil(ctx context.Context, every time.Duration, cond func() bool) error {
	for !cond() {
		if !timing.Sleep(ctx, every) {
			return ctx.Err()
		}
	}
	return nil
}

func (rep *backlogReport) finish(r *rig) {
	for _, s := range rep.Samples {
		rep.MaxRSSMB = max(rep.MaxRSSMB, s.RSSMB, s.PeakRSSMB)
		rep.MaxHeapInuseMB = max(rep.MaxHeapInuseMB, s.HeapInuseMB)
	}
	snap := snapshot(r.lw.app.Registry())
	rep.FinalParked = snap.value("laneway_endpoint_parked", "endpoint", r.ids[0])
	rep.Superseded = snap.sum("laneway_deliveries_superseded_total")
	rep.ParksByReason = snap.byLabel("laneway_lanes_parked_total", "reason")
	rep.Attempts = snap.byLabel("laneway_delivery_attempts_total", "outcome")
	rep.MaxInFlight = r.recv.MaxInFlight(0)
	rep.Receiver = r.recv.Stats()
}

// kind names what the run published.
func (rep *backlogReport) kind() string {
	if rep.States {
		return "state updates (coalesce: true)"
	}
	return "facts"
}

func (rep *backlogReport) failures() []string {
	var out []string
	if rep.Incomplete != "" {
		out = append(out, rep.Incomplete)
	}
	if rep.MaxInFlight > backlogLimit {
		out = append(out, fmt.Sprintf("the endpoint saw %d concurrent requests, limit %d", rep.MaxInFlight, backlogLimit))
	}
	// On the embedded broker the backlog itself is in this process's
	// memory, so only a real broker's run is held to the goal.
	if !rep.Embedded && rep.MaxRSSMB >= rssGoalMB {
		out = append(out, fmt.Sprintf("max RSS %.0f MB, goal under %d MB", rep.MaxRSSMB, rssGoalMB))
	}
	if rep.Receiver.OrderViolations > 0 {
		out = append(out, fmt.Sprintf("%d per-entity order violations", rep.Receiver.OrderViolations))
	}
	return out
}

func (rep *backlogReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "  one endpoint, max_concurrency %d, that never answers (every attempt times out); %d %s over %d entities, published as fast as Kafka accepts\n",
		backlogLimit, rep.Events, rep.kind(), rep.Entities)
	if rep.Embedded {
		fmt.Fprintf(w, "  NOTE: embedded broker: the RSS below includes kfake, which holds every record of the run in this process\n")
	}
	fmt.Fprintf(w, "\nPublished in %.1fs (%.0f events/s); whole backlog parked %.0fs after the first publish\n",
		rep.PublishSeconds, rep.PublishPerSecond, rep.AllParkedSeconds)
	b := rep.Baseline
	fmt.Fprintf(w, "Memory: before publishing RSS %.0f MB, heap in use %.0f MB; max RSS %.0f MB (kernel high-water mark), max heap in use %.0f MB sampled (goal: flat, under %d MB)\n",
		b.RSSMB, b.HeapInuseMB, rep.MaxRSSMB, rep.MaxHeapInuseMB, rssGoalMB)
	fmt.Fprintf(w, "\n     t   published   fanned out     parked   pending   wm lag    RSS MB   peak MB   heap MB   goroutines\n")
	for _, s := range rep.Samples {
		fmt.Fprintf(w, "  %4.0fs  %10d  %11.0f  %9.0f  %8.0f  %7.0f  %8.0f  %8.0f  %8.0f  %10d\n",
			s.Seconds, s.Published, s.FannedOut, s.Parked, s.Pending, s.WatermarkLag, s.RSSMB, s.PeakRSSMB, s.HeapInuseMB, s.Goroutines)
	}
	fmt.Fprintf(w, "\nAt the end: %.0f parked, %.0f superseded; lanes parked by reason %v; attempts by outcome %v; max in flight %d (limit %d)\n",
		rep.FinalParked, rep.Superseded, rep.ParksByReason, rep.Attempts, rep.MaxInFlight, backlogLimit)
	fmt.Fprintf(w, "Receiver (arrivals; timed-out attempts are retried, so duplicates are expected here): %+v\n", rep.Receiver)
}
