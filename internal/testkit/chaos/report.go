package chaos

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Table renders results as a Markdown table: one row per scenario.
func Table(results []*Result) string {
	var b strings.Builder
	b.WriteString("| scenario | instances | events | deliveries | duplicates | dead-lettered | superseded | lost | order violations | overlaps | faults | recovery (median / max) | drain | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		verdict := "pass"
		if !r.Pass() {
			verdict = "**FAIL**"
		}
		c := r.Check
		maxRec := secs(r.MaxRecovery())
		for _, f := range r.Faults {
			if !f.Recovered {
				maxRec = "not recovered"
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s / %s | %s | %s |\n",
			r.Scenario, r.Instances, c.Events, c.Expected, c.Duplicates, c.DeadPairs, c.Superseded, c.Lost,
			c.OrderViolations, c.Overlaps, len(r.Faults), secs(medianRecovery(r.Faults)), maxRec, secs(r.Drain), verdict)
	}
	return b.String()
}

// FaultTable renders every fault of the results: kind, outage, recovery.
func FaultTable(results []*Result) string {
	var b strings.Builder
	b.WriteString("| scenario | fault | target | outage | recovery | late deliveries |\n|---|---|---|---|---|---|\n")
	for _, r := range results {
		for _, f := range r.Faults {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d |\n", r.Scenario, f.Kind, f.Target, secs(f.Outage()), recovery(f), f.Late)
		}
	}
	return b.String()
}

// Summary is a few lines about one result, for logs.
func Summary(r *Result) string {
	var b strings.Builder
	verdict := "PASS"
	if !r.Pass() {
		verdict = "FAIL"
	}
	fmt.Fprintf(&b, "%s %s: %d events at %.0f/s over %s, %d instances; %s\n", verdict, r.Scenario, r.Check.Events, r.Rate,
		secs(r.Load), r.Instances, r.Check.String())
	fmt.Fprintf(&b, "  receivers: %d requests, %d not answered 2xx, %d bad signatures, %d arrived while one of their (endpoint, entity) was in flight\n",
		r.Receivers.Requests, r.Receivers.Failed, r.Receivers.BadSignatures, r.Receivers.Overlaps)
	fmt.Fprintf(&b, "  fast endpoints' latency from ack: p50 %s, p99 %s, max %s; drain %s (drained %t); wall %s\n",
		ms(r.Latency.P50), ms(r.Latency.P99), ms(r.Latency.Max), secs(r.Drain), r.Drained, secs(r.Elapsed))
	for i, f := range r.Faults {
		fmt.Fprintf(&b, "  fault %d: %s %s at +%s: outage %s, recovery %s (%d late)\n", i+1, f.Kind, f.Target,
			secs(f.At.Sub(r.Faults[0].At)), secs(f.Outage()), recovery(f), f.Late)
	}
	for _, e := range r.SelfExits {
		fmt.Fprintf(&b, "  self exit: %s\n", e)
	}
	for _, s := range r.Check.LostSamples {
		fmt.Fprintf(&b, "  lost: %s\n", s)
	}
	for _, s := range r.Check.ViolationSamples {
		fmt.Fprintf(&b, "  order: %s\n", s)
	}
	for _, s := range r.Check.OverlapSamples {
		fmt.Fprintf(&b, "  overlap: %s\n", s)
	}
	for _, s := range r.Check.OtherSamples {
		fmt.Fprintf(&b, "  other: %s\n", s)
	}
	if r.Err != "" {
		fmt.Fprintf(&b, "  error: %s\n", r.Err)
	}
	fmt.Fprintf(&b, "  logs: %s (check again, while the broker runs: go run ./cmd/laneway-checkorder -dir %s -kafka-brokers %s -dead-topic %s.dead)\n",
		r.Dir, r.Dir, strings.Join(r.Brokers, ","), r.Prefix)
	return b.String()
}

func recovery(f Fault) string {
	if !f.Recovered {
		return "not recovered (" + secs(f.Recovery) + " to the end)"
	}
	return secs(f.Recovery)
}

func medianRecovery(faults []Fault) time.Duration {
	if len(faults) == 0 {
		return 0
	}
	var rs []time.Duration
	for _, f := range faults {
		rs = append(rs, f.Recovery)
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }
