package main

import (
	"slices"
	"time"
)

// latencyPoint is one delivery: when its event was published, relative to
// the start of the run, and how long it took to arrive.
type latencyPoint struct {
	published time.Duration
	latency   time.Duration
}

// windowStat is the latency of the deliveries whose events were published
// in one window of the run.
type windowStat struct {
	StartSeconds float64 `json:"start_s"`
	Count        int     `json:"count"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
}

// latencyWindows groups points into consecutive windows of width by publish
// time and gives each its percentiles. Windows are bucketed by publish time,
// not receipt time, so a delivery that arrives late counts against the
// moment the slow backlog made it late. Empty windows in between are kept
// (Count 0): a gap in deliveries is itself a finding.
func latencyWindows(points []latencyPoint, width time.Duration) []windowStat {
	if len(points) == 0 || width <= 0 {
		return nil
	}
	var buckets [][]time.Duration
	for _, p := range points {
		i := int(max(p.published, 0) / width)
		for len(buckets) <= i {
			buckets = append(buckets, nil)
		}
		buckets[i] = append(buckets[i], p.latency)
	}
	out := make([]windowStat, len(buckets))
	for i, b := range buckets {
		out[i] = windowStat{StartSeconds: (time.Duration(i) * width).Seconds(), Count: len(b)}
		if len(b) == 0 {
			continue
		}
		slices.Sort(b)
		out[i].P50Ms, out[i].P99Ms, out[i].MaxMs = ms(percentile(b, 50)), ms(percentile(b, 99)), ms(b[len(b)-1])
	}
	return out
}

// summarize is the overall percentiles of points.
func summarize(points []latencyPoint) latencySummary {
	if len(points) == 0 {
		return latencySummary{}
	}
	lat := make([]time.Duration, len(points))
	for i, p := range points {
		lat[i] = p.latency
	}
	slices.Sort(lat)
	return latencySummary{
		P50Ms: ms(percentile(lat, 50)), P90Ms: ms(percentile(lat, 90)),
		P99Ms: ms(percentile(lat, 99)), MaxMs: ms(lat[len(lat)-1]),
	}
}
