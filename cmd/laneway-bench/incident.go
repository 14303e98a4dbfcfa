package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// The incident's shape: endpoint 0 is the slow one, the others are healthy.
// Healthy endpoints cycle over a few entities each; the slow one over many,
// so per-entity order never keeps it below its max_concurrency.
const (
	slowEndpoint    = 0
	healthyEntities = 8
	slowEntities    = 64
)

// incidentSample is the state sampled every -sample interval.
type incidentSample struct {
	Seconds           float64 `json:"t_s"`
	SlowParked        float64 `json:"slow_parked"`
	SlowOldestAgeS    float64 `json:"slow_oldest_pending_age_s"`
	SlowInFlight      int64   `json:"slow_in_flight"`
	WatermarkLagTotal float64 `json:"watermark_lag_offsets_total"`
	LanesParked       float64 `json:"lanes_parked_total"`
	// The slow endpoint's deliveries partition: its committed and end
	// offsets, to show the commit held until the lane parks (-1: unknown).
	SlowPartitionCommitted int64 `json:"slow_partition_committed"`
	SlowPartitionEnd       int64 `json:"slow_partition_end"`
	memory
}

type incidentReport struct {
	Endpoints          int                 `json:"endpoints"`
	HealthyEndpoints   int                 `json:"healthy_endpoints"`
	HealthyRate        float64             `json:"healthy_events_per_s"`
	HealthyLimit       int                 `json:"healthy_max_concurrency"`
	ReceiverDelayMs    float64             `json:"healthy_receiver_delay_ms"`
	SlowRate           float64             `json:"slow_events_per_s"`
	SlowDelaySeconds   float64             `json:"slow_answer_s"`
	SlowLimit          int                 `json:"slow_max_concurrency"`
	DurationSeconds    float64             `json:"duration_s"`
	ReceiverPorts      int                 `json:"receiver_ports"`
	EndpointsCreatedS  float64             `json:"endpoint_creation_s"`
	PublishedHealthy   int                 `json:"published_healthy"`
	PublishedSlow      int                 `json:"published_slow"`
	PublishSeconds     float64             `json:"publish_s"`
	HealthyReceived    int                 `json:"healthy_received"`
	HealthyLatency     latencySummary      `json:"healthy_publish_to_receipt"`
	WindowSeconds      float64             `json:"window_s"`
	Windows            []incidentWindow    `json:"windows"`
	DeliveriesPerSec   float64             `json:"deliveries_per_s"`
	CPUCores           float64             `json:"cpu_cores"`
	SlowReceived       int                 `json:"slow_received"`
	SlowMaxInFlight    int64               `json:"slow_max_in_flight"`
	SlowPartition      int32               `json:"slow_partition"`
	SlowParkedAtEnd    float64             `json:"slow_parked_at_end"`
	SlowOldestAgeAtEnd float64             `json:"slow_oldest_pending_age_s_at_end"`
	SlowPendingAtEnd   float64             `json:"slow_pending_in_memory_at_end"`
	ParksByReason      map[string]float64  `json:"lanes_parked_by_reason"`
	Outcomes           map[string]float64  `json:"deliveries_by_outcome"`
	Attempts           map[string]float64  `json:"attempts_by_outcome"`
	Commits            []partitionProgress `json:"commits"`
	// FirstCommitSeconds is when the delivery group first committed
	// anything, from the first sample: a group that forms late (a loaded
	// machine) trails every partition by that much before any lane runs.
	FirstCommitSeconds float64          `json:"first_commit_seconds"`
	OffsetSamples      int              `json:"offset_samples"`
	Samples            []incidentSample `json:"samples"`
	MaxRSSMB           float64          `json:"max_rss_mb"`
	RSSGoalMB          float64          `json:"rss_goal_mb,omitempty"`
	Receiver           benchrecv.Stats  `json:"receiver"`
	Incomplete         string           `json:"incomplete,omitempty"`
	parkAfter          time.Duration
	sample             time.Duration
}

