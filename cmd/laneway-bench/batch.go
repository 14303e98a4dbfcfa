package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// batchReport is what the batch scenario measured: the same events, at
// the same rate, delivered to push endpoints and then to batch endpoints
// by one Laneway in process.
type batchReport struct {
	Endpoints      int     `json:"endpoints_per_mode"`
	Events         int     `json:"events_per_mode"`
	DataBytes      int     `json:"data_bytes"`
	Entities       int     `json:"entities_per_endpoint"`
	Rate           float64 `json:"rate_target"`
	MaxConcurrency int     `json:"max_concurrency"`
	MaxEvents      int     `json:"batch_max_events"`
	MaxWaitMs      float64 `json:"batch_max_wait_ms"`
	SetupSeconds   float64 `json:"setup_s"`

	Push  modeResult `json:"push"`
	Batch modeResult `json:"batch"`
	// Ratio is batch deliveries/s over push deliveries/s.
	Ratio float64 `json:"batch_to_push"`

	PushReceiver benchrecv.Stats      `json:"push_receiver"`
	BatchChecks  benchrecv.BatchStats `json:"batch_checks"`
}

// modeResult is one mode's phase: Received counts the events its
// receivers accepted (each once), Seconds runs from the first publish to
// the last receipt.
type modeResult struct {
	Published         int            `json:"published"`
	Received          int64          `json:"received"`
	Seconds           float64        `json:"seconds"`
	PerSecond         float64        `json:"deliveries_per_s"`
	PublishPerSecond  float64        `json:"publish_per_s"`
	Requests          int64          `json:"receiver_requests"`
	RequestsPerSecond float64        `json:"receiver_requests_per_s"`
	Latency           latencySummary `json:"publish_to_receipt"`
	Usage             usage          `json:"usage"`
	Incomplete        string         `json:"incomplete,omitempty"`
}

// runBatch creates -endpoints push endpoints and as many batch endpoints
// (a tenant each), then publishes -events events of -data-bytes to the
// push endpoints and waits for all of them, then the same to the batch
// endpoints, each at -rate, and compares the two.
func runBatch(ctx context.Context, cfg config, stderr io.Writer) (report, error) {
	entities := max(cfg.Entities/cfg.Endpoints, 1)
	p := newPlan(cfg.DataBytes, true,
		stream{count: cfg.Events, first: 0, endpoints: cfg.Endpoints, entities: entities, rate: cfg.Rate},
		stream{count: cfg.Events, first: cfg.Endpoints, endpoints: cfg.Endpoints, entities: entities, rate: cfg.Rate})
	t0 := time.Now()
	r, err := startRig(ctx, cfg, p, cfg.Endpoints, func(int) int { return cfg.MaxConcurrency }, stderr)
	if err != nil {
		return nil, err
	}
	defer r.close(stderr)
	batch := p.streams[1]
	br, err := startBatchRecv(p, batch, cfg.Verify)
	if err != nil {
		return nil, err
	}
	defer br.Close()
	fmt.Fprintf(stderr, "creating %d batch endpoints...\n", cfg.Endpoints)
	if err := createBatchEndpoints(ctx, r.lw, br, batch, cfg); err != nil {
		return nil, err
	}
	if err := warmupBatch(ctx, r, p, batch, br); err != nil {
		return nil, err
	}
	rep := &batchReport{Endpoints: cfg.Endpoints, Events: cfg.Events, DataBytes: cfg.DataBytes, Entities: entities, Rate: cfg.Rate,
		MaxConcurrency: cfg.MaxConcurrency, MaxEvents: cfg.BatchMaxEvents, MaxWaitMs: ms(cfg.BatchMaxWait), SetupSeconds: time.Since(t0).Seconds()}
	rep.Push = measureMode(ctx, cfg, r, p, 0, pushReceipts{r.recv}, stderr)
	rep.Batch = measureMode(ctx, cfg, r, p, 1, br, stderr)
	if rep.Push.PerSecond > 0 {
		rep.Ratio = rep.Batch.PerSecond / rep.Push.PerSecond
	}
	rep.PushReceiver, rep.BatchChecks = r.recv.Stats(), br.Stats()
	return rep, nil
}

// receipts is what a phase reads from its receiver.
type receipts interface {
	Received() int64           // distinct expected events
	ReceivedAt(slot int) int64 // Unix ns of the slot's first receipt, 0: none
	Requests() int64
}

// pushReceipts reads the push endpoints' receiver.
type pushReceipts struct{ *benchrecv.Receiver }

func (p pushReceipts) Requests() int64 { return p.Stats().Requests }

