package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/testkit/benchrecv"
	"github.com/laneway/laneway/receiver"
)

// The feed scenario's entities per endpoint: a few, so that each entity
// gets many revisions and per-entity order is exercised.
const feedEntities = 8

// feedReadyAge is how long before a read its first event must have been
// published for the page to count as ready: appended and waiting, so that
// the read measures serving a page rather than waiting for an event. It
// must exceed the publish → read latency, which the report shows beside it.
const feedReadyAge = 100 * time.Millisecond

// feedReport is what the feed scenario measured: pull endpoints' feeds
// served to long-polling consumers while push endpoints on the same
// deliveries partitions carry a heavy load.
type feedReport struct {
	Consumers       int     `json:"feed_consumers"`
	FeedRate        float64 `json:"feed_rate_target"`
	WaitSeconds     float64 `json:"feed_wait_s"`
	PauseMs         float64 `json:"feed_pause_ms"`
	PushEndpoints   int     `json:"push_endpoints"`
	PushRate        float64 `json:"push_rate_target"`
	DurationSeconds float64 `json:"duration_s"`
	SetupSeconds    float64 `json:"setup_s"`

	PublishedFeed   int     `json:"published_feed"`
	PublishedPush   int     `json:"published_push"`
	PublishSeconds  float64 `json:"publish_s"`
	PushPublishRate float64 `json:"push_publish_per_s"`

	// Served counts the events the consumers read (duplicates included),
	// ServedPerSecond over the time from the first publish to the last read.
	Served          int64   `json:"served"`
	ServedPerSecond float64 `json:"served_per_s"`
	Pages           int64   `json:"pages"`
	EmptyPages      int64   `json:"empty_pages"`
	ReadErrors      int64   `json:"read_errors"`
	// PageLatency is request → response of the pages that returned events;
	// ReadyPageLatency of those whose first event was published
	// feedReadyAge before the request (the read found it waiting: the time
	// to serve a page, without the wait for an event); ReadLatency is
	// publish → read of every event.
	PageLatency      latencySummary `json:"page_latency"`
	ReadyPageLatency latencySummary `json:"ready_page_latency"`
	ReadyPages       int            `json:"ready_pages"`
	ReadLatency      latencySummary `json:"publish_to_read"`
	Missing          int            `json:"feed_missing"`
	Duplicates       int64          `json:"feed_duplicates"`
	Gaps             int64          `json:"feed_sequence_gaps"`
	OrderViolations  int64          `json:"feed_order_violations"`

	PushReceived   int             `json:"push_received"`
	PushPerSecond  float64         `json:"push_delivered_per_s"`
	PushLatency    latencySummary  `json:"push_publish_to_receipt"`
	CPUCores       float64         `json:"cpu_cores"`
	BrokerCPUCores float64         `json:"broker_cpu_cores,omitempty"`
	Receiver       benchrecv.Stats `json:"receiver"`
	Incomplete     string          `json:"incomplete,omitempty"`
}

// runFeed creates -endpoints push endpoints and -feed-consumers pull
// endpoints (a tenant each), starts one consumer per feed long-polling
// with -feed-wait, publishes -push-rate and -feed-rate events/s for
// -duration, and waits until every event has been delivered or read.
func runFeed(ctx context.Context, cfg config, stderr io.Writer) (report, error) {
	push := int(cfg.PushRate * cfg.Duration.Seconds())
	pull := int(cfg.FeedRate * cfg.Duration.Seconds())
	if pull < 1 {
		return nil, fmt.Errorf("feed: -feed-rate × -duration publishes no event")
	}
	p := newPlan(cfg.DataBytes, true,
		stream{count: push, first: 0, endpoints: cfg.Endpoints, entities: feedEntities, rate: cfg.PushRate},
		stream{count: pull, first: cfg.Endpoints, endpoints: cfg.FeedConsumers, entities: feedEntities, rate: cfg.FeedRate})
	t0 := time.Now()
	r, err := startRig(ctx, cfg, p, cfg.Endpoints, func(int) int { return cfg.MaxConcurrency }, stderr)
	if err != nil {
		return nil, err
	}
	defer r.close(stderr)
	fmt.Fprintf(stderr, "creating %d pull endpoints and their consumer tokens...\n", cfg.FeedConsumers)
	feeds, err := createFeeds(ctx, r.lw, cfg.Endpoints, cfg.FeedConsumers)
	if err != nil {
		return nil, err
	}
	rep := &feedReport{
		Consumers: cfg.FeedConsumers, FeedRate: cfg.FeedRate, WaitSeconds: cfg.FeedWait.Seconds(), PauseMs: ms(cfg.FeedPause),
		PushEndpoints: cfg.Endpoints, PushRate: cfg.PushRate, DurationSeconds: cfg.Duration.Seconds(),
		SetupSeconds: time.Since(t0).Seconds(), PublishedFeed: pull, PublishedPush: push,
	}
	run := &feedRun{cfg: cfg, rig: r, plan: p, readAt: make([]atomic.Int64, p.slots)}
	run.measure(ctx, feeds, rep, stderr)
	return rep, nil
}

