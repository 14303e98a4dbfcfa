package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/receiver"
)

func TestLatencyWindowsBucketByPublishTime(t *testing.T) {
	var pts []latencyPoint
	// Window 0: latencies 1..100 ms; window 1 empty; window 2: one 5 s delivery.
	for i := 1; i <= 100; i++ {
		pts = append(pts, latencyPoint{published: time.Duration(i) * 10 * time.Millisecond, latency: time.Duration(i) * time.Millisecond})
	}
	pts = append(pts, latencyPoint{published: 25 * time.Second, latency: 5 * time.Second})
	w := latencyWindows(pts, 10*time.Second)
	if len(w) != 3 {
		t.Fatalf("%d windows, want 3: %+v", len(w), w)
	}
	if w[0].Count != 100 || w[0].P50Ms != 50 || w[0].P99Ms != 99 || w[0].MaxMs != 100 {
		t.Errorf("window 0: %+v", w[0])
	}
	if w[1].Count != 0 || w[1].StartSeconds != 10 {
		t.Errorf("window 1 should be empty and start at 10s: %+v", w[1])
	}
	if w[2].Count != 1 || w[2].MaxMs != 5000 || w[2].StartSeconds != 20 {
		t.Errorf("window 2: %+v", w[2])
	}
	if latencyWindows(nil, time.Second) != nil {
		t.Error("no points should give no windows")
	}
}

func TestSummarize(t *testing.T) {
	pts := []latencyPoint{{latency: 3}, {latency: 1}, {latency: 2}}
	s := summarize(pts)
	if s.MaxMs != ms(3) || s.P50Ms != ms(2) {
		t.Fatalf("%+v", s)
	}
}

func at(sec int) time.Time { return time.Unix(1_700_000_000+int64(sec), 0) }

// TestCommitProgressMeasuresTrail: partition 0 keeps up one sample behind,
// partition 1 is held for 30 s and then catches up, partition 2 never
// commits while its end grows, partition 3 is idle and caught up (end-1 is
// the commit marker), partition 4 is held but creeps forward a little.
func TestCommitProgressMeasuresTrail(t *testing.T) {
	sample := func(sec int, c0, e0, c1, e1, e2, c4 int64) offsetSample {
		return offsetSample{at: at(sec),
			committed: map[int32]int64{0: c0, 1: c1, 3: 9, 4: c4},
			end:       map[int32]int64{0: e0, 1: e1, 2: e2, 3: 10, 4: 100 * int64(sec+10)}}
	}
	samples := []offsetSample{
		sample(0, 10, 20, 5, 10, 3, 5),
		sample(10, 20, 30, 5, 20, 6, 5),
		sample(20, 30, 40, 5, 30, 9, 30),
		sample(30, 40, 50, 5, 40, 12, 60),
		sample(40, 49, 50, 39, 40, 15, 3500),
	}
	got := commitProgress(samples)
	if len(got) != 5 {
		t.Fatalf("%d partitions: %+v", len(got), got)
	}
	want := []struct {
		trail    float64
		caughtUp bool
		moved    bool
	}{{10, true, true}, {30, true, true}, {40, false, false}, {0, true, false}, {30, false, true}}
	for i, w := range want {
		g := got[i]
		if g.Partition != int32(i) || g.MaxTrailSeconds != w.trail || g.CaughtUp != w.caughtUp || g.Moved != w.moved {
			t.Errorf("partition %d: got %+v, want trail %v caught up %v moved %v", i, g, w.trail, w.caughtUp, w.moved)
		}
	}
	if got[2].FinalCommitted != -1 || got[2].FinalEnd != 15 {
		t.Errorf("partition 2 final: %+v", got[2])
	}
}

func TestParseStatusKB(t *testing.T) {
	for line, want := range map[string]int64{
		"VmRSS:\t  123456 kB": 123456 << 10,
		"VmRSS: 0 kB":         0,
	} {
		if got, ok := parseStatusKB(line, "VmRSS"); !ok || got != want {
			t.Errorf("%q: %d %v, want %d", line, got, ok, want)
		}
	}
	for _, line := range []string{"VmHWM:  5 kB", "VmRSS: 12 MB", "VmRSS: x kB", "VmRSS:", "VmRSS: -1 kB", "VmRSSX: 5 kB"} {
		if _, ok := parseStatusKB(line, "VmRSS"); ok {
			t.Errorf("%q accepted", line)
		}
	}
	m := readMemory()
	if _, err := os.Stat("/proc/self/status"); err == nil && (m.RSSMB <= 0 || m.PeakRSSMB < m.RSSMB) {
		t.Errorf("this process: RSS %.1f MB, peak %.1f MB", m.RSSMB, m.PeakRSSMB)
	}
}

