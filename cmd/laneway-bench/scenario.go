package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/modes/feed"
	"github.com/laneway/laneway/internal/testkit/benchrecv"
	"github.com/laneway/laneway/receiver"
)

// scenarioFlags are the settings of the scenarios other than throughput.
type scenarioFlags struct {
	Duration    time.Duration // incident: how long the load runs
	HealthyRate float64       // incident: events/s over all healthy endpoints
	SlowRate    float64       // incident: events/s to the slow endpoint
	SlowDelay   time.Duration // incident: the slow endpoint's answer time
	SlowLimit   int           // incident: the slow endpoint's max_concurrency
	Sample      time.Duration // metrics, offsets and memory sampling interval
	Window      time.Duration // incident: latency window width
	RSSGoalMB   float64       // incident: fail if the RSS reaches this (0: no goal)

	BacklogSettle time.Duration // backlog: sampling after the backlog is all parked
	// States (backlog): publish state updates (coalesce: true, revisions
	// 1, 2, … per entity) instead of facts. Default false. With -events
	// equal to -entities every entity gets exactly one state.
	States bool

	CostEndpoints  []int // cost: endpoint counts to compare
	CostDeliveries int   // cost: deliveries per run

	DrainLimit   int           // drain: max_concurrency C
	DrainDelay   time.Duration // drain: answer time R once healthy
	DrainBacklog int           // drain: events N parked before recovery
	// DrainEntities spreads the drain backlog; the default is more than any
	// sensible max_concurrency, so per-entity order alone never caps the drain.
	DrainEntities int

	FeedConsumers int           // feed: pull endpoints, one long-polling consumer each
	FeedRate      float64       // feed: events/s over all pull endpoints
	PushRate      float64       // feed: events/s over the push endpoints (-endpoints) beside them
	FeedWait      time.Duration // feed: how long a read waits for events (the API's wait)
	// FeedPause (feed) is how long a consumer takes over a page with
	// events before its next read, as one handling its page would; 0
	// reads again at once, so every read long-polls for the next event.
	FeedPause time.Duration

	BatchMaxEvents int           // batch: the batch endpoints' max_events
	BatchMaxWait   time.Duration // batch: their max_wait_ms
}

func (f *scenarioFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.Duration, "duration", 120*time.Second, "incident, feed: how long the load runs (feed: default 30s)")
	fs.Float64Var(&f.RSSGoalMB, "rss-goal-mb", 0, "incident: fail if the process's RSS reaches this many MB (0: no goal)")
	fs.Float64Var(&f.HealthyRate, "healthy-rate", 2000, "incident: events/s spread round-robin over the healthy endpoints")
	fs.Float64Var(&f.SlowRate, "slow-rate", 12, "incident: events/s to the slow endpoint")
	fs.DurationVar(&f.SlowDelay, "slow-delay", 28*time.Second, "incident: how long the slow endpoint takes to answer")
	fs.IntVar(&f.SlowLimit, "slow-limit", 4, "incident: the slow endpoint's max_concurrency")
	fs.DurationVar(&f.Sample, "sample", 5*time.Second, "interval of metrics, committed-offset and memory samples")
	fs.DurationVar(&f.Window, "window", 10*time.Second, "incident: width of the latency windows")
	fs.DurationVar(&f.BacklogSettle, "backlog-settle", 20*time.Second, "backlog: keep sampling this long after the whole backlog is parked")
	fs.BoolVar(&f.States, "states", false, "backlog: publish state updates (coalesce: true, one revision after another per entity) instead of facts")
	fs.Func("cost-endpoints", "cost: comma-separated endpoint counts (default 10,100,1000,10000)", func(v string) error {
		counts, err := parseCounts(v)
		f.CostEndpoints = counts
		return err
	})
	fs.IntVar(&f.CostDeliveries, "cost-deliveries", 50000, "cost: deliveries in each run")
	fs.IntVar(&f.DrainLimit, "drain-limit", 4, "drain: the endpoint's max_concurrency C")
	fs.DurationVar(&f.DrainDelay, "drain-delay", 500*time.Millisecond, "drain: the endpoint's answer time R once it recovers")
	fs.IntVar(&f.DrainBacklog, "drain-backlog", 400, "drain: events N published while the endpoint hangs")
	fs.IntVar(&f.DrainEntities, "drain-entities", 64, "drain: entities the backlog is spread over (round-robin)")
	fs.IntVar(&f.FeedConsumers, "feed-consumers", 100, "feed: pull endpoints, each read by one long-polling consumer")
	fs.Float64Var(&f.FeedRate, "feed-rate", 1000, "feed: events/s spread round-robin over the pull endpoints")
	fs.Float64Var(&f.PushRate, "push-rate", 10000, "feed: events/s spread round-robin over the push endpoints (-endpoints) on the same partitions (0: none)")
	fs.DurationVar(&f.FeedWait, "feed-wait", 25*time.Second, "feed: how long each read waits for new events (up to "+feed.MaxWait.String()+")")
	fs.DurationVar(&f.FeedPause, "feed-pause", 0, "feed: a consumer's pause after a page with events, handling it (0: read again at once; with a pause the next read finds events waiting, and its latency is the time to serve a page)")
	fs.IntVar(&f.BatchMaxEvents, "batch-max-events", 100, "batch: max_events of the batch endpoints (1 to 1000)")
	fs.DurationVar(&f.BatchMaxWait, "batch-max-wait", 100*time.Millisecond, "batch: max_wait of the batch endpoints (what a batch that is not full waits once the feed is read; 0 to 60s)")
}