// measureMode publishes stream i of p and waits until its receiver has
// every event.
func measureMode(ctx context.Context, cfg config, r *rig, p *plan, i int, rc receipts, stderr io.Writer) modeResult {
	s := p.streams[i]
	res := modeResult{Published: s.count}
	name := [...]string{"push", "batch"}[i]
	fmt.Fprintf(stderr, "%s: publishing %d events...\n", name, s.count)
	received0, requests0 := rc.Received(), rc.Requests()
	pb := &publishing{}
	u := startUsage(cfg.BrokerPID)
	smp := startSampler(cfg.Sample, func(now time.Time) {
		fmt.Fprintf(stderr, "  %s %5.1fs  published %d  received %d\n", name, now.Sub(u.wall).Seconds(), pb.acked.Load(), rc.Received()-received0)
	})
	defer smp.stop()
	one := &plan{streams: []stream{s}, slots: p.slots, data: p.data, at: p.at}
	if err := publishPlan(ctx, r.prod, one, pb); err != nil {
		res.Incomplete = err.Error()
	}
	waitCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := waitUntil(waitCtx, func() bool { return rc.Received()-received0 >= int64(s.count) }); err != nil && res.Incomplete == "" {
		res.Incomplete = fmt.Sprintf("%s: gave up waiting: %d of %d events received: %v", name, rc.Received()-received0, s.count, err)
	}
	res.Received = rc.Received() - received0
	res.Usage = u.since(res.Received)
	res.Requests = rc.Requests() - requests0
	res.fill(s, p, rc, pb)
	return res
}

// fill works out the rates and latencies from the receipts.
func (res *modeResult) fill(s stream, p *plan, rc receipts, pb *publishing) {
	lat := make([]time.Duration, 0, s.count)
	var last int64
	for slot := s.base; slot < s.base+s.count; slot++ {
		if at := rc.ReceivedAt(slot); at != 0 {
			lat = append(lat, time.Duration(at-p.at[slot]))
			last = max(last, at)
		}
	}
	res.Latency = summarizeDurations(lat)
	if d := pb.end.Sub(pb.start).Seconds(); d > 0 {
		res.PublishPerSecond = float64(s.count) / d
	}
	if last > 0 {
		res.Seconds = time.Unix(0, last).Sub(pb.start).Seconds()
		res.PerSecond = float64(res.Received) / res.Seconds
		res.RequestsPerSecond = float64(res.Requests) / res.Seconds
	}
}

// startBatchRecv starts the receiver of stream s's endpoints, the batch
// endpoints: its endpoint n is the plan's endpoint s.first + n.
func startBatchRecv(p *plan, s stream, verify bool) (*benchrecv.BatchReceiver, error) {
	return benchrecv.StartBatch(benchrecv.BatchConfig{
		Endpoints: s.endpoints, Slots: p.slots, WarmupPrefix: warmupID, Verify: verify,
		Lookup: func(n int, id string) (benchrecv.Delivery, bool) { return p.lookup(s.first+n, id) },
	})
}

// createBatchEndpoints creates stream s's endpoints as batch endpoints,
// endpoint n of tenant tenantName(s.first + n).
func createBatchEndpoints(ctx context.Context, lw *laneway, br *benchrecv.BatchReceiver, s stream, cfg config) error {
	api, err := lw.api()
	if err != nil {
		return err
	}
	return forEachParallel(ctx, s.endpoints, func(ctx context.Context, n int) error {
		var created struct{ ID, Secret string }
		body := map[string]any{"tenant": tenantName(s.first + n), "mode": "batch", "url": br.URL(n), "max_concurrency": cfg.MaxConcurrency,
			"batch": map[string]any{"max_events": cfg.BatchMaxEvents, "max_wait_ms": cfg.BatchMaxWait.Milliseconds()}}
		if err := postJSON(ctx, api, "/v1/endpoints", body, &created); err != nil {
			return fmt.Errorf("batch endpoint %d: %w", n, err)
		}
		return br.SetEndpoint(n, created.ID, created.Secret)
	})
}

// warmupBatch sends one event of its own to each of stream s's batch
// endpoints and waits until all of them arrived: a new batch endpoint's
// runner starts at the next rescan (within a second), which the measured
// phase must not wait for. The warm-up events take sequence 1 and are not
// counted.
func warmupBatch(ctx context.Context, r *rig, p *plan, s stream, br *benchrecv.BatchReceiver) error {
	recs := make([]*kgo.Record, s.endpoints)
	for n := range s.endpoints {
		key := "warmup:" + strconv.Itoa(n)
		recs[n] = &kgo.Record{Key: []byte(key), Value: appendEnvelope(nil, warmupID+strconv.Itoa(n), tenantName(s.first+n), key, 1, false, time.Now(), p.data)}
	}
	if err := r.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("batch warm-up: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := waitUntil(ctx, func() bool { return br.Warmed() >= int64(s.endpoints) }); err != nil {
		return fmt.Errorf("batch warm-up: %d of %d endpoints received their event: %w", br.Warmed(), s.endpoints, err)
	}
	return nil
}