// TestPlanLookupInvertsTheStreams checks that every event maps back to its
// own slot, endpoint, entity and a revision one above the entity's previous.
func TestPlanLookupInvertsTheStreams(t *testing.T) {
	p := newPlan(48, true,
		stream{count: 50, first: 0, endpoints: 1, entities: 7},
		stream{count: 300, first: 1, endpoints: 9, entities: 4},
	)
	if p.slots != 350 || len(p.at) != 350 || p.streams[1].base != 50 {
		t.Fatalf("plan %+v", p.streams)
	}
	last := map[[2]int]int64{}
	for slot := range p.slots {
		n := p.endpointOf(slot)
		d, ok := p.lookup(n, eventID(slot))
		if !ok || d.Slot != slot {
			t.Fatalf("slot %d: %+v %v", slot, d, ok)
		}
		key := [2]int{n, d.Entity}
		if d.Revision != last[key]+1 {
			t.Fatalf("slot %d: revision %d after %d", slot, d.Revision, last[key])
		}
		last[key] = d.Revision
		if _, ok := p.lookup(n+1, eventID(slot)); ok {
			t.Fatalf("slot %d accepted by endpoint %d", slot, n+1)
		}
	}
	for _, id := range []string{"e350", "e-1", "x3", "e"} {
		if _, ok := p.lookup(0, id); ok {
			t.Errorf("lookup accepted %q", id)
		}
	}
	if n := p.endpointOf(60); n != 1+10%9 {
		t.Errorf("slot 60 goes to endpoint %d", n)
	}
}

// TestPlanRecordStates: a states stream publishes envelopes Laneway
// accepts as state updates, each entity's revisions counting 1, 2, …; a
// facts stream's envelopes do not coalesce.
func TestPlanRecordStates(t *testing.T) {
	now := time.Now()
	p := newPlan(48, false, stream{count: 6, endpoints: 1, entities: 3, states: true}, stream{count: 2, first: 1, endpoints: 1, entities: 2})
	for slot := range p.slots {
		s, k, _ := p.locate(slot)
		rec := p.record(s, k, now)
		env, err := event.ParseEnvelope(rec.Value, now)
		if err != nil {
			t.Fatalf("slot %d: %v\n%s", slot, err, rec.Value)
		}
		wantRev := int64(k/3) + 1
		if s.first == 1 {
			wantRev = 1
		}
		if env.Coalesce != s.states || env.Revision != wantRev || env.Entity != string(rec.Key) || env.ID != eventID(slot) {
			t.Errorf("slot %d: %+v (key %s), want coalesce %v revision %d", slot, env, rec.Key, s.states, wantRev)
		}
	}
}

// TestBacklogStatesSmall parks a backlog of state updates, one per entity:
// none is superseded, and all but the parked window (256 by default) wait
// in the parked topic.
func TestBacklogStatesSmall(t *testing.T) {
	res := runSmall(t, "-scenario", "backlog", "-states", "-events", "3000", "-entities", "3000", "-lane-buffer", "100",
		"-backlog-settle", "0")
	if res["states"] != true || res["superseded"].(float64) != 0 || res["final_parked_backlog"].(float64) < 3000-256 {
		t.Fatalf("result %v", res)
	}
}

func TestAutoPorts(t *testing.T) {
	if got := autoPorts(1800, 20000); got != 0 {
		t.Errorf("1800 endpoints with 20000 files: %d ports, want one each (0)", got)
	}
	if got := autoPorts(10000, 20000); got < 100 || got >= 10000 {
		t.Errorf("10000 endpoints with 20000 files: %d ports", got)
	}
	if got := autoPorts(10, 0); got != 0 {
		t.Errorf("unknown limit: %d", got)
	}
	if got := autoPorts(5000, 2100); got != 6 {
		t.Errorf("tiny limit: %d ports, want 6", got)
	}
}

