package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// settle is how long the receiver keeps counting after the last expected
// delivery, so that a late duplicate or a stray delivery is still seen.
const settle = time.Second

// bench runs the baseline and the end-to-end measurement. Everything it
// starts is stopped before it returns.
func bench(ctx context.Context, cfg config, stderr io.Writer) (*result, error) {
	sched := newSchedule(cfg)
	recv, err := benchrecv.Start(benchrecv.Config{
		Endpoints: cfg.Endpoints, Slots: sched.deliveries(), Lookup: sched.lookup,
		Delay: cfg.ReceiverDelay, SharedListener: cfg.SharedPort, Ports: portsFor(cfg), Verify: cfg.Verify,
	})
	if err != nil {
		return nil, err
	}
	defer recv.Close() // last: Laneway's stop lets in-flight attempts finish
	res := newResult(cfg)
	if cfg.RawRequests > 0 {
		fmt.Fprintf(stderr, "raw HTTP baseline: %d requests, %d workers...\n", cfg.RawRequests, cfg.RawConcurrency)
		raw, err := rawBaseline(ctx, recv.RawURL(), cfg.RawRequests, cfg.RawConcurrency, sched.sampleBody())
		if err != nil {
			return nil, err
		}
		res.Raw = &raw
	}
	fmt.Fprintln(stderr, "starting laneway...")
	lw, err := startLaneway(ctx, cfg, stderr)
	if err != nil {
		return nil, err
	}
	defer lw.stop(time.Minute, stderr)
	spec := func(n int) endpointSpec {
		return endpointSpec{tenant: tenantName(sched.tenantOfEndpoint(n)), maxConcurrency: cfg.MaxConcurrency}
	}
	if _, err := lw.createEndpoints(ctx, recv, cfg.Endpoints, spec); err != nil {
		return nil, err
	}
	prod, err := newProducer(lw.app.Brokers(), lw.app.Topics().Events, cfg.Linger)
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	res.Laneway, err = measure(ctx, cfg, sched, lw, prod, recv, stderr)
	if err != nil {
		return nil, err
	}
	res.finish()
	return res, nil
}

// lanewayLogger is Laneway's logger in the benchmark: warnings and errors
// by default, so that log lines do not cost the CPU being measured; -log-level
// info adds one line per failed attempt, lane parks and partition moves.
func lanewayLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// measure warms up, then runs the measured phase and evaluates it.
// Running out of time is not an error: what arrived is reported, and the
// missing deliveries fail the run.
func measure(ctx context.Context, cfg config, sched schedule, lw *laneway, prod *kgo.Client, recv *benchrecv.Receiver, stderr io.Writer) (e2eResult, error) {
	r := e2eResult{Events: sched.events, Deliveries: sched.deliveries()}
	reg := lw.app.Registry()
	if cfg.Warmup {
		d, err := warmup(ctx, prod, recv, sched, reg)
		if err != nil {
			return r, err
		}
		r.WarmupSeconds = d.Seconds()
	}
	before := readCounters(reg)
	ph, err := publishAndWait(ctx, cfg, sched, prod, recv, lw.app, stderr)
	if err != nil {
		return r, err
	}
	r.Usage = ph.usage
	if ph.waitErr != nil {
		r.Incomplete = fmt.Sprintf("gave up waiting: %v", ph.waitErr)
	} else {
		time.Sleep(settle)
	}
	r.fill(ph.published, recv, sched)
	r.Counters = readCounters(reg).minus(before)
	r.Correctness = checkCorrectness(recv, cfg, sched)
	return r, nil
}

// phase is what the measured phase leaves to evaluate.
type phase struct {
	published *published
	usage     usage
	waitErr   error // the deadline passed before every delivery arrived
}