func parseCounts(v string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive count", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// applyScenarioDefaults sets what a scenario needs differently from the
// throughput defaults, unless the flag was given (set).
func (c *config) applyScenarioDefaults(set map[string]bool) error {
	def := func(name string, apply func()) {
		if !set[name] {
			apply()
		}
	}
	if c.CostEndpoints == nil {
		c.CostEndpoints = []int{10, 100, 1000, 10000}
	}
	switch c.Scenario {
	case "throughput":
	case "cost":
		// Laneway's default limit: with the throughput scenario's 16, a burst
		// to 1,000 endpoints opens ~10,000 connections at once, and with the
		// receiver in this process too that exhausts a 20,000-file limit.
		def("max-concurrency", func() { c.MaxConcurrency = 4 })
	case "incident":
		def("endpoints", func() { c.Endpoints = 1800 })
		// A 28 s endpoint under the contract's 5 s timeout would only
		// ever time out; the incident had it answer.
		def("attempt-timeout", func() { c.AttemptTimeout = 30 * time.Second })
	case "backlog":
		def("events", func() { c.Events = 1_000_000 })
		def("entities", func() { c.Entities = 1000 })
	case "drain":
		def("park-after", func() { c.ParkAfter = 5 * time.Second })
		// The hanging phase must outlast parking without the held
		// attempts timing out, so their completion is part of the drain.
		def("attempt-timeout", func() { c.AttemptTimeout = 30 * time.Second })
	case "feed":
		def("endpoints", func() { c.Endpoints = 10 })
		def("duration", func() { c.Duration = 30 * time.Second })
	case "batch":
		def("endpoints", func() { c.Endpoints = 10 })
		def("events", func() { c.Events = 50000 })
		def("data-bytes", func() { c.DataBytes = 1024 })
	default:
		return fmt.Errorf("unknown -scenario %q (throughput, incident, backlog, cost, drain, feed, batch)", c.Scenario)
	}
	if c.States && c.Scenario != "backlog" {
		return fmt.Errorf("-states applies to -scenario backlog only, not %q", c.Scenario)
	}
	return nil
}

func (f scenarioFlags) validate() error {
	switch {
	case f.Duration <= 0 || f.HealthyRate <= 0 || f.SlowRate <= 0 || f.SlowDelay < 0 || f.SlowLimit < 1:
		return errors.New("-duration, -healthy-rate, -slow-rate and -slow-limit must be positive")
	case f.Sample <= 0 || f.Window <= 0 || f.BacklogSettle < 0:
		return errors.New("-sample and -window must be positive")
	case f.CostDeliveries <= 0 || f.DrainLimit < 1 || f.DrainDelay <= 0 || f.DrainBacklog <= 0 || f.DrainEntities <= 0:
		return errors.New("-cost-deliveries, -drain-limit, -drain-delay, -drain-backlog and -drain-entities must be positive")
	case f.FeedConsumers < 1 || f.FeedRate <= 0 || f.PushRate < 0 || f.FeedWait < 0 || f.FeedWait > receiver.MaxFeedWait || f.FeedPause < 0:
		return errors.New("-feed-consumers and -feed-rate must be positive, -push-rate and -feed-pause not negative, -feed-wait from 0 to 30s")
	case f.BatchMaxEvents < 1 || f.BatchMaxEvents > 1000 || f.BatchMaxWait < 0 || f.BatchMaxWait > time.Minute:
		return errors.New("-batch-max-events must be from 1 to 1000, -batch-max-wait from 0 to 60s")
	}
	return nil
}

// report is what a scenario found.
type report interface {
	writeText(w io.Writer)
	failures() []string
}

// scenarioOutput is the -json line of a scenario.
type scenarioOutput struct {
	Scenario string          `json:"scenario"`
	Machine  machine         `json:"machine"`
	Laneway  lanewaySettings `json:"laneway_settings"`
	Result   report          `json:"result"`
	Failures []string        `json:"failures"`
}

// lanewaySettings are the Laneway settings the run changed (0: Laneway's default).
type lanewaySettings struct {
	ParkAfterSeconds      float64 `json:"park_after_s"`
	LaneBuffer            int     `json:"lane_buffer"`
	AttemptTimeoutSeconds float64 `json:"attempt_timeout_s"`
	Partitions            int     `json:"partitions"`
}

func runScenario(ctx context.Context, cfg config, stdout, stderr io.Writer) int {
	run := map[string]func(context.Context, config, io.Writer) (report, error){
		"incident": runIncident, "backlog": runBacklog, "cost": runCost, "drain": runDrain, "feed": runFeed, "batch": runBatch,
	}[cfg.Scenario]
	rep, err := run(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "laneway-bench:", err)
		return 2
	}
	out := scenarioOutput{
		Scenario: cfg.Scenario, Machine: newMachine(cfg), Result: rep, Failures: rep.failures(),
		Laneway: lanewaySettings{
			ParkAfterSeconds: cfg.ParkAfter.Seconds(), LaneBuffer: cfg.LaneBuffer,
			AttemptTimeoutSeconds: cfg.AttemptTimeout.Seconds(), Partitions: cfg.Partitions,
		},
	}
	if out.Failures == nil {
		out.Failures = []string{}
	}
	human := stdout
	if cfg.JSON {
		human = stderr
	}
	out.writeText(human)
	if cfg.JSON {
		b, err := json.Marshal(out)
		if err != nil {
			fmt.Fprintln(stderr, "laneway-bench:", err)
			return 2
		}
		fmt.Fprintf(stdout, "%s\n", b)
	}
	if len(out.Failures) > 0 {
		return 1
	}
	return 0
}