func TestScenarioFlags(t *testing.T) {
	cfg := testConfig(t, "-scenario", "incident")
	if cfg.Endpoints != 1800 || cfg.AttemptTimeout != 30*time.Second || cfg.ParkAfter != 0 {
		t.Errorf("incident defaults: %d endpoints, timeout %s, park-after %s", cfg.Endpoints, cfg.AttemptTimeout, cfg.ParkAfter)
	}
	cfg = testConfig(t, "-scenario", "incident", "-endpoints", "20", "-attempt-timeout", "5s")
	if cfg.Endpoints != 20 || cfg.AttemptTimeout != 5*time.Second {
		t.Errorf("explicit flags overridden: %d endpoints, timeout %s", cfg.Endpoints, cfg.AttemptTimeout)
	}
	if cfg := testConfig(t, "-scenario", "backlog"); cfg.Events != 1_000_000 || cfg.States {
		t.Errorf("backlog events %d, states %v", cfg.Events, cfg.States)
	}
	if cfg := testConfig(t, "-scenario", "backlog", "-states", "-entities", "1000000"); !cfg.States || cfg.Entities != 1_000_000 {
		t.Errorf("backlog -states: states %v, %d entities", cfg.States, cfg.Entities)
	}
	if cfg := testConfig(t, "-scenario", "drain"); cfg.ParkAfter != 5*time.Second {
		t.Errorf("drain park-after %s", cfg.ParkAfter)
	}
	if cfg := testConfig(t, "-scenario", "feed"); cfg.Endpoints != 10 || cfg.Duration != 30*time.Second || cfg.FeedConsumers != 100 || cfg.PushRate != 10000 {
		t.Errorf("feed defaults: %d push endpoints, %s, %d consumers, push rate %.0f", cfg.Endpoints, cfg.Duration, cfg.FeedConsumers, cfg.PushRate)
	}
	if cfg := testConfig(t, "-scenario", "cost", "-cost-endpoints", "3, 30"); len(cfg.CostEndpoints) != 2 || cfg.CostEndpoints[1] != 30 {
		t.Errorf("cost endpoints %v", cfg.CostEndpoints)
	}
	for _, args := range [][]string{
		{"-scenario", "nope"}, {"-scenario", "cost", "-cost-endpoints", "10,0"}, {"-drain-limit", "0"}, {"-ports", "-1"},
		{"-states"}, {"-scenario", "drain", "-states"}, {"-scenario", "feed", "-feed-wait", "31s"}, {"-feed-consumers", "0"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// runSmall runs a scenario at test scale on the embedded default and
// returns its JSON line's result.
func runSmall(t *testing.T, args ...string) map[string]any {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Laneway")
	}
	cfg := testConfig(t, append(args, "-json", "-timeout", "2m", "-sample", "1s")...)
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), cfg, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	var out struct {
		Result   map[string]any `json:"result"`
		Failures []string       `json:"failures"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out.Failures) != 0 {
		t.Fatalf("json line: %v %v\n%s", err, out.Failures, stdout.String())
	}
	return out.Result
}

func TestIncidentSmall(t *testing.T) {
	res := runSmall(t, "-scenario", "incident", "-endpoints", "12", "-duration", "6s", "-healthy-rate", "100",
		"-slow-rate", "10", "-slow-delay", "2s", "-park-after", "2s", "-window", "2s")
	if res["healthy_received"].(float64) != 600 || res["slow_max_in_flight"].(float64) > 4 {
		t.Fatalf("result %v", res)
	}
	if parks := res["lanes_parked_by_reason"].(map[string]any); parks["park_after"] == nil {
		t.Fatalf("the slow lane was not parked: %v", parks)
	}
}

func TestDrainSmall(t *testing.T) {
	res := runSmall(t, "-scenario", "drain", "-drain-backlog", "60", "-drain-delay", "100ms", "-park-after", "1s")
	rate, want := res["drain_per_s"].(float64), res["expected_per_s"].(float64)
	if want != 40 || rate < want/2 || rate > want*1.2 {
		t.Fatalf("drained at %.1f/s, expected about %.0f/s", rate, want)
	}
}

// TestFeedSmall serves a few feeds while push endpoints carry a load
// beside them: every feed event is read once, in sequence, and pages that
// found their events waiting are timed apart.
func TestFeedSmall(t *testing.T) {
	res := runSmall(t, "-scenario", "feed", "-feed-consumers", "4", "-feed-rate", "40", "-push-rate", "200",
		"-endpoints", "2", "-duration", "3s", "-feed-wait", "2s", "-feed-pause", "200ms")
	if res["served"].(float64) != 120 || res["feed_missing"].(float64) != 0 || res["push_received"].(float64) != 600 {
		t.Fatalf("result %v", res)
	}
	if res["ready_pages"].(float64) == 0 || res["page_latency"].(map[string]any)["p99_ms"].(float64) <= 0 {
		t.Fatalf("no page latency measured: %v", res)
	}
}

// TestFeedTallyCountsGapsAndOrder: a skipped sequence, a step back and an
// entity's revision not above its last are counted.
func TestFeedTallyCountsGapsAndOrder(t *testing.T) {
	tally := &feedTally{last: map[string]int64{}}
	for _, ev := range []struct {
		seq    int64
		entity string
		rev    int64
	}{{0, "a", 1}, {1, "b", 1}, {3, "a", 2}, {2, "a", 3}, {3, "b", 1}} {
		tally.check(receiver.FeedEvent{Sequence: ev.seq, Entity: receiver.Entity{ID: ev.entity, Revision: ev.rev}})
	}
	if tally.read != 5 || tally.gaps != 2 || tally.order != 1 {
		t.Fatalf("read %d, gaps %d, order %d; want 5, 2 (3 after 1, 2 after 3), 1 (b 1 after 1)", tally.read, tally.gaps, tally.order)
	}
}
