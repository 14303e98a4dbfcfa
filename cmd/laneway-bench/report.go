package main

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// result is everything a run reports; it is also the -json line.
type result struct {
	Machine  machine    `json:"machine"`
	Setup    setup      `json:"setup"`
	Raw      *rawResult `json:"raw_http,omitempty"`
	Laneway  e2eResult  `json:"laneway"`
	Failures []string   `json:"failures"`
}

type machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	Backend    string `json:"backend"`
}

type setup struct {
	Events           int     `json:"events"`
	Fanout           int     `json:"fanout"`
	Entities         int     `json:"entities"`
	Endpoints        int     `json:"endpoints"`
	Tenants          int     `json:"tenants"`
	MaxConcurrency   int     `json:"max_concurrency"`
	Partitions       int     `json:"partitions"`
	RatePerSecond    float64 `json:"rate_per_second"`
	ReceiverDelayMs  float64 `json:"receiver_delay_ms"`
	Verify           bool    `json:"verify"`
	SharedPort       bool    `json:"shared_port"`
	Warmup           bool    `json:"warmup"`
	ProducerLingerMs float64 `json:"producer_linger_ms"`
	LanewayProcess   bool    `json:"laneway_process"` // Laneway ran apart (-laneway-bin)
}

// e2eResult is the Laneway end-to-end measurement.
type e2eResult struct {
	Events           int     `json:"events"`
	Deliveries       int     `json:"deliveries"`
	WarmupSeconds    float64 `json:"warmup_seconds"`
	PublishSeconds   float64 `json:"publish_seconds"`
	PublishPerSecond float64 `json:"publish_per_second"`
	// Seconds runs from the first publish to the last receipt.
	Seconds     float64         `json:"seconds"`
	PerSecond   float64         `json:"deliveries_per_second"`
	RatioToRaw  float64         `json:"ratio_to_raw_http,omitempty"`
	Latency     latencySummary  `json:"publish_to_receipt"`
	Usage       usage           `json:"process"`
	Counters    lanewayCounters `json:"laneway_metrics"`
	Correctness correctness     `json:"correctness"`
	Incomplete  string          `json:"incomplete,omitempty"`
}

type latencySummary struct {
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// usage is the whole process's resource use during the measured phase.
type usage struct {
	CPUCores           float64 `json:"cpu_cores"`
	CPUMicrosPerDeliv  float64 `json:"cpu_us_per_delivery"`
	AllocBytesPerDeliv float64 `json:"alloc_bytes_per_delivery"`
	GCs                uint32  `json:"gcs"`
	// The broker's JVM (-broker-pid), so that work moved into the broker
	// does not pass as a gain; 0 without it.
	BrokerCPUCores          float64 `json:"broker_cpu_cores,omitempty"`
	BrokerCPUMicrosPerDeliv float64 `json:"broker_cpu_us_per_delivery,omitempty"`
	// Laneway's own process when it runs apart (-laneway-bin); 0 otherwise.
	LanewayCPUCores           float64 `json:"laneway_cpu_cores,omitempty"`
	LanewayCPUMicrosPerDeliv  float64 `json:"laneway_cpu_us_per_delivery,omitempty"`
	LanewayAllocBytesPerDeliv float64 `json:"laneway_alloc_bytes_per_delivery,omitempty"`
}

type correctness struct {
	benchrecv.Stats
	Expected           int   `json:"expected"`
	Missing            int64 `json:"missing"`
	Unexpected         int64 `json:"unexpected"`
	MaxInFlight        int64 `json:"max_in_flight_per_endpoint"`
	Limit              int   `json:"max_concurrency"`
	EndpointsOverLimit int   `json:"endpoints_over_limit"`
	EndpointsAtLimit   int   `json:"endpoints_at_limit"`
	Verified           bool  `json:"signatures_verified"`
}

func newResult(cfg config) *result {
	backend := "embedded Kafka (kfake) + in-process Redis"
	if len(cfg.KafkaBrokers) > 0 {
		backend = "Kafka " + strings.Join(cfg.KafkaBrokers, ",")
		if cfg.RedisURL != "" {
			backend += " + Redis " + cfg.RedisURL
		}
	}
	return &result{
		Machine: machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), Backend: backend},
		Setup: setup{
			Events: cfg.Events, Fanout: cfg.Fanout, Entities: cfg.Entities, Endpoints: cfg.Endpoints,
			Tenants: cfg.Endpoints / cfg.Fanout, MaxConcurrency: cfg.MaxConcurrency, Partitions: cfg.Partitions,
			RatePerSecond: cfg.Rate, ReceiverDelayMs: ms(cfg.ReceiverDelay), Verify: cfg.Verify,
			SharedPort: cfg.SharedPort, Warmup: cfg.Warmup, ProducerLingerMs: ms(cfg.Linger), LanewayProcess: cfg.LanewayBin != "",
		},
		Failures: []string{},
	}
}