func (o scenarioOutput) writeText(w io.Writer) {
	m, l := o.Machine, o.Laneway
	fmt.Fprintf(w, "\nLaneway %s scenario: %d CPUs (GOMAXPROCS %d), %s, %s\n", o.Scenario, m.CPUs, m.GOMAXPROCS, m.Go, m.Backend)
	fmt.Fprintf(w, "  laneway: park-after %s, lane-buffer %s, attempt timeout %s, %d partitions\n",
		orDefault(l.ParkAfterSeconds, "s", "default 30s"), orDefault(float64(l.LaneBuffer), "", "default"),
		orDefault(l.AttemptTimeoutSeconds, "s", "default 5s"), l.Partitions)
	o.Result.writeText(w)
	writeVerdict(w, o.Failures)
}

func orDefault(v float64, unit, def string) string {
	if v == 0 {
		return def
	}
	return strconv.FormatFloat(v, 'f', -1, 64) + unit
}

func newMachine(cfg config) machine {
	backend := "embedded Kafka (kfake) + in-process Redis"
	if len(cfg.KafkaBrokers) > 0 {
		backend = "Kafka " + strings.Join(cfg.KafkaBrokers, ",")
		if cfg.RedisURL != "" {
			backend += " + Redis " + cfg.RedisURL
		}
	}
	return machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), Backend: backend}
}