// feedEndpoint is a pull endpoint and its consumer token.
type feedEndpoint struct{ id, token string }

// createFeeds creates count pull endpoints, endpoint n (from first) of
// tenant tenantName(n), each with a consumer token.
func createFeeds(ctx context.Context, lw *laneway, first, count int) ([]feedEndpoint, error) {
	api, err := lw.api()
	if err != nil {
		return nil, err
	}
	out := make([]feedEndpoint, count)
	err = forEachParallel(ctx, count, func(ctx context.Context, i int) error {
		var ep struct {
			ID string `json:"id"`
		}
		if err := postJSON(ctx, api, "/v1/endpoints", map[string]string{"tenant": tenantName(first + i), "mode": "pull"}, &ep); err != nil {
			return fmt.Errorf("pull endpoint %d: %w", first+i, err)
		}
		tok, err := api.CreateFeedToken(ctx, ep.ID)
		if err != nil {
			return fmt.Errorf("feed token of %s: %w", ep.ID, err)
		}
		out[i] = feedEndpoint{id: ep.ID, token: tok.Token}
		return nil
	})
	return out, err
}

// feedRun is the state of one feed run.
type feedRun struct {
	cfg    config
	rig    *rig
	plan   *plan
	readAt []atomic.Int64 // by slot: when a consumer first read the event (Unix ns)

	tallies []*feedTally
}

// measure runs the consumers and the publishers, waits for every event and
// fills rep.
func (run *feedRun) measure(ctx context.Context, feeds []feedEndpoint, rep *feedReport, stderr io.Writer) {
	cfg := run.cfg
	readCtx, stopReading := context.WithCancel(ctx)
	var wg sync.WaitGroup
	transport := &http.Transport{MaxIdleConnsPerHost: len(feeds) + 8}
	defer transport.CloseIdleConnections()
	for _, ep := range feeds {
		t := &feedTally{last: map[string]int64{}}
		run.tallies = append(run.tallies, t)
		wg.Go(func() { run.consume(readCtx, ep, transport, t) })
	}
	fmt.Fprintf(stderr, "publishing %.0f events/s to %d feeds and %.0f/s to %d push endpoints for %s...\n",
		cfg.FeedRate, len(feeds), cfg.PushRate, cfg.Endpoints, cfg.Duration)
	pb := &publishing{}
	cpu0, broker0 := processCPU(), pidCPU(cfg.BrokerPID)
	began := time.Now() // publishPlan sets pb.start itself: the sampler must not read it
	smp := startSampler(cfg.Sample, func(now time.Time) {
		fmt.Fprintf(stderr, "  %5.1fs  published %d  served %d  push received %d\n",
			now.Sub(began).Seconds(), pb.acked.Load(), run.served(), run.rig.recv.Received())
	})
	if err := publishPlan(ctx, run.rig.prod, run.plan, pb); err != nil {
		rep.Incomplete = err.Error()
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	if err := waitUntil(waitCtx, run.allArrived); err != nil && rep.Incomplete == "" {
		rep.Incomplete = fmt.Sprintf("gave up waiting: %d of %d feed events read, %d of %d push deliveries: %v",
			run.distinctRead(), rep.PublishedFeed, run.rig.recv.Received(), rep.PublishedPush, err)
	}
	cancel()
	wall := time.Since(pb.start)
	rep.CPUCores = (processCPU() - cpu0).Seconds() / wall.Seconds()
	rep.BrokerCPUCores = (pidCPU(cfg.BrokerPID) - broker0).Seconds() / wall.Seconds()
	smp.stop()
	stopReading()
	wg.Wait()
	run.fill(rep, pb)
}

func (run *feedRun) allArrived() bool {
	return run.distinctRead() >= int64(run.plan.streams[1].count) && run.rig.recv.Received() >= int64(run.plan.streams[0].count)
}

// consume reads one feed from its start until ctx ends, as a consumer
// keeping its own cursor would, and tallies every page.
func (run *feedRun) consume(ctx context.Context, ep feedEndpoint, transport http.RoundTripper, t *feedTally) {
	f, err := receiver.NewFeed(receiver.FeedConfig{BaseURL: "http://" + run.rig.lw.app.HTTPAddr(), EndpointID: ep.id, Token: ep.token,
		HTTPClient: &http.Client{Transport: transport}, Limit: receiver.DefaultFeedLimit, Wait: run.cfg.FeedWait, NoAck: true})
	if err != nil {
		t.errors.Add(1)
		return
	}
	cursor := ""
	for ctx.Err() == nil {
		asked := time.Now()
		page, err := f.Fetch(ctx, cursor, run.cfg.FeedWait)
		answered := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				t.errors.Add(1)
				timing.Sleep(ctx, time.Until(answered.Add(100*time.Millisecond)))
			}
			continue
		}
		run.tally(t, page.Events, asked, answered)
		cursor = page.NextCursor
		if len(page.Events) > 0 && run.cfg.FeedPause > 0 {
			timing.Sleep(ctx, time.Until(answered.Add(run.cfg.FeedPause)))
		}
	}
}

