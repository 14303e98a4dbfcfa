package main

import (
	"context"
	"fmt"
	"io"
)

// costRow is one run of the cost scenario.
type costRow struct {
	Endpoints         int            `json:"endpoints"`
	Ports             int            `json:"receiver_ports"`
	Deliveries        int            `json:"deliveries"`
	Seconds           float64        `json:"seconds"`
	PerSecond         float64        `json:"deliveries_per_s"`
	CPUMicrosPerDeliv float64        `json:"cpu_us_per_delivery"`
	CPUCores          float64        `json:"cpu_cores"`
	AllocPerDeliv     float64        `json:"alloc_bytes_per_delivery"`
	Latency           latencySummary `json:"publish_to_receipt"`
	FailedAttempts    float64        `json:"failed_attempts"`
	Failures          []string       `json:"failures"`
}

type costReport struct {
	Embedded       bool      `json:"embedded_broker"`
	Rate           float64   `json:"rate_per_s"`
	MaxConcurrency int       `json:"max_concurrency"`
	FileLimit      int       `json:"open_file_limit"`
	Rows           []costRow `json:"runs"`
}

// runCost runs the throughput measurement once per endpoint count with the
// same number of deliveries, each on a fresh Laneway, and puts the CPU time
// per delivery side by side.
func runCost(ctx context.Context, cfg config, stderr io.Writer) (report, error) {
	rep := &costReport{Embedded: len(cfg.KafkaBrokers) == 0, Rate: cfg.Rate, MaxConcurrency: cfg.MaxConcurrency, FileLimit: openFileLimit()}
	for _, n := range cfg.CostEndpoints {
		c := cfg
		c.Endpoints, c.Fanout, c.Events, c.RawRequests = n, 1, cfg.CostDeliveries, 0
		// At least one entity per endpoint, or some endpoints get nothing.
		c.Entities = max(cfg.Entities, n)
		fmt.Fprintf(stderr, "\n== %d endpoints, %d deliveries ==\n", n, c.Events)
		res, err := bench(ctx, c, stderr)
		if err != nil {
			return nil, fmt.Errorf("%d endpoints: %w", n, err)
		}
		rep.Rows = append(rep.Rows, costRowOf(c, res))
	}
	return rep, nil
}

func costRowOf(c config, res *result) costRow {
	l := res.Laneway
	ports := portsFor(c)
	if ports == 0 {
		ports = c.Endpoints
	}
	return costRow{
		Endpoints: c.Endpoints, Ports: ports, Deliveries: l.Deliveries, Seconds: l.Seconds, PerSecond: l.PerSecond,
		CPUMicrosPerDeliv: l.Usage.CPUMicrosPerDeliv, CPUCores: l.Usage.CPUCores, AllocPerDeliv: l.Usage.AllocBytesPerDeliv,
		Latency: l.Latency, FailedAttempts: l.Counters.FailedAttempts, Failures: res.Failures,
	}
}

func (rep *costReport) failures() []string {
	var out []string
	for _, r := range rep.Rows {
		for _, f := range r.Failures {
			out = append(out, fmt.Sprintf("%d endpoints: %s", r.Endpoints, f))
		}
	}
	return out
}

func (rep *costReport) writeText(w io.Writer) {
	where := "the real broker runs in another process, so its CPU is not counted"
	if rep.Embedded {
		where = "the embedded broker runs in this process, so its CPU is counted"
	}
	fmt.Fprintf(w, "  CPU time (user+sys) of the whole process from first publish to last receipt, per delivery: Laneway, publisher and receiver; %s\n", where)
	fmt.Fprintf(w, "  publish rate limit %s; max_concurrency %d per endpoint; open-file limit %d\n\n", orUnlimited(rep.Rate), rep.MaxConcurrency, rep.FileLimit)
	fmt.Fprintf(w, "  endpoints   ports   deliveries   seconds   deliveries/s   CPU µs/delivery   cores   alloc B/delivery   p50       p99       failed attempts\n")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "  %9d   %5d   %10d   %7.1f   %12.0f   %15.0f   %5.2f   %16.0f   %-8s  %-8s  %.0f\n",
			r.Endpoints, r.Ports, r.Deliveries, r.Seconds, r.PerSecond, r.CPUMicrosPerDeliv, r.CPUCores, r.AllocPerDeliv,
			fmtMs(r.Latency.P50Ms), fmtMs(r.Latency.P99Ms), r.FailedAttempts)
	}
}