// warmupID prefixes the warm-up events' ids; the plan's are "e<slot>".
const warmupID = "w"

func (rep *batchReport) failures() []string {
	var out []string
	for _, m := range []modeResult{rep.Push, rep.Batch} {
		if m.Incomplete != "" {
			out = append(out, m.Incomplete)
		}
	}
	c := rep.BatchChecks
	checks := []struct {
		bad  bool
		what string
	}{
		{rep.Push.Received < int64(rep.Push.Published), fmt.Sprintf("%d of %d push deliveries missing", int64(rep.Push.Published)-rep.Push.Received, rep.Push.Published)},
		{rep.Batch.Received < int64(rep.Batch.Published), fmt.Sprintf("%d of %d batch events missing", int64(rep.Batch.Published)-rep.Batch.Received, rep.Batch.Published)},
		{c.Gaps > 0, fmt.Sprintf("%d batch events out of sequence (a skip or a step back)", c.Gaps)},
		{c.Order > 0, fmt.Sprintf("%d batch events at or below their entity's last revision", c.Order)},
		{c.Duplicates > 0, fmt.Sprintf("%d batch events received twice (none expected without a crash)", c.Duplicates)},
		{c.Largest > rep.MaxEvents, fmt.Sprintf("a batch of %d events, above max_events %d", c.Largest, rep.MaxEvents)},
		{c.Overlaps > 0, fmt.Sprintf("%d batches arrived while another of their endpoint was in flight", c.Overlaps)},
		{c.Unmatched > 0 || c.Bad > 0, fmt.Sprintf("%d unexpected batch events, %d batches refused", c.Unmatched, c.Bad)},
	}
	for _, ch := range checks {
		if ch.bad {
			out = append(out, ch.what)
		}
	}
	return append(out, receiptsCheck(rep.PushReceiver)...)
}

func (rep *batchReport) writeText(w io.Writer) {
	rate := "as fast as Kafka takes them"
	if rep.Rate > 0 {
		rate = fmt.Sprintf("at %.0f/s", rep.Rate)
	}
	fmt.Fprintf(w, "  %d push endpoints, then %d batch endpoints (max_events %d, max_wait %s), max_concurrency %d, %d entities each; per mode %d events with %d-byte data published %s; set up in %.2fs\n\n",
		rep.Endpoints, rep.Endpoints, rep.MaxEvents, fmtMs(rep.MaxWaitMs), rep.MaxConcurrency, rep.Entities, rep.Events, rep.DataBytes, rate, rep.SetupSeconds)
	fmt.Fprintf(w, "  %-5s  %9s  %12s  %9s  %10s  %10s  %17s  %13s  %12s\n", "mode", "received", "deliveries/s", "publish/s", "requests/s", "events/req", "p50 / p99", "CPU µs/event", "broker µs/ev")
	for _, m := range []struct {
		name string
		r    modeResult
	}{{"push", rep.Push}, {"batch", rep.Batch}} {
		perReq := float64(m.r.Received) / float64(max(m.r.Requests, 1))
		fmt.Fprintf(w, "  %-5s  %9d  %12.0f  %9.0f  %10.0f  %10.1f  %17s  %13.1f  %12.1f\n", m.name, m.r.Received, m.r.PerSecond, m.r.PublishPerSecond,
			m.r.RequestsPerSecond, perReq, fmtMs(m.r.Latency.P50Ms)+" / "+fmtMs(m.r.Latency.P99Ms), m.r.Usage.CPUMicrosPerDeliv, m.r.Usage.BrokerCPUMicrosPerDeliv)
	}
	fmt.Fprintf(w, "\n  batch ÷ push: %.2f× the deliveries/s", rep.Ratio)
	if p, b := rep.Push.Usage.CPUMicrosPerDeliv, rep.Batch.Usage.CPUMicrosPerDeliv; p > 0 && b > 0 {
		fmt.Fprintf(w, ", %.2f× the process CPU per event", b/p)
	}
	fmt.Fprintf(w, "; process %.2f / %.2f cores busy", rep.Push.Usage.CPUCores, rep.Batch.Usage.CPUCores)
	if rep.Batch.Usage.BrokerCPUCores > 0 {
		fmt.Fprintf(w, ", broker %.2f / %.2f", rep.Push.Usage.BrokerCPUCores, rep.Batch.Usage.BrokerCPUCores)
	}
	c := rep.BatchChecks
	fmt.Fprintf(w, "\n  batches: %d, largest %d; sequence gaps %d, order violations %d, duplicates %d, overlaps %d, unmatched %d, refused %d\n",
		c.Batches, c.Largest, c.Gaps, c.Order, c.Duplicates, c.Overlaps, c.Unmatched, c.Bad)
	fmt.Fprintf(w, "  push receiver: %+v\n", rep.PushReceiver)
}