// tally records a page: its latency, each event's publish → read latency
// and whether the sequences and revisions run on as they must.
func (run *feedRun) tally(t *feedTally, events []receiver.FeedEvent, asked, answered time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pages++
	if len(events) == 0 {
		t.empty++
		return
	}
	first := run.slotOf(events[0].ID)
	t.pageLatency = append(t.pageLatency, answered.Sub(asked))
	if first >= 0 && run.plan.at[first] <= asked.Add(-feedReadyAge).UnixNano() {
		t.readyLatency = append(t.readyLatency, answered.Sub(asked))
	}
	for _, ev := range events {
		t.check(ev)
		if slot := run.slotOf(ev.ID); slot >= 0 {
			if !run.readAt[slot].CompareAndSwap(0, answered.UnixNano()) {
				t.duplicates++
			}
			t.readLatency = append(t.readLatency, time.Duration(answered.UnixNano()-run.plan.at[slot]))
		}
	}
}

// slotOf is the plan slot of a feed event id ("e<slot>"), or -1.
func (run *feedRun) slotOf(id string) int {
	slot, err := strconv.Atoi(strings.TrimPrefix(id, "e"))
	if err != nil || !strings.HasPrefix(id, "e") || slot < 0 || slot >= run.plan.slots {
		return -1
	}
	return slot
}

func (run *feedRun) served() int64 {
	var n int64
	for _, t := range run.tallies {
		t.mu.Lock()
		n += int64(t.read)
		t.mu.Unlock()
	}
	return n
}

// distinctRead counts the feed events some consumer has read.
func (run *feedRun) distinctRead() int64 {
	s := run.plan.streams[1]
	var n int64
	for slot := s.base; slot < s.base+s.count; slot++ {
		if run.readAt[slot].Load() != 0 {
			n++
		}
	}
	return n
}

// feedTally is one consumer's record.
type feedTally struct {
	errors atomic.Int64

	mu                                     sync.Mutex
	pages, empty, read                     int
	next                                   int64            // the sequence due next
	last                                   map[string]int64 // entity → highest revision read
	gaps, order, duplicates                int64
	pageLatency, readyLatency, readLatency []time.Duration
}

// check counts a sequence that is not the next one (a gap, or a step
// back) and a revision of an entity that is not above the last one read
// (Laneway delivers facts in order, and no crash happens here).
func (t *feedTally) check(ev receiver.FeedEvent) {
	t.read++
	if ev.Sequence != t.next {
		t.gaps++
	}
	t.next = ev.Sequence + 1
	if ev.Entity.Revision <= t.last[ev.Entity.ID] {
		t.order++
	}
	t.last[ev.Entity.ID] = max(t.last[ev.Entity.ID], ev.Entity.Revision)
}

// fill sums the tallies and the push deliveries into rep.
func (run *feedRun) fill(rep *feedReport, pb *publishing) {
	rep.PublishSeconds = pb.end.Sub(pb.start).Seconds()
	if push := run.plan.streams[0]; push.count > 0 && rep.PublishSeconds > 0 {
		rep.PushPublishRate = float64(push.count) / rep.PublishSeconds
	}
	var page, ready, read []time.Duration
	for _, t := range run.tallies {
		t.mu.Lock()
		rep.Served += int64(t.read)
		rep.Pages += int64(t.pages)
		rep.EmptyPages += int64(t.empty)
		rep.Gaps, rep.OrderViolations, rep.Duplicates = rep.Gaps+t.gaps, rep.OrderViolations+t.order, rep.Duplicates+t.duplicates
		page, ready, read = append(page, t.pageLatency...), append(ready, t.readyLatency...), append(read, t.readLatency...)
		t.mu.Unlock()
		rep.ReadErrors += t.errors.Load()
	}
	rep.PageLatency, rep.ReadyPageLatency, rep.ReadLatency = summarizeDurations(page), summarizeDurations(ready), summarizeDurations(read)
	rep.ReadyPages = len(ready)
	rep.Missing = rep.PublishedFeed - int(run.distinctRead())
	var lastRead int64
	for i := range run.readAt {
		lastRead = max(lastRead, run.readAt[i].Load())
	}
	if lastRead > 0 {
		rep.ServedPerSecond = float64(rep.Served) / time.Unix(0, lastRead).Sub(pb.start).Seconds()
	}
	run.fillPush(rep, pb)
}

