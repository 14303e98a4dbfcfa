package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

func testConfig(t *testing.T, args ...string) config {
	t.Helper()
	cfg, err := parseFlags(args, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestParseFlagsRejectsBadSetups(t *testing.T) {
	for _, args := range [][]string{
		{"-endpoints", "10", "-fanout", "3"},
		{"-events", "0"},
		{"-max-concurrency", "0"},
		{"-rate", "-1"},
		{"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	cfg := testConfig(t, "-kafka-brokers", "a:1,b:2")
	if len(cfg.KafkaBrokers) != 2 {
		t.Errorf("brokers %v", cfg.KafkaBrokers)
	}
}

// TestScheduleLookupInvertsTheSchedule checks that every delivery the
// schedule creates maps back to its own slot, with revisions 1, 2, … per
// entity, and that events for other tenants are not accepted.
func TestScheduleLookupInvertsTheSchedule(t *testing.T) {
	s := newSchedule(testConfig(t, "-events", "60", "-entities", "7", "-endpoints", "6", "-fanout", "2"))
	seen := map[int]bool{}
	revisions := map[int]int64{}
	for seq := range s.events {
		tenant := s.tenantOfEvent(seq)
		for k := range s.fanout {
			n := tenant*s.fanout + k
			d, ok := s.lookup(n, eventID(seq))
			if !ok || seen[d.Slot] || d.Slot >= s.deliveries() || d.Entity != s.entity(seq) {
				t.Fatalf("seq %d endpoint %d: %+v %v", seq, n, d, ok)
			}
			seen[d.Slot] = true
		}
		if got := s.revision(seq); got != revisions[s.entity(seq)]+1 {
			t.Fatalf("seq %d: revision %d after %d", seq, got, revisions[s.entity(seq)])
		}
		revisions[s.entity(seq)]++
		other := (tenant + 1) % s.tenants * s.fanout
		if _, ok := s.lookup(other, eventID(seq)); ok {
			t.Fatalf("seq %d accepted by endpoint %d of another tenant", seq, other)
		}
	}
	if len(seen) != s.deliveries() {
		t.Fatalf("%d slots used, want %d", len(seen), s.deliveries())
	}
	for _, id := range []string{"w1", "e", "e-1", "e60", "x3"} {
		if _, ok := s.lookup(0, id); ok {
			t.Errorf("lookup accepted %q", id)
		}
	}
}

// TestEventValueIsAValidEnvelope guards the hand-written encoder against
// drifting from what the fan-out stage accepts.
func TestEventValueIsAValidEnvelope(t *testing.T) {
	s := newSchedule(testConfig(t))
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	env, err := event.ParseEnvelope(s.eventValue(10123, at), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := event.Envelope{
		ID: "e10123", Type: eventType, Tenant: tenantName(s.tenantOfEvent(10123)), Entity: "order:123",
		Revision: 2, OccurredAt: at, Data: s.data,
	}
	if !env.OccurredAt.Equal(want.OccurredAt) || env.ID != want.ID || env.Tenant != want.Tenant ||
		env.Entity != want.Entity || env.Revision != want.Revision || !bytes.Equal(env.Data, want.Data) {
		t.Fatalf("got %+v, want %+v", env, want)
	}
	if _, err := event.ParseEnvelope(s.warmupValue(3, at), time.Now()); err != nil {
		t.Fatalf("warmup event: %v", err)
	}
	if n := len(s.sampleBody()); n < 150 || n > 250 {
		t.Errorf("sample body is %d bytes, want about 200", n)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for p, want := range map[float64]time.Duration{50: 50, 99: 99, 100: 100, 1: 1} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%v = %d, want %d", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 {
		t.Error("empty input")
	}
}

// TestRunSmall runs the whole harness on the embedded default with a small
// load and expects a clean pass and a parsable JSON line.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Laneway")
	}
	cfg := testConfig(t, "-events", "600", "-entities", "50", "-endpoints", "6", "-fanout", "2",
		"-max-concurrency", "3", "-raw-requests", "500", "-progress", "0", "-json", "-timeout", "2m")
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), cfg, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var res result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("json line: %v\n%s", err, stdout.String())
	}
	c := res.Laneway.Correctness
	if c.Received != 1200 || c.Missing != 0 || res.Raw == nil || res.Laneway.PerSecond <= 0 || len(res.Failures) != 0 {
		t.Fatalf("result %+v", res)
	}
	if c.MaxInFlight > 3 {
		t.Fatalf("max in flight %d over the limit 3", c.MaxInFlight)
	}
	if !strings.Contains(stderr.String(), "PASS") {
		t.Fatalf("human report lacks PASS:\n%s", stderr.String())
	}
}

// TestRunSmallLanewayProcess runs the harness with Laneway as its own
// `laneway serve` process against the real Kafka and Redis, and expects a
// clean pass with Laneway's CPU and allocations reported apart.
func TestRunSmallLanewayProcess(t *testing.T) {
	backend, ok := testenv.RealKafka()
	if testing.Short() || !ok {
		t.Skip("needs the real Kafka and Redis (LANEWAY_TEST_KAFKA_BROKERS, LANEWAY_TEST_REDIS_URL)")
	}
	bin := filepath.Join(t.TempDir(), "laneway")
	if out, err := exec.Command("go", "build", "-o", bin, "../laneway").CombinedOutput(); err != nil {
		t.Fatalf("build laneway: %v\n%s", err, out)
	}
	cfg := testConfig(t, "-events", "600", "-entities", "50", "-endpoints", "6", "-fanout", "2",
		"-max-concurrency", "3", "-raw-requests", "500", "-progress", "0", "-json", "-timeout", "2m",
		"-laneway-bin", bin, "-kafka-brokers", strings.Join(backend.Brokers, ","), "-redis-url", backend.RedisURL)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), cfg, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var res result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("json line: %v\n%s", err, stdout.String())
	}
	u := res.Laneway.Usage
	if c := res.Laneway.Correctness; c.Received != 1200 || c.Missing != 0 || len(res.Failures) != 0 {
		t.Fatalf("result %+v", res)
	}
	if u.LanewayCPUMicrosPerDeliv <= 0 || u.LanewayAllocBytesPerDeliv <= 0 || !res.Setup.LanewayProcess {
		t.Fatalf("Laneway's own process not measured: %+v", u)
	}
}
