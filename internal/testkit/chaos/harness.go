package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/secretbox"
	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

// endpointSpec is one endpoint of the receiver fleet.
type endpointSpec struct {
	Name           string
	Tenant         string
	EventTypes     []string
	MaxConcurrency int
	// Slow answers after a delay that gives the endpoint slowCapacity
	// times the capacity its share of the load needs: it keeps up in steady
	// state, barely, and falls behind and is parked whenever a fault stalls
	// it (or a burst comes).
	Slow bool
	// Delay is how long a healthy answer waits (when not Slow).
	Delay time.Duration
}

// fleetSpec is the receiver fleet every scenario runs with. Entities of
// tenant t0 go to fast-a, fast-b (state events only) and flappy; those of
// t1 to fast-c and slow.
var fleetSpec = []endpointSpec{
	{Name: "fast-a", Tenant: "t0", MaxConcurrency: 8},
	{Name: "fast-b", Tenant: "t0", EventTypes: []string{TypeState}, MaxConcurrency: 4},
	{Name: "fast-c", Tenant: "t1", MaxConcurrency: 4},
	{Name: "slow", Tenant: "t1", MaxConcurrency: 2, Slow: true},
	{Name: "flappy", Tenant: "t0", MaxConcurrency: 4},
}

// slowCapacity is the slow endpoint's capacity over its share of the load.
const slowCapacity = 1.1

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