// finish derives the ratio and lists what failed.
func (r *result) finish() {
	if r.Raw != nil && r.Raw.PerSecond > 0 {
		r.Laneway.RatioToRaw = r.Laneway.PerSecond / r.Raw.PerSecond
	}
	c := r.Laneway.Correctness
	checks := []struct {
		bad  bool
		what string
	}{
		{r.Laneway.Incomplete != "", r.Laneway.Incomplete},
		{c.Missing > 0, fmt.Sprintf("%d of %d deliveries missing", c.Missing, c.Expected)},
		{c.Duplicates > 0, fmt.Sprintf("%d duplicate deliveries (none expected without a crash or rebalance)", c.Duplicates)},
		{c.OrderViolations > 0, fmt.Sprintf("%d per-entity order violations", c.OrderViolations)},
		{c.EntityOverlaps > 0, fmt.Sprintf("%d times an entity had two deliveries in flight to one endpoint", c.EntityOverlaps)},
		{c.Unexpected > 0, fmt.Sprintf("%d unexpected deliveries", c.Unexpected)},
		{c.EndpointsOverLimit > 0, fmt.Sprintf("%d endpoints exceeded max_concurrency %d (max seen %d)", c.EndpointsOverLimit, c.Limit, c.MaxInFlight)},
		{c.BadSignatures > 0, fmt.Sprintf("%d bad signatures", c.BadSignatures)},
		{c.PayloadMismatches > 0, fmt.Sprintf("%d payloads differ from the published event", c.PayloadMismatches)},
	}
	for _, ch := range checks {
		if ch.bad {
			r.Failures = append(r.Failures, ch.what)
		}
	}
}

func (r *result) writeJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func (r *result) writeText(w io.Writer) {
	s, l, c := r.Setup, r.Laneway, r.Laneway.Correctness
	fmt.Fprintf(w, "\nLaneway benchmark: %d CPUs (GOMAXPROCS %d), %s, %s\n", r.Machine.CPUs, r.Machine.GOMAXPROCS, r.Machine.Go, r.Machine.Backend)
	fmt.Fprintf(w, "  %d events × fan-out %d = %d deliveries; %d entities; %d endpoints in %d tenants, max_concurrency %d; %d partitions\n",
		s.Events, s.Fanout, l.Deliveries, s.Entities, s.Endpoints, s.Tenants, s.MaxConcurrency, s.Partitions)
	fmt.Fprintf(w, "  publish rate limit %s; receiver delay %gms; signatures %s; %s\n",
		orUnlimited(s.RatePerSecond), s.ReceiverDelayMs, onOff(s.Verify, "verified", "not verified"),
		onOff(s.SharedPort, "all endpoints on one port", "one port per endpoint"))
	if raw := r.Raw; raw != nil {
		fmt.Fprintf(w, "\nRaw HTTP baseline (net/http keep-alive, %d workers, %d-byte body, same receiver)\n", raw.Concurrency, raw.BodyBytes)
		fmt.Fprintf(w, "  %d requests in %.2fs: %.0f req/s (p50 %.2fms, p99 %.2fms), %d errors\n",
			raw.Requests, raw.Seconds, raw.PerSecond, raw.P50Ms, raw.P99Ms, raw.Errors)
	}
	fmt.Fprintf(w, "\nLaneway end to end\n")
	if s.Warmup {
		fmt.Fprintf(w, "  warmup:     %d deliveries in %.2fs (not measured)\n", s.Tenants*s.Fanout, l.WarmupSeconds)
	}
	fmt.Fprintf(w, "  publish:    %d events in %.2fs: %.0f events/s\n", l.Events, l.PublishSeconds, l.PublishPerSecond)
	fmt.Fprintf(w, "  delivered:  %d in %.2fs (first publish → last receipt): %.0f deliveries/s", c.Received, l.Seconds, l.PerSecond)
	if r.Raw != nil {
		fmt.Fprintf(w, " = %.3f × raw HTTP", l.RatioToRaw)
	}
	fmt.Fprintf(w, "\n  latency:    publish → receipt p50 %s, p90 %s, p99 %s, max %s\n",
		fmtMs(l.Latency.P50Ms), fmtMs(l.Latency.P90Ms), fmtMs(l.Latency.P99Ms), fmtMs(l.Latency.MaxMs))
	fmt.Fprintf(w, "  process:    %.2f cores busy, %.0fµs CPU and %.0f bytes allocated per delivery, %d GCs (this process: %s)\n",
		l.Usage.CPUCores, l.Usage.CPUMicrosPerDeliv, l.Usage.AllocBytesPerDeliv, l.Usage.GCs, processHolds(r))
	if l.Usage.BrokerCPUCores > 0 {
		fmt.Fprintf(w, "  broker:     %.2f cores busy, %.0fµs CPU per delivery (the Kafka JVM)\n", l.Usage.BrokerCPUCores, l.Usage.BrokerCPUMicrosPerDeliv)
	}
	if l.Usage.LanewayCPUCores > 0 {
		fmt.Fprintf(w, "  laneway:    %.2f cores busy, %.0fµs CPU and %.0f bytes allocated per delivery (its own process, -laneway-bin)\n",
			l.Usage.LanewayCPUCores, l.Usage.LanewayCPUMicrosPerDeliv, l.Usage.LanewayAllocBytesPerDeliv)
	}
	fmt.Fprintf(w, "  laneway:    %.0f attempts, %.0f failed, %.0f dead letters, %.0f lanes parked\n",
		l.Counters.Attempts, l.Counters.FailedAttempts, l.Counters.DeadLetters, l.Counters.LanesParked)
	fmt.Fprintf(w, "\nCorrectness\n")
	fmt.Fprintf(w, "  received %d of %d (missing %d); duplicates %d; order violations %d; entity overlaps %d; unexpected %d\n",
		c.Received, c.Expected, c.Missing, c.Duplicates, c.OrderViolations, c.EntityOverlaps, c.Unexpected)
	fmt.Fprintf(w, "  in flight per endpoint: max %d, limit %d; %d endpoints over the limit, %d reached it\n",
		c.MaxInFlight, c.Limit, c.EndpointsOverLimit, c.EndpointsAtLimit)
	if c.Verified {
		fmt.Fprintf(w, "  signatures: %d bad; payload mismatches %d\n", c.BadSignatures, c.PayloadMismatches)
	} else {
		fmt.Fprintf(w, "  signatures: not verified (-verify)\n")
	}
	writeVerdict(w, r.Failures)
}

// writeVerdict ends a report: PASS, or FAIL and the failed checks.
func writeVerdict(w io.Writer, failures []string) {
	if len(failures) == 0 {
		fmt.Fprintf(w, "\nPASS\n")
		return
	}
	fmt.Fprintf(w, "\nFAIL\n")
	for _, f := range failures {
		fmt.Fprintf(w, "  - %s\n", f)
	}
}

func fmtMs(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.2fs", v/1000)
	}
	return fmt.Sprintf("%.1fms", v)
}

func orUnlimited(rate float64) string {
	if rate <= 0 {
		return "none"
	}
	return fmt.Sprintf("%.0f events/s", rate)
}

func onOff(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func hasLabel(labels []*dto.LabelPair, name, value string) bool {
	for _, l := range labels {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// processHolds says what the benchmark's own process ran.
func processHolds(r *result) string {
	switch {
	case r.Setup.LanewayProcess:
		return "publisher and receiver; Laneway below"
	case strings.HasPrefix(r.Machine.Backend, "embedded"):
		return "Laneway, embedded Kafka, publisher and receiver"
	}
	return "Laneway, publisher and receiver"
}
