// Command laneway-bench measures Laneway end to end on this machine and puts
// the figure next to what plain net/http achieves against the same receiver.
//
// In one run it
//
//  1. POSTs small JSON bodies to a local receiver with a keep-alive net/http
//     client: the raw HTTP baseline, in requests/s;
//  2. starts Laneway in-process (embedded Kafka and Redis, or the ones given
//     with -kafka-brokers and -redis-url), creates endpoints through its API,
//     publishes events straight to the events topic with franz-go and waits
//     until every delivery has reached the receiver.
//
// It reports deliveries/s (first publish to last receipt), the publish rate,
// publish-to-receipt latency percentiles, the ratio to the baseline and
// correctness counters (missing, duplicates, per-entity order, in-flight per
// endpoint against its limit). It exits 1 if a correctness check fails and 2
// if the run could not be completed.
//
//	go run ./cmd/laneway-bench -events 50000
//	go run ./cmd/laneway-bench -kafka-brokers 127.0.0.1:39092 -redis-url redis://127.0.0.1:36379/0
//
// Other scenarios (-scenario) measure one concern each; docs/benchmarks.md
// has their commands and figures. -scenario feed serves pull endpoints'
// feeds to long-polling consumers (-feed-consumers, 100) while push
// endpoints on the same deliveries partitions carry -push-rate (10,000
// events/s), and reports the events/s served, the page latency and the
// publish → read latency. -scenario batch delivers the same events (1 KiB
// by default) to -endpoints push endpoints, then to as many batch
// endpoints (-batch-max-events, 100), and compares their deliveries/s,
// receiver requests/s and CPU per event.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/partition"
)

