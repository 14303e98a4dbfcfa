package main

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/admin/client"
)

// lockedBuffer is written by the demo's goroutines and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func noEnv(string) string { return "" }

// startDemo runs the demo with args in the background; ready receives what
// it set up, done its result.
func startDemo(t *testing.T, ctx context.Context, args []string, out io.Writer) (<-chan demoInfo, <-chan error) {
	t.Helper()
	cfg, err := parseDemo(args, noEnv, out)
	if err != nil {
		t.Fatal(err)
	}
	ready := make(chan demoInfo, 1)
	cfg.onReady = func(i demoInfo) { ready <- i }
	done := make(chan error, 1)
	go func() { done <- runDemo(ctx, cfg, out, out) }()
	return ready, done
}

func waitReady(t *testing.T, ready <-chan demoInfo, done <-chan error, out *lockedBuffer) demoInfo {
	t.Helper()
	select {
	case info := <-ready:
		return info
	case err := <-done:
		t.Fatalf("demo ended before it was ready: %v\n%s", err, out.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("demo not ready after 2 minutes:\n%s", out.String())
	}
	return demoInfo{}
}

// TestDemoSlowCustomerGrowsAloneWhileOthersStayGreen runs the demo for 20 s
// on the embedded default and watches it through the API: the slow
// customer's oldest pending delivery ages (and its lane parks), while every
// other endpoint's oldest pending age stays low and each keeps receiving.
func TestDemoSlowCustomerGrowsAloneWhileOthersStayGreen(t *testing.T) {
	const run = 20 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := &lockedBuffer{}
	ready, done := startDemo(t, ctx, []string{
		"--duration", run.String(), "--http-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0",
		"--rate", "60", "--slow-delay", "2s", "--slow-concurrency", "2", "--park-after", "6s",
		"--report-every", "2s", "--log-level", "error",
	}, out)
	info := waitReady(t, ready, done, out)
	started := time.Now()
	if info.SlowID == "" || len(info.FastIDs) != 20 {
		t.Fatalf("demo set up %+v, want one slow and 20 fast endpoints", info)
	}
	c, err := client.New(info.API, "")
	if err != nil {
		t.Fatal(err)
	}

	var (
		warm                   bool // every fast endpoint has had a delivery
		samples, parkedSamples int
		slowMax                float64
		fastAges, healthyAges  []float64 // one per sample
		lastSuccess            = map[string]time.Time{}
		finished               error
	)
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
poll:
	for {
		select {
		case finished = <-done:
			break poll
		case <-tick.C:
		}
		l, err := c.ListEndpoints(ctx, client.ListEndpointsOptions{})
		if err != nil {
			continue // the demo may be stopping
		}
		parked, fastOldest, allDelivered := false, 0.0, true
		for _, e := range l.Data {
			h := e.Health
			if h == nil {
				t.Fatalf("endpoint %s listed without health", e.ID)
			}
			if e.ID == info.SlowID {
				slowMax = max(slowMax, h.OldestPendingAgeSeconds)
				parked = h.ParkedReason != ""
				continue
			}
			fastOldest = max(fastOldest, h.OldestPendingAgeSeconds)
			if h.LastSuccessAt == nil {
				allDelivered = false
			} else if h.LastSuccessAt.After(lastSuccess[e.ID]) {
				lastSuccess[e.ID] = *h.LastSuccessAt
			}
		}
		if testing.Verbose() {
			t.Logf("%5.1fs slow %.1fs parked=%v fast %.2fs", time.Since(started).Seconds(), slowMax, parked, fastOldest)
		}
		warm = warm || allDelivered
		if !warm {
			continue // first deliveries wait for the group to form
		}
		samples++
		fastAges = append(fastAges, fastOldest)
		if parked {
			// Read after the list: the slow lane stays parked (it never
			// catches up), so /v1/health's healthy figure excludes it.
			if h, err := c.Health(ctx); err == nil {
				parkedSamples++
				healthyAges = append(healthyAges, h.HealthyOldestPendingAgeSeconds)
			}
		}
	}
	if finished != nil {
		t.Fatalf("demo failed: %v\n%s", finished, out.String())
	}
	fast90, fastMax := quantile(fastAges, 0.9), quantile(fastAges, 1)
	healthy90, healthyMax := quantile(healthyAges, 0.9), quantile(healthyAges, 1)
	t.Logf("%d samples (%d with the slow lane parked): slow oldest pending up to %.1fs; fast p90 %.2fs, max %.2fs; "+
		"healthy (GET /v1/health) p90 %.2fs, max %.2fs", samples, parkedSamples, slowMax, fast90, fastMax, healthy90, healthyMax)

	if samples < 10 {
		t.Fatalf("only %d samples after every endpoint had its first delivery\n%s", samples, out.String())
	}
	if slowMax < 5 {
		t.Errorf("the slow endpoint's oldest pending age reached only %.1fs; it should grow with the run", slowMax)
	}
	if parkedSamples < 3 {
		t.Errorf("the slow lane was seen parked in %d samples; with --park-after 6s it should park early in the run", parkedSamples)
	}
	// Isolation, with slack for a loaded machine and for health snapshots
	// being up to a second old: the healthy endpoints' oldest pending age
	// stays under 2 s in nine samples of ten and never nears the slow one's.
	if fast90 >= 2 || fastMax >= 4 || fastMax >= slowMax/3 {
		t.Errorf("healthy endpoints' oldest pending age: p90 %.2fs, max %.2fs (want < 2s, < 4s and under a third of the slow one's %.1fs): "+
			"the slow customer is not isolated", fast90, fastMax, slowMax)
	}
	if healthy90 >= 2 || healthyMax >= 4 {
		t.Errorf("GET /v1/health healthy_oldest_pending_age_seconds: p90 %.2fs, max %.2fs (want < 2s and < 4s)", healthy90, healthyMax)
	}
	// Every healthy customer kept receiving through the whole run.
	late := started.Add(run * 6 / 10)
	for _, id := range info.FastIDs {
		if at := lastSuccess[id]; at.Before(late) {
			t.Errorf("endpoint %s: last success seen at %s, not in the last 40%% of the run", id, at.Format(time.RFC3339Nano))
		}
	}

	text := out.String()
	mustContain(t, text, "Console:  "+info.API+"/", info.API+"/v1/endpoints?sort=oldest_pending_age&limit=5", info.API+"/v1/health",
		"curl -s", "demo-slowmart answers in 2s with max_concurrency 2", "Demo stopped (--duration 20s reached)")
	reports := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "[") && strings.Contains(line, "| demo-slowmart: oldest pending ") && strings.Contains(line, "| 20 others: oldest pending ") {
			reports++
		}
	}
	if reports < 5 {
		t.Errorf("%d report lines, want one every 2s:\n%s", reports, text)
	}
	if !strings.Contains(text, "PARKED (") {
		t.Errorf("no report line shows the slow lane parked:\n%s", text)
	}
}

