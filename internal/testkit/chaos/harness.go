package chaos

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

// Harness is one scenario's run: its laneway processes, receivers,
// publisher and the faults injected so far.
type Harness struct {
	cfg  Config
	sc   Scenario
	env  *Env
	dir  string
	name string // topic and group prefix of this run

	instances []*Instance // guarded by mu once the load runs (addInstance appends)
	recv      *Receivers
	eps       []*runEndpoint
	pub       *Publisher
	admin     *kgo.Client

	recvStats ReceiverStats // taken once every instance has stopped

	stopPub  chan struct{} // closed to end the load (stopLoad)
	stopOnce sync.Once

	mu        sync.Mutex
	faults    []Fault
	selfExits []string
}

// instanceList is a copy of the instances (a scenario may add some while
// the monitor runs).
func (h *Harness) instanceList() []*Instance {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*Instance(nil), h.instances...)
}

// stopLoad ends the publishing now instead of after the tail: a scenario
// that wants its entities' last revisions to be those of the fault calls it.
func (h *Harness) stopLoad() {
	h.stopOnce.Do(func() {
		close(h.stopPub)
		h.cfg.logf("%s: publishing stopped by the scenario", h.sc.Name)
	})
}

// Result is what one scenario run measured.
type Result struct {
	Scenario string   `json:"scenario"`
	Doc      string   `json:"doc"`
	Dir      string   `json:"dir"`
	Brokers  []string `json:"brokers"`
	// Prefix names the run's topics and groups (<prefix>.dead is the
	// dead-letter topic the checker reads).
	Prefix    string  `json:"prefix"`
	Instances int     `json:"instances"`
	Rate      float64 `json:"rate"`
	Published int     `json:"published"`
	// Load is the publishing phase (warm-up, faults, tail).
	Load time.Duration `json:"load_ns"`
	// Drain is from the end of publishing until every accepted event was
	// handled for every endpoint (Drained), or the drain gave up (deadline,
	// or no progress for Config.StallTimeout).
	Drain   time.Duration `json:"drain_ns"`
	Drained bool          `json:"drained"`
	Elapsed time.Duration `json:"elapsed_ns"`

	Check     ordercheck.Report `json:"check"`
	Receivers ReceiverStats     `json:"receivers"`
	Faults    []Fault           `json:"faults"`
	// SelfExits lists laneway processes that exited without being told to
	// (the harness restarts them, as a supervisor would).
	SelfExits []string `json:"self_exits,omitempty"`
	// Latency: how long after Kafka's ack the fast endpoints had each
	// event (or a newer state of its entity); see Latencies.
	Latency LatencyStats `json:"latency"`
	Err     string       `json:"error,omitempty"`
}

// Pass is the scenario's verdict: no harness error, nothing lost, nothing
// out of order, nothing misrouted, every signature valid.
func (r *Result) Pass() bool {
	return r.Err == "" && r.Check.Pass() && r.Receivers.BadSignatures == 0
}

// MaxRecovery is the longest recovery of the run's faults.
func (r *Result) MaxRecovery() time.Duration {
	var m time.Duration
	for _, f := range r.Faults {
		m = max(m, f.Recovery)
	}
	return m
}

// Run runs one scenario against env with cfg and checks it. The error is
// about the harness (a process that would not start); the verdict on
// Laneway is Result.Pass.
func Run(ctx context.Context, env *Env, cfg Config, sc Scenario) (res *Result, err error) {
	start := time.Now()
	h := &Harness{cfg: cfg, sc: sc, env: env, dir: filepath.Join(cfg.WorkDir, sc.Name),
		name: "chaos-" + sanitize(sc.Name) + "-" + randomSuffix(), stopPub: make(chan struct{})}
	if sc.Entities > 0 {
		h.cfg.Entities = sc.Entities
	}
	if sc.Tail > 0 {
		h.cfg.Tail = sc.Tail
	}
	cfg = h.cfg
	if err := os.MkdirAll(h.dir, 0o755); err != nil {
		return nil, err
	}
	res = &Result{Scenario: sc.Name, Doc: sc.Doc, Dir: h.dir, Brokers: env.Brokers, Prefix: h.name,
		Instances: sc.Instances(cfg), Rate: cfg.Rate}
	defer func() { res.Elapsed = time.Since(start) }()
	defer h.cleanup()
	if err := h.setup(ctx, res.Instances); err != nil {
		return res, err
	}
	cfg.logf("%s: %d instances ready, %d endpoints; publishing %.0f events/s", sc.Name, len(h.instances), len(h.eps), cfg.Rate)

	// Load: warm-up, faults, tail.
	monitorCtx, stopMonitor := context.WithCancel(ctx)
	monitorDone := make(chan struct{})
	go func() { defer close(monitorDone); h.monitor(monitorCtx) }()
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); h.watch(monitorCtx, time.Second) }()
	pubDone := make(chan error, 1)
	loadStart := time.Now()
	go func() {
		n, err := h.pub.Run(ctx, cfg.Rate, h.stopPub)
		res.Published = n
		pubDone <- err
	}()
	var injectErr error
	if timing.Sleep(ctx, cfg.Warmup) {
		injectErr = sc.Inject(ctx, h)
		if injectErr == nil {
			timing.Sleep(ctx, cfg.Tail)
		}
	}
	h.stopLoad()
	pubErr := <-pubDone
	res.Load = time.Since(loadStart)
	cfg.logf("%s: published %d events in %v (%d acked, %d failed)", sc.Name, res.Published,
		res.Load.Round(time.Millisecond), h.pub.Acked(), h.pub.Failed())

	// Drain, then stop every process so that nothing arrives any more.
	drainStart := time.Now()
	res.Drained = h.drain(ctx)
	res.Drain = time.Since(drainStart)
	stopMonitor()
	<-monitorDone
	<-watchDone
	cfg.logf("%s: drained=%t in %v", sc.Name, res.Drained, res.Drain.Round(time.Millisecond))
	if !res.Drained {
		// Something is stuck: keep every instance's goroutines in its log.
		for _, in := range h.instanceList() {
			if err := in.Dump(); err != nil {
				cfg.logf("%s: dumping %s: %v", sc.Name, in.ID, err)
			}
		}
		cfg.logf("%s: not drained: goroutine dumps (SIGQUIT) are in the laneway logs", sc.Name)
	}
	stopErr := h.stopInstances()
	closeErr := joinErrs(h.recv.Close(), h.pub.Close())
	h.recv, h.pub = nil, nil
	res.Err = errString(joinErrs(injectErr, pubErr, stopErr, closeErr))

	// The verdict, from the files and the dead-letter topic only.
	check, err := CheckFiles(ctx, h.dir, env.Brokers, h.name+".dead")
	if err != nil {
		return res, err
	}
	res.Check = check.Report
	res.Receivers = h.recvStats
	h.mu.Lock()
	res.Faults, res.SelfExits = append([]Fault(nil), h.faults...), append([]string(nil), h.selfExits...)
	res.Instances = max(res.Instances, len(h.instances))
	h.mu.Unlock()
	ids := map[string]string{}
	for _, ep := range h.eps {
		ids[ep.spec.Name] = ep.id
	}
	Recovery(res.Faults, check.Input, ids, cfg.LateAfter, drainStart.Add(res.Drain))
	res.Latency = Latencies(check.Input, namesToIDs(ids, fastEndpoints)) // those of them the fleet has
	res.Elapsed = time.Since(start)
	if err := writeJSON(filepath.Join(h.dir, "result.json"), res); err != nil {
		return res, err
	}
	return res, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