// incidentWindow is a latency window plus the slow lane's state at its end.
type incidentWindow struct {
	windowStat
	SlowParked float64 `json:"slow_parked_at_end"`
}

// incidentRun is the state of one incident run.
type incidentRun struct {
	cfg     config
	rig     *rig
	plan    *plan
	start   time.Time
	mu      sync.Mutex
	samples []incidentSample
	offsets []offsetSample
}

func runIncident(ctx context.Context, cfg config, stderr io.Writer) (report, error) {
	slowCount := int(cfg.SlowRate * cfg.Duration.Seconds())
	healthyCount := int(cfg.HealthyRate * cfg.Duration.Seconds())
	if cfg.Endpoints < 2 || slowCount < 1 || healthyCount < 1 {
		return nil, fmt.Errorf("incident: needs at least 2 endpoints and a load of at least one event each")
	}
	p := newPlan(cfg.DataBytes, true,
		stream{count: slowCount, first: slowEndpoint, endpoints: 1, entities: slowEntities, rate: cfg.SlowRate},
		stream{count: healthyCount, first: 1, endpoints: cfg.Endpoints - 1, entities: healthyEntities, rate: cfg.HealthyRate},
	)
	limit := func(n int) int {
		if n == slowEndpoint {
			return cfg.SlowLimit
		}
		return cfg.MaxConcurrency
	}
	t0 := time.Now()
	r, err := startRig(ctx, cfg, p, cfg.Endpoints, limit, stderr)
	if err != nil {
		return nil, err
	}
	defer r.close(stderr)
	created := time.Since(t0)
	r.recv.SetBehavior(slowEndpoint, benchrecv.Behavior{Delay: cfg.SlowDelay})
	run := &incidentRun{cfg: cfg, rig: r, plan: p}
	rep := run.measure(ctx, stderr)
	rep.EndpointsCreatedS = created.Seconds()
	return rep, nil
}

// measure publishes for the duration, waits for the healthy deliveries and
// evaluates the run.
func (run *incidentRun) measure(ctx context.Context, stderr io.Writer) *incidentReport {
	cfg, r := run.cfg, run.rig
	rep := run.newReport()
	fmt.Fprintf(stderr, "publishing %.0f events/s to %d healthy endpoints and %.0f/s to the slow one for %s...\n",
		cfg.HealthyRate, cfg.Endpoints-1, cfg.SlowRate, cfg.Duration)
	pb := &publishing{}
	run.start = time.Now()
	cpu0 := processCPU()
	smp := startSampler(cfg.Sample, func(now time.Time) { run.takeSample(ctx, now, pb, stderr) })
	if err := publishPlan(ctx, r.prod, run.plan, pb); err != nil {
		rep.Incomplete = err.Error()
	}
	want := int64(run.plan.streams[1].count)
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	if err := waitUntil(waitCtx, func() bool { return run.healthyReceived() >= want }); err != nil && rep.Incomplete == "" {
		rep.Incomplete = fmt.Sprintf("healthy deliveries: %d of %d arrived: %v", run.healthyReceived(), want, err)
	}
	cancel()
	wall := time.Since(run.start)
	rep.CPUCores = (processCPU() - cpu0).Seconds() / wall.Seconds()
	// Let the last commits land (commit interval 1 s) before the final sample.
	timing.Sleep(ctx, 3*time.Second)
	smp.stop()
	run.takeSample(ctx, time.Now(), pb, stderr)
	run.fill(rep, pb)
	return rep
}

