package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// TestBatchSmall runs the batch scenario at test scale: every event
// reaches both modes' receivers, the batch endpoints' in sequence order,
// in batches of more than one and at most max_events.
func TestBatchSmall(t *testing.T) {
	res := runSmall(t, "-scenario", "batch", "-endpoints", "2", "-events", "400", "-entities", "16", "-data-bytes", "1024",
		"-batch-max-events", "10", "-batch-max-wait", "20ms", "-verify")
	push, batch := res["push"].(map[string]any), res["batch"].(map[string]any)
	checks := res["batch_checks"].(map[string]any)
	if push["received"].(float64) != 400 || batch["received"].(float64) != 400 || push["receiver_requests"].(float64) != 400 {
		t.Fatalf("result %v", res)
	}
	if n := batch["receiver_requests"].(float64); n < 40 || n >= 400 || checks["largest_batch"].(float64) != 10 {
		t.Fatalf("%v batch requests for 400 events, largest batch %v: want batches of up to 10", n, checks["largest_batch"])
	}
	if batch["deliveries_per_s"].(float64) <= 0 || res["batch_to_push"].(float64) <= 0 {
		t.Fatalf("no rate measured: %v", res)
	}
}

// TestBatchFailures: a skipped sequence, a step back, an entity's
// revision not above its last, an event received twice, an unknown one,
// a batch above max_events and two batches in flight at once each fail
// the run (benchrecv's TestBatchTally checks that the receiver counts
// them).
func TestBatchFailures(t *testing.T) {
	c := benchrecv.BatchStats{Batches: 2, Largest: 3, Gaps: 2, Order: 1, Duplicates: 1, Unmatched: 1, Overlaps: 1}
	rep := &batchReport{MaxEvents: 2, Push: modeResult{Published: 4, Received: 4}, Batch: modeResult{Published: 4, Received: 4}, BatchChecks: c}
	got := strings.Join(rep.failures(), "\n")
	for _, want := range []string{"out of sequence", "last revision", "received twice", "above max_events", "in flight", "unexpected"} {
		if !strings.Contains(got, want) {
			t.Errorf("no failure says %q:\n%s", want, got)
		}
	}
	if rep := (&batchReport{MaxEvents: 10, Push: modeResult{Published: 4, Received: 4}, Batch: modeResult{Published: 4, Received: 4}}); len(rep.failures()) != 0 {
		t.Errorf("a clean run fails: %v", rep.failures())
	}
}

func TestBatchFlags(t *testing.T) {
	cfg := testConfig(t, "-scenario", "batch")
	if cfg.Endpoints != 10 || cfg.Events != 50000 || cfg.DataBytes != 1024 || cfg.BatchMaxEvents != 100 || cfg.BatchMaxWait != 100*time.Millisecond {
		t.Errorf("batch defaults: %d endpoints, %d events, %d data bytes, max_events %d, max_wait %s",
			cfg.Endpoints, cfg.Events, cfg.DataBytes, cfg.BatchMaxEvents, cfg.BatchMaxWait)
	}
	for _, args := range [][]string{{"-batch-max-events", "0"}, {"-batch-max-events", "1001"}, {"-batch-max-wait", "61s"}} {
		if _, err := parseFlags(append([]string{"-scenario", "batch"}, args...), io.Discard); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