// publishAndWait is the measured phase, profiled and watched: publish every
// event, then wait until every delivery has arrived or ctx ends.
func publishAndWait(ctx context.Context, cfg config, sched schedule, prod *kgo.Client, recv *benchrecv.Receiver, lw service, stderr io.Writer) (phase, error) {
	reg := lw.Registry()
	ph := phase{published: &published{at: make([]int64, sched.events)}}
	use := startUsage(cfg.BrokerPID).withLaneway(lw)
	stopProfile, err := startCPUProfile(cfg.CPUProfile)
	if err != nil {
		return ph, err
	}
	defer stopProfile()
	stopProgress := startProgress(cfg.Progress, stderr, ph.published, recv, sched, reg)
	defer stopProgress()
	fmt.Fprintf(stderr, "publishing %d events for %d deliveries...\n", sched.events, sched.deliveries())
	if err := publish(ctx, prod, sched, cfg.Rate, ph.published); err != nil {
		return ph, err
	}
	want := int64(sched.deliveries())
	ph.waitErr = waitUntil(ctx, func() bool { return recv.Received() >= want })
	ph.usage = use.since(recv.Received())
	return ph, writeAllocProfile(cfg.MemProfile)
}

// writeAllocProfile writes the allocations sampled so far to path, if set.
func writeAllocProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// fill computes throughput and latency from the receipt times.
func (r *e2eResult) fill(p *published, recv *benchrecv.Receiver, sched schedule) {
	lat, last := latencies(recv, sched, p.at)
	r.PublishSeconds = p.end.Sub(p.start).Seconds()
	r.PublishPerSecond = float64(sched.events) / r.PublishSeconds
	if len(lat) == 0 {
		return
	}
	r.Seconds = time.Unix(0, last).Sub(p.start).Seconds()
	r.PerSecond = float64(len(lat)) / r.Seconds
	slices.Sort(lat)
	r.Latency = latencySummary{
		P50Ms: ms(percentile(lat, 50)), P90Ms: ms(percentile(lat, 90)),
		P99Ms: ms(percentile(lat, 99)), MaxMs: ms(lat[len(lat)-1]),
	}
}

// latencies returns each received delivery's publish-to-receipt time and
// the last receipt, in Unix nanoseconds.
func latencies(recv *benchrecv.Receiver, sched schedule, publishedAt []int64) ([]time.Duration, int64) {
	lat := make([]time.Duration, 0, sched.deliveries())
	var last int64
	for seq := range sched.events {
		for k := range sched.fanout {
			at := recv.ReceivedAt(sched.slot(seq, k))
			if at == 0 {
				continue
			}
			lat = append(lat, time.Duration(at-publishedAt[seq]))
			last = max(last, at)
		}
	}
	return lat, last
}

func checkCorrectness(recv *benchrecv.Receiver, cfg config, sched schedule) correctness {
	st := recv.Stats()
	c := correctness{
		Stats: st, Expected: sched.deliveries(), Missing: int64(sched.deliveries()) - st.Received,
		Unexpected: st.Unmatched, Limit: cfg.MaxConcurrency, Verified: cfg.Verify,
	}
	if cfg.Warmup {
		c.Unexpected -= int64(sched.warmupDeliveries())
	}
	for n := range cfg.Endpoints {
		m := recv.MaxInFlight(n)
		c.MaxInFlight = max(c.MaxInFlight, m)
		if m > int64(cfg.MaxConcurrency) {
			c.EndpointsOverLimit++
		}
		if m == int64(cfg.MaxConcurrency) {
			c.EndpointsAtLimit++
		}
	}
	return c
}

// startProgress prints a progress line every interval until the returned
// function is called. The fanned-out count, from Laneway's metrics, tells a
// slow fan-out stage from a slow delivery stage.
func startProgress(every time.Duration, w io.Writer, p *published, recv *benchrecv.Receiver, sched schedule, reg prometheus.Gatherer) func() {
	if every <= 0 {
		return func() {}
	}
	start := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		prev := int64(0)
		for {
			select {
			case <-done:
				return
			case <-t.C:
				got, c := recv.Received(), readCounters(reg)
				fmt.Fprintf(w, "  %5.1fs  published %d/%d  fanned out %.0f  delivered %d/%d  (%.0f/s)  lanes parked %.0f\n",
					time.Since(start).Seconds(), p.acked.Load(), sched.events, c.FannedOut, got, sched.deliveries(),
					float64(got-prev)/every.Seconds(), c.LanesParked)
				prev = got
			}
		}
	})
	return sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})
}

// startCPUProfile profiles until the returned function is first called.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}), nil
}