func (run *incidentRun) newReport() *incidentReport {
	cfg := run.cfg
	return &incidentReport{
		Endpoints: cfg.Endpoints, HealthyEndpoints: cfg.Endpoints - 1, HealthyRate: cfg.HealthyRate,
		HealthyLimit: cfg.MaxConcurrency, ReceiverDelayMs: ms(cfg.ReceiverDelay), SlowRate: cfg.SlowRate,
		SlowDelaySeconds: cfg.SlowDelay.Seconds(), SlowLimit: cfg.SlowLimit, DurationSeconds: cfg.Duration.Seconds(),
		ReceiverPorts: run.rig.recv.Ports(), PublishedSlow: run.plan.streams[0].count,
		PublishedHealthy: run.plan.streams[1].count, WindowSeconds: cfg.Window.Seconds(), parkAfter: cmpDur(cfg.ParkAfter, 30*time.Second), sample: cfg.Sample,
		RSSGoalMB: cfg.RSSGoalMB,
	}
}

func cmpDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// slowReceived counts the slow endpoint's distinct deliveries so far.
func (run *incidentRun) slowReceived() int64 {
	s := run.plan.streams[0]
	n := int64(0)
	for slot := s.base; slot < s.base+s.count; slot++ {
		if run.rig.recv.ReceivedAt(slot) != 0 {
			n++
		}
	}
	return n
}

func (run *incidentRun) healthyReceived() int64 { return run.rig.recv.Received() - run.slowReceived() }

// takeSample records the slow lane's state, the commits and memory, and
// prints a progress line.
func (run *incidentRun) takeSample(ctx context.Context, now time.Time, pb *publishing, stderr io.Writer) {
	r := run.rig
	snap := snapshot(r.lw.app.Registry())
	slowID := r.ids[slowEndpoint]
	s := incidentSample{
		Seconds:        now.Sub(run.start).Seconds(),
		SlowParked:     snap.value("laneway_endpoint_parked", "endpoint", slowID),
		SlowOldestAgeS: snap.value("laneway_endpoint_oldest_pending_age_seconds", "endpoint", slowID),
		SlowInFlight:   r.recv.InFlight(slowEndpoint), WatermarkLagTotal: snap.sum("laneway_partition_watermark_lag_offsets"),
		LanesParked: snap.sum("laneway_lanes_parked_total"), memory: readMemory(),
	}
	off, err := r.offsets(ctx)
	s.SlowPartitionCommitted, s.SlowPartitionEnd = -1, -1
	if err == nil {
		p := r.partitionOf(slowEndpoint)
		if c, ok := off.committed[p]; ok {
			s.SlowPartitionCommitted = c
		}
		s.SlowPartitionEnd = off.end[p]
	}
	run.mu.Lock()
	run.samples = append(run.samples, s)
	if err == nil {
		run.offsets = append(run.offsets, off)
	}
	run.mu.Unlock()
	fmt.Fprintf(stderr, "  %5.1fs  published %d  healthy received %d  slow received %d, in flight %d, parked %.0f, oldest %.0fs  watermark lag %.0f  rss %.0fMB\n",
		s.Seconds, pb.acked.Load(), run.healthyReceived(), run.slowReceived(), s.SlowInFlight, s.SlowParked,
		s.SlowOldestAgeS, s.WatermarkLagTotal, s.RSSMB)
}

// fill evaluates the receipts, samples and final metrics.
func (run *incidentRun) fill(rep *incidentReport, pb *publishing) {
	r := run.rig
	rep.PublishSeconds = pb.end.Sub(pb.start).Seconds()
	points, last, total := run.healthyPoints()
	rep.HealthyReceived = len(points)
	rep.HealthyLatency = summarize(points)
	if last > 0 {
		rep.DeliveriesPerSec = float64(total) / time.Unix(0, last).Sub(pb.start).Seconds()
	}
	run.mu.Lock()
	rep.Samples, rep.OffsetSamples = run.samples, len(run.offsets)
	for _, s := range run.samples {
		rep.MaxRSSMB = max(rep.MaxRSSMB, s.RSSMB, s.PeakRSSMB)
	}
	rep.Commits = commitProgress(run.offsets)
	rep.FirstCommitSeconds = firstCommit(run.offsets).Seconds()
	run.mu.Unlock()
	rep.Windows = run.windows(points)
	rep.SlowReceived = int(run.slowReceived())
	rep.SlowMaxInFlight = r.recv.MaxInFlight(slowEndpoint)
	rep.SlowPartition = r.partitionOf(slowEndpoint)
	snap := snapshot(r.lw.app.Registry())
	slowID := r.ids[slowEndpoint]
	rep.SlowParkedAtEnd = snap.value("laneway_endpoint_parked", "endpoint", slowID)
	rep.SlowOldestAgeAtEnd = snap.value("laneway_endpoint_oldest_pending_age_seconds", "endpoint", slowID)
	rep.SlowPendingAtEnd = snap.value("laneway_endpoint_pending", "endpoint", slowID)
	rep.ParksByReason = snap.byLabel("laneway_lanes_parked_total", "reason")
	rep.Outcomes = snap.byLabel("laneway_deliveries_total", "outcome")
	rep.Attempts = snap.byLabel("laneway_delivery_attempts_total", "outcome")
	rep.Receiver = r.recv.Stats()
}