// fleet is the scenario's receiver fleet.
func (h *Harness) fleet() []endpointSpec {
	if h.sc.Fleet != nil {
		return h.sc.Fleet
	}
	return fleetSpec
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

type runEndpoint struct {
	spec endpointSpec
	id   string
	recv *recvEndpoint
}

func (h *Harness) endpoint(name string) *recvEndpoint { return h.runEndpoint(name).recv }

func (h *Harness) runEndpoint(name string) *runEndpoint {
	for _, ep := range h.eps {
		if ep.spec.Name == name {
			return ep
		}
	}
	panic("no endpoint " + name)
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
	if sleepCtx(ctx, cfg.Warmup) {
		injectErr = sc.Inject(ctx, h)
		if injectErr == nil {
			sleepCtx(ctx, cfg.Tail)
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

// CheckedFiles is the checker's input as read back and its report.
type CheckedFiles struct {
	Input  ordercheck.Input
	Report ordercheck.Report
}

// CheckFiles runs the order checker on a scenario directory's accepted log,
// endpoints file and receipt log, and on the dead-letter topic, exactly as
// cmd/laneway-checkorder does, and writes check.json.
func CheckFiles(ctx context.Context, dir string, brokers []string, deadTopic string) (CheckedFiles, error) {
	var in ordercheck.Input
	var err error
	if in.Accepted, err = ordercheck.ReadFile[ordercheck.Accepted](filepath.Join(dir, "accepted.ndjson")); err != nil {
		return CheckedFiles{}, err
	}
	if in.Endpoints, err = ordercheck.ReadEndpoints(filepath.Join(dir, "endpoints.json")); err != nil {
		return CheckedFiles{}, err
	}
	if in.Receipts, err = ordercheck.ReadFile[ordercheck.Receipt](filepath.Join(dir, "receipts.ndjson")); err != nil {
		return CheckedFiles{}, err
	}
	if _, statErr := os.Stat(filepath.Join(dir, "requests.ndjson")); statErr == nil {
		if in.Requests, err = ordercheck.ReadFile[ordercheck.Receipt](filepath.Join(dir, "requests.ndjson")); err != nil {
			return CheckedFiles{}, err
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return CheckedFiles{}, err
	}
	defer cl.Close()
	readCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if in.Dead, err = ordercheck.ReadDeadTopic(readCtx, cl, deadTopic); err != nil {
		return CheckedFiles{}, err
	}
	rep := ordercheck.Check(in)
	return CheckedFiles{Input: in, Report: rep}, writeJSON(filepath.Join(dir, "check.json"), rep)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func namesToIDs(ids map[string]string, names []string) []string {
	var out []string
	for _, n := range names {
		if id, ok := ids[n]; ok {
			out = append(out, id)
		}
	}
	return out
}

// lanewayArgs are the flags every instance of the run gets.
func (h *Harness) lanewayArgs(id, addr string) []string {
	args := []string{"serve",
		"--kafka-brokers", strings.Join(h.env.Brokers, ","), "--redis-url", h.env.RedisURL,
		"--http-addr", addr, "--instance-id", id,
		"--topic-prefix", h.name, "--group-prefix", h.name, "--partitions", fmt.Sprint(h.cfg.Partitions),
		"--allow-targets", "127.0.0.0/8", "--secrets-key-file", h.keyFile(),
		"--session-timeout", h.cfg.SessionTimeout.String(), "--commit-interval", "200ms",
		// Parking is exercised: the slow endpoint falls behind and parks.
		"--park-after", "2s",
		// Retries, dead letters and the breaker within a scenario's time.
		"--retry-base", "200ms", "--retry-max", "2s", "--max-attempts", "8", "--attempt-timeout", "2s",
		"--breaker-pause", "2s", "--breaker-max-pause", "8s",
		"--log-level", h.cfg.LogLevel, "--log-format", "json",
	}
	args = append(args, h.cfg.LanewayArgs...)
	return append(args, h.sc.Flags...)
}

// keyFile is the run's secrets key file, shared by its instances.
func (h *Harness) keyFile() string { return filepath.Join(h.dir, "secrets.key") }

func (h *Harness) setup(ctx context.Context, n int) error {
	var err error
	if _, _, err = secretbox.EnsureKeyFile(h.keyFile()); err != nil {
		return err
	}
	if h.recv, err = NewReceivers(filepath.Join(h.dir, "receipts.ndjson"), filepath.Join(h.dir, "requests.ndjson")); err != nil {
		return err
	}
	for range n {
		if _, err := h.newInstance(); err != nil {
			return err
		}
	}
	// The first instance creates the topics; the others start alongside.
	if err := h.instances[0].Start(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 1; i < n; i++ {
		wg.Go(func() { errs[i] = h.instances[i].Start(ctx) })
	}
	wg.Wait()
	if err := joinErrs(errs...); err != nil {
		return err
	}
	if h.admin, err = kgo.NewClient(kgo.SeedBrokers(h.env.Brokers...)); err != nil {
		return err
	}
	if err := h.createEndpoints(ctx); err != nil {
		return err
	}
	if err := h.waitGroups(ctx, n); err != nil {
		return err
	}
	h.pub, err = NewPublisher(h.env.Brokers, h.name+".events", h.name, h.cfg.Entities, h.tenants(), h.cfg.Seed,
		filepath.Join(h.dir, "accepted.ndjson"))
	if err == nil && h.sc.StatesOnly {
		h.pub.StatesOnly()
	}
	return err
}

// tenants is how many tenants the load is spread over (t0, t1, ...).
func (h *Harness) tenants() int {
	if h.sc.Tenants > 0 {
		return h.sc.Tenants
	}
	return 2
}

// newInstance adds an instance, not started yet, with the next index.
func (h *Harness) newInstance() (*Instance, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	i := len(h.instances)
	id := fmt.Sprintf("%s-%d", h.name, i)
	in := &Instance{ID: id, Addr: addr, bin: h.cfg.Bin, args: h.lanewayArgs(id, addr),
		logPath: filepath.Join(h.dir, fmt.Sprintf("laneway-%d.log", i))}
	h.instances = append(h.instances, in)
	return in, nil
}

// addInstance starts one more instance (it joins the groups: a rebalance)
// and waits until it is ready.
func (h *Harness) addInstance(ctx context.Context) (*Instance, error) {
	in, err := h.newInstance()
	if err != nil {
		return nil, err
	}
	return in, in.Start(ctx)
}

// createEndpoints creates the fleet through the first instance's API,
// writes endpoints.json and waits until every instance knows every endpoint
// (an instance that does not would fan events out to fewer endpoints).
func (h *Harness) createEndpoints(ctx context.Context) error {
	client := &http.Client{Timeout: 30 * time.Second}
	var subs []ordercheck.Endpoint
	for _, spec := range h.fleet() {
		delay := spec.Delay
		if spec.Slow {
			// The endpoint's share of the load is a tenant's.
			delay = time.Duration(float64(spec.MaxConcurrency) / (slowCapacity * h.cfg.Rate / float64(h.tenants())) * float64(time.Second))
		}
		rep, url, err := h.recv.Add(spec.Name, delay)
		if err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]any{"tenant": spec.Tenant, "url": url, "event_types": spec.EventTypes,
			"max_concurrency": spec.MaxConcurrency})
		var created struct{ ID, Secret string }
		if err := apiCall(ctx, client, http.MethodPost, "http://"+h.instances[0].Addr+"/v1/endpoints", body, http.StatusCreated, &created); err != nil {
			return fmt.Errorf("create endpoint %s: %w", spec.Name, err)
		}
		if err := rep.SetEndpoint(created.ID, created.Secret); err != nil {
			return err
		}
		h.eps = append(h.eps, &runEndpoint{spec: spec, id: created.ID, recv: rep})
		subs = append(subs, ordercheck.Endpoint{ID: created.ID, Name: spec.Name, Tenant: spec.Tenant, EventTypes: spec.EventTypes})
	}
	if err := writeJSON(filepath.Join(h.dir, "endpoints.json"), subs); err != nil {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for _, in := range h.instanceList() {
		for _, ep := range h.eps {
			for {
				err := apiCall(ctx, client, http.MethodGet, "http://"+in.Addr+"/v1/endpoints/"+ep.id, nil, http.StatusOK, nil)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("instance %s does not know endpoint %s: %w", in.ID, ep.id, err)
				}
				if !sleepCtx(ctx, 50*time.Millisecond) {
					return ctx.Err()
				}
			}
		}
	}
	return nil
}

func apiCall(ctx context.Context, client *http.Client, method, url string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(b))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// waitGroups waits until the fan-out and delivery groups are stable with n
// members that each own partitions.
func (h *Harness) waitGroups(ctx context.Context, n int) error {
	return WaitGroups(ctx, kadm.NewClient(h.admin), h.name, n)
}

// WaitGroups waits until the fan-out and delivery groups of the run whose
// group prefix is prefix are stable with n members that each own
// partitions: a rebalance is over and every instance works.
func WaitGroups(ctx context.Context, adm *kadm.Client, prefix string, n int) error {
	g := topics.GroupsFor(prefix)
	groups := []string{g.Fanout, g.Deliveries}
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for {
		reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		described, err := adm.DescribeGroups(reqCtx, groups...)
		cancel()
		ok := err == nil
		if err != nil {
			last = err.Error()
		}
		for _, g := range groups {
			if !ok {
				break
			}
			d := described[g]
			owning := 0
			for _, m := range d.Members {
				if c, isConsumer := m.Assigned.AsConsumer(); isConsumer {
					for _, tp := range c.Topics {
						if len(tp.Partitions) > 0 {
							owning++
							break
						}
					}
				}
			}
			if d.State != "Stable" || len(d.Members) != n || owning != n {
				ok = false
				last = fmt.Sprintf("group %s: state %s, %d members, %d owning partitions", g, d.State, len(d.Members), owning)
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("groups not stable with %d members: %s", n, last)
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// monitor restarts instances that exit by themselves, as a supervisor
// would, and records them: an exit nobody asked for is worth reporting.
func (h *Harness) monitor(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, in := range h.instanceList() {
			err := in.Exited()
			if err == nil {
				continue
			}
			h.mu.Lock()
			h.selfExits = append(h.selfExits, fmt.Sprintf("%s: %v", time.Now().UTC().Format(time.RFC3339Nano), err))
			h.mu.Unlock()
			h.cfg.logf("%s: %v; restarting it", h.sc.Name, err)
			if err := in.Start(ctx); err != nil {
				h.cfg.logf("%s: restart failed: %v", h.sc.Name, err)
			}
		}
	}
}

// drain waits until every accepted event is handled for every subscribed
// endpoint (the checker finds nothing lost on what the harness holds in
// memory), or the drain deadline, or until nothing outstanding has been
// handled for Config.StallTimeout (a stuck pipeline: waiting longer only
// costs time).
func (h *Harness) drain(ctx context.Context) bool {
	deadline := time.Now().Add(h.cfg.DrainTimeout)
	accepted := h.pub.Accepted()
	var subs []ordercheck.Endpoint
	for _, ep := range h.eps {
		subs = append(subs, ordercheck.Endpoint{ID: ep.id, Name: ep.spec.Name, Tenant: ep.spec.Tenant, EventTypes: ep.spec.EventTypes})
	}
	lastLog, progressAt, outstanding := time.Now(), time.Now(), -1
	poll := time.NewTicker(time.Second)
	defer poll.Stop()
	for {
		readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		dead, err := ordercheck.ReadDeadTopic(readCtx, h.admin, h.name+".dead")
		cancel()
		if err == nil {
			rep := ordercheck.Check(ordercheck.Input{Accepted: accepted, Endpoints: subs, Receipts: h.recv.Receipts(), Dead: dead})
			if rep.Lost == 0 {
				return true
			}
			if outstanding < 0 || rep.Lost < outstanding {
				progressAt = time.Now()
			}
			outstanding = rep.Lost
			if time.Since(lastLog) > 10*time.Second {
				h.cfg.logf("%s: draining: %d of %d deliveries outstanding", h.sc.Name, rep.Lost, rep.Expected)
				lastLog = time.Now()
			}
			if h.cfg.StallTimeout > 0 && time.Since(progressAt) > h.cfg.StallTimeout {
				h.cfg.logf("%s: draining: no progress for %v with %d deliveries outstanding; giving up", h.sc.Name,
					h.cfg.StallTimeout, rep.Lost)
				return false
			}
		} else {
			h.cfg.logf("%s: draining: reading dead letters: %v", h.sc.Name, err)
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-poll.C:
		}
	}
}

func (h *Harness) stopInstances() error {
	var wg sync.WaitGroup
	instances := h.instanceList()
	errs := make([]error, len(instances))
	for i, in := range instances {
		wg.Go(func() { errs[i] = in.Stop(time.Minute) })
	}
	wg.Wait()
	if h.recv != nil {
		h.recvStats = h.recv.Stats()
	}
	return joinErrs(errs...)
}

// cleanup stops whatever is still running (after a harness error).
func (h *Harness) cleanup() {
	for _, in := range h.instanceList() {
		_ = in.Kill()
	}
	if h.recv != nil {
		_ = h.recv.Close()
	}
	if h.pub != nil {
		_ = h.pub.Close()
	}
	if h.admin != nil {
		h.admin.Close()
	}
}