// fillPush measures the push endpoints' deliveries.
func (run *feedRun) fillPush(rep *feedReport, pb *publishing) {
	s := run.plan.streams[0]
	var lat []time.Duration
	var last int64
	for slot := s.base; slot < s.base+s.count; slot++ {
		if at := run.rig.recv.ReceivedAt(slot); at != 0 {
			lat = append(lat, time.Duration(at-run.plan.at[slot]))
			last = max(last, at)
		}
	}
	rep.PushReceived, rep.PushLatency = len(lat), summarizeDurations(lat)
	if last > 0 {
		rep.PushPerSecond = float64(len(lat)) / time.Unix(0, last).Sub(pb.start).Seconds()
	}
	rep.Receiver = run.rig.recv.Stats()
}

// summarizeDurations is summarize for bare durations.
func summarizeDurations(d []time.Duration) latencySummary {
	points := make([]latencyPoint, len(d))
	for i, v := range d {
		points[i].latency = v
	}
	return summarize(points)
}

func (rep *feedReport) failures() []string {
	var out []string
	if rep.Incomplete != "" {
		out = append(out, rep.Incomplete)
	}
	checks := []struct {
		bad  bool
		what string
	}{
		{rep.Missing > 0, fmt.Sprintf("%d of %d feed events never read", rep.Missing, rep.PublishedFeed)},
		{rep.Gaps > 0, fmt.Sprintf("%d feed sequences skipped or went back", rep.Gaps)},
		{rep.OrderViolations > 0, fmt.Sprintf("%d feed events at or below their entity's last revision", rep.OrderViolations)},
		{rep.Duplicates > 0, fmt.Sprintf("%d feed events read twice (none expected without a crash)", rep.Duplicates)},
		{rep.PushReceived < rep.PublishedPush, fmt.Sprintf("%d of %d push deliveries missing", rep.PublishedPush-rep.PushReceived, rep.PublishedPush)},
	}
	for _, c := range checks {
		if c.bad {
			out = append(out, c.what)
		}
	}
	return append(out, receiptsCheck(rep.Receiver)...)
}

func (rep *feedReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "  %d pull endpoints, one consumer each long-polling (wait %gs, limit %d, pause after a page %s), %.0f events/s over them; %d push endpoints carrying %.0f events/s on the same deliveries partitions\n",
		rep.Consumers, rep.WaitSeconds, receiver.DefaultFeedLimit, fmtMs(rep.PauseMs), rep.FeedRate, rep.PushEndpoints, rep.PushRate)
	fmt.Fprintf(w, "  set up in %.2fs; load for %.0fs: published %d feed + %d push events in %.1fs (push publish rate reached %.0f/s); process %.2f cores busy",
		rep.SetupSeconds, rep.DurationSeconds, rep.PublishedFeed, rep.PublishedPush, rep.PublishSeconds, rep.PushPublishRate, rep.CPUCores)
	if rep.BrokerCPUCores > 0 {
		fmt.Fprintf(w, ", broker %.2f cores", rep.BrokerCPUCores)
	}
	fmt.Fprintf(w, "\n\nFeeds: %d events served to %d consumers, %.0f events/s (first publish → last read); %d pages, %d empty (waits that timed out), %d read errors\n",
		rep.Served, rep.Consumers, rep.ServedPerSecond, rep.Pages, rep.EmptyPages, rep.ReadErrors)
	l := rep.PageLatency
	fmt.Fprintf(w, "  page latency (request → response, pages with events): p50 %s, p90 %s, p99 %s, max %s\n", fmtMs(l.P50Ms), fmtMs(l.P90Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs))
	l = rep.ReadyPageLatency
	fmt.Fprintf(w, "  of them the %d ready ones (first event published %s before the request): p50 %s, p90 %s, p99 %s, max %s\n", rep.ReadyPages, feedReadyAge, fmtMs(l.P50Ms), fmtMs(l.P90Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs))
	l = rep.ReadLatency
	fmt.Fprintf(w, "  publish → read: p50 %s, p90 %s, p99 %s, max %s\n", fmtMs(l.P50Ms), fmtMs(l.P90Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs))
	fmt.Fprintf(w, "  missing %d, duplicates %d, sequence gaps %d, order violations %d\n", rep.Missing, rep.Duplicates, rep.Gaps, rep.OrderViolations)
	l = rep.PushLatency
	fmt.Fprintf(w, "\nPush: %d of %d delivered, %.0f deliveries/s; publish → receipt p50 %s, p90 %s, p99 %s, max %s\n",
		rep.PushReceived, rep.PublishedPush, rep.PushPerSecond, fmtMs(l.P50Ms), fmtMs(l.P90Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs))
	fmt.Fprintf(w, "Receiver: %+v\n", rep.Receiver)
}