// healthyPoints returns the healthy deliveries' latencies, the last receipt
// (Unix ns) and the number of deliveries of any endpoint received.
func (run *incidentRun) healthyPoints() ([]latencyPoint, int64, int) {
	h := run.plan.streams[1]
	points := make([]latencyPoint, 0, h.count)
	var last int64
	for slot := h.base; slot < h.base+h.count; slot++ {
		at := run.rig.recv.ReceivedAt(slot)
		if at == 0 {
			continue
		}
		pub := run.plan.at[slot]
		points = append(points, latencyPoint{published: time.Duration(pub - run.start.UnixNano()), latency: time.Duration(at - pub)})
		last = max(last, at)
	}
	return points, last, len(points) + int(run.slowReceived())
}

// windows adds to each latency window the slow backlog sampled at its end.
func (run *incidentRun) windows(points []latencyPoint) []incidentWindow {
	var out []incidentWindow
	for _, w := range latencyWindows(points, run.cfg.Window) {
		iw := incidentWindow{windowStat: w}
		end := w.StartSeconds + run.cfg.Window.Seconds()
		for _, s := range run.samples {
			if s.Seconds <= end {
				iw.SlowParked = s.SlowParked
			}
		}
		out = append(out, iw)
	}
	return out
}

func (rep *incidentReport) failures() []string {
	var out []string
	if rep.Incomplete != "" {
		out = append(out, rep.Incomplete)
	}
	if missing := rep.PublishedHealthy - rep.HealthyReceived; missing > 0 {
		out = append(out, fmt.Sprintf("%d healthy deliveries missing", missing))
	}
	if rep.RSSGoalMB > 0 && rep.MaxRSSMB >= rep.RSSGoalMB {
		out = append(out, fmt.Sprintf("max RSS %.0f MB, goal under %.0f MB", rep.MaxRSSMB, rep.RSSGoalMB))
	}
	if rep.SlowMaxInFlight > int64(rep.SlowLimit) {
		out = append(out, fmt.Sprintf("slow endpoint saw %d concurrent requests, limit %d", rep.SlowMaxInFlight, rep.SlowLimit))
	}
	// A lane may hold its partition's commit up to park-after, plus a
	// commit interval and the sampling resolution.
	allowed := (rep.parkAfter + 2*rep.sample + 2*time.Second).Seconds() + rep.FirstCommitSeconds
	for _, c := range rep.Commits {
		if !c.CaughtUp {
			out = append(out, fmt.Sprintf("partition %d: commit %d behind end %d after the healthy traffic was delivered", c.Partition, c.FinalCommitted, c.FinalEnd))
		}
		if c.MaxTrailSeconds > allowed {
			out = append(out, fmt.Sprintf("partition %d: commit trailed the log by %.0fs (allowed %.0fs)", c.Partition, c.MaxTrailSeconds, allowed))
		}
	}
	return append(out, receiptsCheck(rep.Receiver)...)
}