// rig is a scenario's running setup: the receiver, Laneway with its
// endpoints, a producer and an admin client for committed offsets.
type rig struct {
	cfg   config
	plan  *plan
	recv  *benchrecv.Receiver
	lw    *laneway
	prod  *kgo.Client
	admCl *kgo.Client
	adm   *kadm.Client
	ids   []string // endpoint ids, by endpoint number
}

// startRig starts everything a scenario needs; limit gives each endpoint's
// max_concurrency. On error, what started is stopped.
func startRig(ctx context.Context, cfg config, p *plan, endpoints int, limit func(n int) int, stderr io.Writer) (_ *rig, err error) {
	r := &rig{cfg: cfg, plan: p}
	defer func() {
		if err != nil {
			r.close(stderr)
		}
	}()
	rc := cfg
	rc.Endpoints = endpoints
	r.recv, err = benchrecv.Start(benchrecv.Config{
		Endpoints: endpoints, Slots: p.slots, Lookup: p.lookup, Delay: cfg.ReceiverDelay,
		SharedListener: cfg.SharedPort, Ports: portsFor(rc), Verify: cfg.Verify,
		// Slow endpoints' attempts end by timeout: one Laneway gave up on
		// is not in flight any more, even before the handler notices.
		CountOpenOnly: slices.Contains([]string{"incident", "drain", "backlog"}, cfg.Scenario),
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(stderr, "starting laneway...")
	if r.lw, err = startLaneway(ctx, cfg, stderr); err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "creating %d endpoints on %d receiver ports...\n", endpoints, r.recv.Ports())
	spec := func(n int) endpointSpec { return endpointSpec{tenant: tenantName(n), maxConcurrency: limit(n)} }
	if r.ids, err = r.lw.createEndpoints(ctx, r.recv, endpoints, spec); err != nil {
		return nil, err
	}
	if r.prod, err = newProducer(r.lw.app.Brokers(), r.lw.app.Topics().Events, cfg.Linger); err != nil {
		return nil, err
	}
	if r.admCl, err = kgo.NewClient(kgo.SeedBrokers(r.lw.app.Brokers()...)); err != nil {
		return nil, err
	}
	r.adm = kadm.NewClient(r.admCl)
	return r, nil
}

// close stops everything. The receiver goes first: that ends the attempts
// a hanging endpoint holds, so Laneway's stop need not wait them out.
func (r *rig) close(stderr io.Writer) {
	if r.prod != nil {
		r.prod.Close()
	}
	if r.admCl != nil {
		r.admCl.Close()
	}
	if r.recv != nil {
		r.recv.Close()
	}
	if r.lw != nil {
		r.lw.stop(time.Minute, stderr)
	}
}

func (r *rig) offsets(ctx context.Context) (offsetSample, error) {
	return sampleOffsets(ctx, r.adm, r.lw.app.DeliveriesGroup(), r.lw.app.Topics().Deliveries)
}

// partitionOf is the deliveries partition of endpoint n: the fan-out keys
// deliveries by endpoint id with Kafka's default (murmur2) partitioner.
func (r *rig) partitionOf(n int) int32 {
	part := kgo.StickyKeyPartitioner(nil).ForTopic(r.lw.app.Topics().Deliveries)
	return int32(part.Partition(&kgo.Record{Key: []byte(r.ids[n])}, r.cfg.Partitions))
}

// receiptsCheck is the correctness part every scenario reports.
func receiptsCheck(st benchrecv.Stats) []string {
	var out []string
	if st.Duplicates > 0 {
		out = append(out, fmt.Sprintf("%d duplicate deliveries", st.Duplicates))
	}
	if st.OrderViolations > 0 {
		out = append(out, fmt.Sprintf("%d per-entity order violations", st.OrderViolations))
	}
	if st.EntityOverlaps > 0 {
		out = append(out, fmt.Sprintf("%d times an entity had two deliveries in flight to one endpoint", st.EntityOverlaps))
	}
	if st.Unmatched > 0 {
		out = append(out, fmt.Sprintf("%d unexpected deliveries", st.Unmatched))
	}
	return out
}