// usageStart is the process's resource use when the measured phase began.
type usageStart struct {
	wall      time.Time
	cpu       time.Duration
	mem       runtime.MemStats
	brokerPID int
	broker    time.Duration
	// Laneway's own process, when it runs apart (-laneway-bin).
	lw      service
	lwCPU   time.Duration
	lwAlloc float64
}

// withLaneway adds Laneway's own process to u when it runs apart.
func (u usageStart) withLaneway(lw service) usageStart {
	if lw.PID() > 0 {
		u.lw, u.lwCPU, u.lwAlloc = lw, pidCPU(lw.PID()), allocatedBytes(lw.Registry())
	}
	return u
}

// allocatedBytes is the Go heap allocated since the process started, from
// its metrics.
func allocatedBytes(reg prometheus.Gatherer) float64 {
	return snapshot(reg).sum("go_memstats_alloc_bytes_total")
}

func startUsage(brokerPID int) usageStart {
	u := usageStart{wall: time.Now(), cpu: processCPU(), brokerPID: brokerPID, broker: pidCPU(brokerPID)}
	runtime.ReadMemStats(&u.mem)
	return u
}

// since is the resource use of the whole process (Laneway, embedded Kafka,
// publisher and receiver alike) since u, per delivered message.
func (u usageStart) since(delivered int64) usage {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	wall := time.Since(u.wall)
	cpu := processCPU() - u.cpu
	per := float64(max(delivered, 1))
	broker := pidCPU(u.brokerPID) - u.broker
	out := usage{
		CPUCores:                cpu.Seconds() / wall.Seconds(),
		CPUMicrosPerDeliv:       float64(cpu.Microseconds()) / per,
		AllocBytesPerDeliv:      float64(m.TotalAlloc-u.mem.TotalAlloc) / per,
		GCs:                     m.NumGC - u.mem.NumGC,
		BrokerCPUCores:          broker.Seconds() / wall.Seconds(),
		BrokerCPUMicrosPerDeliv: float64(broker.Microseconds()) / per,
	}
	if u.lw != nil {
		lw := pidCPU(u.lw.PID()) - u.lwCPU
		out.LanewayCPUCores = lw.Seconds() / wall.Seconds()
		out.LanewayCPUMicrosPerDeliv = float64(lw.Microseconds()) / per
		out.LanewayAllocBytesPerDeliv = (allocatedBytes(u.lw.Registry()) - u.lwAlloc) / per
	}
	return out
}

// lanewayCounters are Laneway's own delivery metrics.
type lanewayCounters struct {
	Attempts       float64 `json:"attempts"`
	FailedAttempts float64 `json:"failed_attempts"`
	DeadLetters    float64 `json:"dead_letters"`
	// FannedOut counts deliveries the fan-out stage has committed.
	FannedOut float64 `json:"fanned_out"`
	// LanesParked counts lanes moved to the parked topic; their backlog is
	// then read back at the endpoint's pace instead of flowing directly.
	LanesParked float64 `json:"lanes_parked"`
}

func readCounters(g prometheus.Gatherer) lanewayCounters {
	var c lanewayCounters
	families, _ := g.Gather() // a partial gather is still worth reporting
	for _, f := range families {
		for _, m := range f.GetMetric() {
			v := m.GetCounter().GetValue()
			switch f.GetName() {
			case "laneway_delivery_attempts_total":
				c.Attempts += v
				if !hasLabel(m.GetLabel(), "outcome", "delivered") {
					c.FailedAttempts += v
				}
			case "laneway_dead_letters_total":
				c.DeadLetters += v
			case "laneway_fanout_deliveries_total":
				c.FannedOut += v
			case "laneway_lanes_parked_total":
				c.LanesParked += v
			}
		}
	}
	return c
}

func (c lanewayCounters) minus(o lanewayCounters) lanewayCounters {
	return lanewayCounters{
		Attempts: c.Attempts - o.Attempts, FailedAttempts: c.FailedAttempts - o.FailedAttempts,
		DeadLetters: c.DeadLetters - o.DeadLetters, FannedOut: c.FannedOut - o.FannedOut,
		LanesParked: c.LanesParked - o.LanesParked,
	}
}