func (rep *incidentReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "  %d endpoints: 1 slow (answers in %gs, max_concurrency %d, %.0f events/s) + %d healthy (answer after %gms, max_concurrency %d, %.0f events/s in all, round-robin)\n",
		rep.Endpoints, rep.SlowDelaySeconds, rep.SlowLimit, rep.SlowRate, rep.HealthyEndpoints, rep.ReceiverDelayMs, rep.HealthyLimit, rep.HealthyRate)
	fmt.Fprintf(w, "  the attempt timeout is raised from the contract's 5s so that the 28s endpoint answers, as in the incident, instead of timing out\n")
	fmt.Fprintf(w, "  receiver: %d ports for %d endpoints; endpoints created in %.1fs\n", rep.ReceiverPorts, rep.Endpoints, rep.EndpointsCreatedS)
	fmt.Fprintf(w, "\nLoad: %ds; published %d healthy + %d slow events in %.1fs; process %.2f cores busy\n",
		int(rep.DurationSeconds), rep.PublishedHealthy, rep.PublishedSlow, rep.PublishSeconds, rep.CPUCores)
	l := rep.HealthyLatency
	fmt.Fprintf(w, "Healthy: %d of %d delivered; publish → receipt p50 %s, p90 %s, p99 %s, max %s; %.0f deliveries/s overall\n",
		rep.HealthyReceived, rep.PublishedHealthy, fmtMs(l.P50Ms), fmtMs(l.P90Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs), rep.DeliveriesPerSec)
	fmt.Fprintf(w, "\n  window (by publish time)  deliveries      p50      p99      max   slow parked backlog at end\n")
	for _, win := range rep.Windows {
		fmt.Fprintf(w, "  %4.0f–%-4.0fs              %10d %8s %8s %8s   %.0f\n", win.StartSeconds, win.StartSeconds+rep.WindowSeconds,
			win.Count, fmtMs(win.P50Ms), fmtMs(win.P99Ms), fmtMs(win.MaxMs), win.SlowParked)
	}
	fmt.Fprintf(w, "\nSlow endpoint: %d delivered of %d; max in flight %d (limit %d); at the end %.0f parked, %.0f pending in memory, oldest pending %.0fs\n",
		rep.SlowReceived, rep.PublishedSlow, rep.SlowMaxInFlight, rep.SlowLimit, rep.SlowParkedAtEnd, rep.SlowPendingAtEnd, rep.SlowOldestAgeAtEnd)
	fmt.Fprintf(w, "  lanes parked by reason %v; deliveries by outcome %v; attempts by outcome %v\n", rep.ParksByReason, rep.Outcomes, rep.Attempts)
	fmt.Fprintf(w, "\nCommitted offsets of the deliveries group (%d samples, every %s; the slow endpoint is on partition %d)\n", rep.OffsetSamples, rep.sample, rep.SlowPartition)
	fmt.Fprintf(w, "  partition   first → final committed   end   caught up   max trail behind the log\n")
	for _, c := range rep.Commits {
		fmt.Fprintf(w, "  %9d   %7d → %-7d       %7d   %-9v   %.0fs\n", c.Partition, c.FirstCommitted, c.FinalCommitted, c.FinalEnd, c.CaughtUp, c.MaxTrailSeconds)
	}
	fmt.Fprintf(w, "\nMemory: max RSS %.0f MB (kernel high-water mark)", rep.MaxRSSMB)
	if rep.RSSGoalMB > 0 {
		fmt.Fprintf(w, ", goal under %.0f MB", rep.RSSGoalMB)
	}
	fmt.Fprintf(w, "\n       t    RSS MB   heap MB   slow parked   slow in flight\n")
	for _, s := range rep.Samples {
		fmt.Fprintf(w, "  %6.1fs  %8.0f  %8.0f  %12.0f  %15d\n", s.Seconds, s.RSSMB, s.HeapInuseMB, s.SlowParked, s.SlowInFlight)
	}
	fmt.Fprintf(w, "\nReceiver: %+v\n", rep.Receiver)
}