// TestDemoExternalMode runs the demo against a Laneway it did not start,
// as docker-compose does, twice: the second run reuses the endpoints.
func TestDemoExternalMode(t *testing.T) {
	a := startLaneway(t)
	base := "http://" + a.HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.New(base, testToken)
	if err != nil {
		t.Fatal(err)
	}
	// Each run lasts until its condition holds, then is interrupted as a
	// user's Ctrl-C would: a fixed --duration raced the group forming on a
	// loaded machine (the demo's receivers stop with it).
	demoRun := func(what string, until func(demoInfo) bool) (demoInfo, string) {
		demoCtx, interrupt := context.WithCancel(ctx)
		defer interrupt()
		out := &lockedBuffer{}
		ready, done := startDemo(t, demoCtx, []string{
			"--api", base, "--token", testToken, "--fleet-listen", "127.0.0.1:0", "--fleet-host", "127.0.0.1",
			"--endpoints", "2", "--rate", "30", "--report-every", "1s",
		}, out)
		info := waitReady(t, ready, done, out)
		eventually(t, time.Minute, what, func() bool { return until(info) })
		interrupt()
		if err := <-done; err != nil {
			t.Fatalf("demo: %v\n%s", err, out.String())
		}
		return info, out.String()
	}
	bothFastDelivered := func(info demoInfo) bool {
		for _, id := range info.FastIDs {
			e, err := c.GetEndpoint(ctx, id)
			if err != nil || e.Health == nil || e.Health.LastSuccessAt == nil {
				return false
			}
		}
		return len(info.FastIDs) == 2
	}
	first, text := demoRun("deliveries to both fast endpoints", bothFastDelivered)
	mustContain(t, text, "against "+base, "Console:  "+base+"/", `-H "Authorization: Bearer $LANEWAY_ADMIN_TOKEN"`, "Demo stopped (interrupted)")
	if strings.Contains(text, "Stopping Laneway") {
		t.Errorf("external mode must not start or stop a Laneway:\n%s", text)
	}

	second, _ := demoRun("the second run to start", func(demoInfo) bool { return true })
	if second.SlowID != first.SlowID || !slices.Equal(second.FastIDs, first.FastIDs) {
		t.Errorf("second run did not reuse the endpoints: %+v, then %+v", first, second)
	}
	l, err := c.ListEndpoints(ctx, client.ListEndpointsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var tenants []string
	for _, e := range l.Data {
		tenants = append(tenants, e.Tenant)
	}
	slices.Sort(tenants)
	if want := []string{"demo-shop-01", "demo-shop-02", "demo-slowmart"}; !slices.Equal(tenants, want) {
		t.Errorf("tenants %v, want %v", tenants, want)
	}
}

// quantile returns the q-th quantile (0 < q ≤ 1) of xs, 0 for none.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	return s[min(len(s)-1, max(0, int(float64(len(s))*q+0.5)-1))]
}