// config is everything the flags set.
type config struct {
	Scenario string

	RawRequests    int
	RawConcurrency int

	Events         int
	Entities       int
	Endpoints      int
	Fanout         int
	MaxConcurrency int
	Partitions     int
	Rate           float64
	DataBytes      int
	Linger         time.Duration
	Warmup         bool

	ReceiverDelay time.Duration
	Verify        bool
	SharedPort    bool
	Ports         int

	// Laneway settings the scenarios change; 0 keeps Laneway's default
	// (or the scenario's, which its report states).
	ParkAfter      time.Duration
	LaneBuffer     int
	AttemptTimeout time.Duration
	LaneBytes      int64
	MaxInFlight    int

	scenarioFlags

	KafkaBrokers []string
	BrokerPID    int
	LanewayBin   string
	RedisURL     string
	KeepTopics   bool

	LogLevel   slog.Level
	Timeout    time.Duration
	Progress   time.Duration
	CPUProfile string
	MemProfile string
	JSON       bool
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "laneway-bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	var brokers string
	fs := flag.NewFlagSet("laneway-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Scenario, "scenario", "throughput", "throughput, incident, backlog, cost, drain, feed or batch (see the package doc)")
	fs.IntVar(&c.RawRequests, "raw-requests", 50000, "requests in the raw HTTP baseline (0 skips it)")
	fs.IntVar(&c.RawConcurrency, "raw-concurrency", 64, "concurrent workers in the raw HTTP baseline")
	fs.IntVar(&c.Events, "events", 100000, "events to publish in the measured run")
	fs.IntVar(&c.Entities, "entities", 10000, "distinct entities (record keys) the events are spread over")
	fs.IntVar(&c.Endpoints, "endpoints", 50, "endpoints to create")
	fs.IntVar(&c.Fanout, "fanout", 1, "endpoints per tenant, so deliveries = events × fanout (must divide -endpoints)")
	fs.IntVar(&c.MaxConcurrency, "max-concurrency", 16, "max_concurrency of every endpoint")
	fs.IntVar(&c.Partitions, "partitions", 8, "partitions of the events and deliveries topics")
	fs.Float64Var(&c.Rate, "rate", 0, "publish at most this many events/s (0: as fast as Kafka accepts)")
	fs.IntVar(&c.DataBytes, "data-bytes", 48, "size of each event's data; the default makes a ~200-byte delivery body")
	fs.DurationVar(&c.Linger, "linger", 2*time.Millisecond, "producer linger")
	fs.BoolVar(&c.Warmup, "warmup", true, "deliver one event per tenant before the clock starts, so group joins are not measured")
	fs.DurationVar(&c.ReceiverDelay, "receiver-delay", 0, "how long the receiver waits before answering 204 (the baseline waits too: with a delay the ratio compares concurrency, not CPU cost)")
	fs.BoolVar(&c.Verify, "verify", false, "verify every signature with the Standard Webhooks library (costs receiver CPU)")
	fs.BoolVar(&c.SharedPort, "shared-port", false, "serve all endpoints on one port (one host: they share the sender's keep-alive pool)")
	fs.IntVar(&c.Ports, "ports", 0, "spread the endpoints over this many ports (0: one per endpoint unless the open-file limit is too low)")
	fs.DurationVar(&c.ParkAfter, "park-after", 0, "Laneway's park-after (0: its default, "+partition.DefaultParkAfter.String()+"; the drain scenario uses 5s)")
	fs.IntVar(&c.LaneBuffer, "lane-buffer", 0, "Laneway's lane buffer (0: its default)")
	fs.Int64Var(&c.LaneBytes, "lane-bytes", 0, fmt.Sprintf("Laneway's lane byte budget (0: its default, %d MiB)", partition.DefaultLaneBytes>>20))
	fs.IntVar(&c.MaxInFlight, "max-inflight", 0, "Laneway's cap on attempts in flight (0: its default, half the fd limit)")
	fs.DurationVar(&c.AttemptTimeout, "attempt-timeout", 0, "Laneway's attempt timeout (0: "+deliver.DefaultTimeout.String()+", the delivery contract; incident and drain use 30s)")
	c.scenarioFlags.register(fs)
	fs.StringVar(&brokers, "kafka-brokers", "", "comma-separated Kafka brokers; empty runs the embedded Kafka")
	fs.StringVar(&c.RedisURL, "redis-url", "", "Redis URL; empty runs an in-process Redis")
	fs.BoolVar(&c.KeepTopics, "keep-topics", false, "with -kafka-brokers, keep this run's topics and groups instead of deleting them")
	c.LogLevel = slog.LevelWarn
	fs.TextVar(&c.LogLevel, "log-level", &c.LogLevel, "Laneway's log level (info adds a line per failed attempt)")
	fs.DurationVar(&c.Timeout, "timeout", 10*time.Minute, "deadline for the whole run")
	fs.DurationVar(&c.Progress, "progress", 5*time.Second, "progress line interval on stderr (0: none)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the measured phase to this file")
	fs.StringVar(&c.LanewayBin, "laneway-bin", "", "run Laneway as `<path> serve` in a child process (needs -kafka-brokers and -redis-url): its CPU and allocations are then reported apart from the harness's")
	fs.IntVar(&c.BrokerPID, "broker-pid", 0, "pid of the Kafka broker's JVM, to report its CPU beside Laneway's (scripts/testenv.sh writes it to <state dir>/kafka.pid)")
	fs.StringVar(&c.MemProfile, "memprofile", "", "write an allocation profile (whole run, sampled) to this file after the measured phase")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON line on stdout (the human report goes to stderr)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if brokers != "" {
		c.KafkaBrokers = strings.Split(brokers, ",")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := c.applyScenarioDefaults(set); err != nil {
		return c, err
	}
	return c, c.validate()
}

func (c config) validate() error {
	switch {
	case c.Events <= 0 || c.Entities <= 0 || c.Endpoints <= 0 || c.Partitions <= 0:
		return errors.New("-events, -entities, -endpoints and -partitions must be positive")
	case c.Fanout <= 0 || c.Endpoints%c.Fanout != 0:
		return fmt.Errorf("-fanout %d must be positive and divide -endpoints %d", c.Fanout, c.Endpoints)
	case c.MaxConcurrency < 1 || c.MaxConcurrency > 1000:
		return errors.New("-max-concurrency must be between 1 and 1000")
	case c.RawRequests < 0 || c.RawConcurrency <= 0:
		return errors.New("-raw-requests must not be negative and -raw-concurrency must be positive")
	case c.Rate < 0 || c.DataBytes < 0 || c.ReceiverDelay < 0 || c.Timeout <= 0:
		return errors.New("-rate, -data-bytes and -receiver-delay must not be negative, -timeout must be positive")
	case c.Ports < 0 || c.ParkAfter < 0 || c.LaneBuffer < 0 || c.AttemptTimeout < 0:
		return errors.New("-ports, -park-after, -lane-buffer and -attempt-timeout must not be negative")
	}
	return c.scenarioFlags.validate()
}

// run does the benchmark and writes the report; it returns the exit code.
func run(ctx context.Context, cfg config, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	// Progress samplers write from their own goroutines.
	stdout, stderr = &lockedWriter{w: stdout}, &lockedWriter{w: stderr}
	if cfg.Scenario != "throughput" {
		return runScenario(ctx, cfg, stdout, stderr)
	}
	res, err := bench(ctx, cfg, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "laneway-bench:", err)
		return 2
	}
	human := stdout
	if cfg.JSON {
		human = stderr
	}
	res.writeText(human)
	if cfg.JSON {
		if err := res.writeJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "laneway-bench:", err)
			return 2
		}
	}
	if len(res.Failures) > 0 {
		return 1
	}
	return 0
}

// lockedWriter serialises writes from the run and its sampler goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
