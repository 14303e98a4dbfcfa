package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/laneway/laneway/internal/plumbing/timing"
)

// Scenario is one kind of fault, injected while the load runs.
type Scenario struct {
	Name string
	// Doc says what the scenario does, for reports.
	Doc string
	// Instances is how many laneway processes it runs.
	Instances func(c Config) int
	// Flags are laneway flags it adds to the common ones.
	Flags []string
	// Inject injects the faults, recording each with Harness.Fault. It runs
	// after the warm-up; the load goes on for Config.Tail after it returns
	// (unless Inject ended it with Harness.stopLoad).
	Inject func(ctx context.Context, h *Harness) error

	// Fleet is the receiver fleet (nil: fleetSpec, the common one).
	Fleet []endpointSpec
	// Tenants the load is spread over (0: 2); StatesOnly publishes state
	// events only; Entities, when set, replaces Config.Entities; Tail, when
	// set, replaces Config.Tail.
	Tenants    int
	StatesOnly bool
	Entities   int
	Tail       time.Duration

	// OptIn keeps the scenario out of the default set (Scenarios, so CI
	// and `laneway-chaos` without -scenarios): it runs only when named.
	// Scenarios written to expose engine bugs start opt-in and join the
	// default set (OptIn false) once they pass.
	OptIn bool
}

// AllScenarios are every scenario, in the order a full run takes them (the
// ones that stop the broker or Redis last, so a service that fails to come
// back spoils nothing else), opt-in ones included.
func AllScenarios() []Scenario {
	return []Scenario{kill9, freeze, rolling, flap, pauseFailResume, rebalanceLongAttempt, killWhileParkedDrains, redisFaults, broker}
}

// Scenarios are the default set, run by CI: every scenario that is not
// opt-in.
func Scenarios() []Scenario {
	return slices.DeleteFunc(AllScenarios(), func(s Scenario) bool { return s.OptIn })
}

// ScenarioByName finds a scenario, opt-in ones included.
func ScenarioByName(name string) (Scenario, bool) {
	all := AllScenarios()
	i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == name })
	if i < 0 {
		return Scenario{}, false
	}
	return all[i], true
}

// Names of every scenario, opt-in ones marked "(opt-in)" when marked.
func Names(marked bool) []string {
	var out []string
	for _, s := range AllScenarios() {
		if marked && s.OptIn {
			out = append(out, s.Name+" (opt-in)")
		} else {
			out = append(out, s.Name)
		}
	}
	return out
}

// SelectScenarios picks the scenarios a comma-separated list names ("" or
// "all": the default set; "every": every scenario, opt-in ones included).
func SelectScenarios(list string) ([]Scenario, error) {
	switch strings.TrimSpace(list) {
	case "", "all":
		return Scenarios(), nil
	case "every":
		return AllScenarios(), nil
	}
	var out []Scenario
	for _, name := range strings.Split(list, ",") {
		sc, ok := ScenarioByName(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", strings.TrimSpace(name), strings.Join(Names(true), ", "))
		}
		out = append(out, sc)
	}
	return out, nil
}

func fixed(n int) func(Config) int { return func(Config) int { return n } }

func configured(c Config) int { return max(c.Instances, 2) }

var kill9 = Scenario{
	Name:      "kill9",
	Doc:       "kill -9 one instance mid-load, ten times, alternating instances; each is restarted at once",
	Instances: configured,
	Inject: func(ctx context.Context, h *Harness) error {
		for i := range h.cfg.Kills {
			if i > 0 && !timing.Sleep(ctx, h.cfg.KillEvery) {
				return ctx.Err()
			}
			in := h.instances[i%len(h.instances)]
			f := h.Fault("kill -9", in.ID, fastEndpoints)
			if err := h.bounce(ctx, f, in.Kill, 0, in.Start); err != nil {
				return err
			}
		}
		return nil
	},
}

var freeze = Scenario{
	Name: "freeze",
	Doc: "SIGSTOP one instance for twice its session timeout, then SIGCONT, four times, alternating instances: " +
		"the woken instance, which still believes it owns its partitions, must start nothing beside the next owner",
	Instances: configured,
	Fleet:     freezeFleet,
	Inject: func(ctx context.Context, h *Harness) error {
		for i := range h.cfg.Freezes {
			if i > 0 && !timing.Sleep(ctx, h.cfg.FreezeEvery) {
				return ctx.Err()
			}
			in := h.instances[i%len(h.instances)]
			f := h.Fault("SIGSTOP past the session timeout + SIGCONT", in.ID, fastEndpoints)
			thaw := func(context.Context) error { return in.Thaw() }
			if err := h.bounce(ctx, f, in.Freeze, h.cfg.FreezeFor, thaw); err != nil {
				_ = in.Thaw() // never leave it stopped
				return err
			}
		}
		return nil
	},
}

// freezeFleet adds receivers that take their time to the common fleet: an
// attempt of the woken instance then has time to meet one of the next
// owner's, and lanes queue enough for states to coalesce differently in
// the two owners.
var freezeFleet = append(slices.Clone(fleetSpec),
	endpointSpec{Name: "medium-a", Tenant: "t0", MaxConcurrency: 8, Delay: 100 * time.Millisecond},
	endpointSpec{Name: "medium-b", Tenant: "t1", EventTypes: []string{TypeState}, MaxConcurrency: 4, Delay: 150 * time.Millisecond},
)

var rolling = Scenario{
	Name:      "rolling",
	Doc:       "rolling restart of three instances: SIGTERM, wait for the exit, start, wait until the groups are stable again",
	Instances: func(c Config) int { return max(c.Instances, 3) },
	Inject: func(ctx context.Context, h *Harness) error {
		for i, in := range h.instances {
			if i > 0 && !timing.Sleep(ctx, h.cfg.RollGap) {
				return ctx.Err()
			}
			f := h.Fault("SIGTERM + restart", in.ID, fastEndpoints)
			stop := func() error { return in.Stop(time.Minute) }
			start := func(ctx context.Context) error {
				if err := in.Start(ctx); err != nil {
					return err
				}
				return h.waitGroups(ctx, len(h.instances))
			}
			if err := h.bounce(ctx, f, stop, 0, start); err != nil {
				return err
			}
		}
		return nil
	},
}

var broker = Scenario{
	Name:      "broker",
	Doc:       "the Kafka broker stopped (SIGTERM) and restarted on its port and data; later killed (SIGKILL) and restarted",
	Instances: configured,
	Inject: func(ctx context.Context, h *Harness) error {
		for i, kill := range []bool{false, true} {
			if i > 0 && !timing.Sleep(ctx, h.cfg.Gap) {
				return ctx.Err()
			}
			kind := "broker SIGTERM"
			if kill {
				kind = "broker SIGKILL"
			}
			f := h.Fault(kind, "kafka", fastEndpoints)
			stop := func() error { return h.env.KafkaStop(ctx, kill) }
			if err := h.bounce(ctx, f, stop, h.cfg.BrokerDown, h.env.KafkaStart); err != nil {
				return err
			}
		}
		return nil
	},
}

var redisFaults = Scenario{
	Name: "redis",
	Doc: "Redis FLUSHALL; separately, Redis killed and restarted empty; meanwhile the flappy receiver fails " +
		"in bursts, so that breaker state is in Redis when it goes",
	Instances: configured,
	Inject: func(ctx context.Context, h *Harness) error {
		stop := h.flapInBackground(ctx, Mode500)
		defer stop()
		f := h.Fault("redis FLUSHALL", "redis", fastEndpoints)
		if err := h.env.FlushAll(ctx); err != nil {
			return err
		}
		h.Restored(f)
		if !timing.Sleep(ctx, h.cfg.Gap) {
			return ctx.Err()
		}
		f = h.Fault("redis SIGKILL + restart", "redis", fastEndpoints)
		kill := func() error { return h.env.RedisStop(ctx, true) }
		return h.bounce(ctx, f, kill, h.cfg.RedisDown, h.env.RedisStart)
	},
}

var flap = Scenario{
	Name: "flap",
	Doc: "the flappy receiver alternates between healthy and failing (500, 503 with Retry-After, hang past the " +
		"attempt timeout, connection reset); three attempts allowed and the breaker kept out of the way (the redis " +
		"scenario has it), so deliveries that fail three times are dead-lettered",
	Instances: configured,
	Flags:     []string{"--max-attempts", "3", "--breaker-threshold", "100000"},
	Inject: func(ctx context.Context, h *Harness) error {
		modes := []Mode{Mode500, Mode503, ModeHang, ModeReset}
		ep := h.endpoint("flappy")
		for i := range h.cfg.FlapCycles {
			mode := modes[i%len(modes)]
			f := h.Fault("receiver "+mode.String(), "flappy", []string{"flappy"})
			ep.SetMode(mode)
			if !timing.Sleep(ctx, h.cfg.FlapFailing) {
				return ctx.Err()
			}
			ep.SetMode(ModeOK)
			h.Restored(f)
			if !timing.Sleep(ctx, h.cfg.FlapHealthy) {
				return ctx.Err()
			}
		}
		return nil
	},
}

// flapInBackground makes the flappy receiver fail with mode and recover in
// turns until the returned stop is called.
func (h *Harness) flapInBackground(ctx context.Context, mode Mode) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	ep := h.endpoint("flappy")
	wg.Go(func() {
		defer ep.SetMode(ModeOK)
		for {
			ep.SetMode(mode)
			if !timing.Sleep(ctx, h.cfg.FlapFailing) {
				return
			}
			ep.SetMode(ModeOK)
			if !timing.Sleep(ctx, h.cfg.FlapHealthy) {
				return
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// Fault is one injected fault.
type Fault struct {
	Kind   string    `json:"kind"`
	Target string    `json:"target"`
	At     time.Time `json:"at"`
	// Restored is when the process or service was back (the restarted
	// process ready, the broker answering); At for an instant fault.
	Restored time.Time `json:"restored"`
	// Measure names the endpoints whose deliveries measure the recovery.
	Measure []string `json:"measure"`
	// Recovery is from At to the last moment before the next fault at which
	// an event was overdue (not at a Measure endpoint Config.LateAfter after
	// Kafka acknowledged it): the time until deliveries were back on time.
	// 0: nothing was late. See the function Recovery.
	Recovery time.Duration `json:"recovery_ns"`
	// Late counts the overdue (event, endpoint) pairs Recovery covers.
	Late int `json:"late"`
	// Recovered is false when some pair was still overdue when the run
	// ended: deliveries never got back on time after this fault.
	Recovered bool `json:"recovered"`
}

// Outage is how long the faulty process or service was away.
func (f Fault) Outage() time.Duration { return max(0, f.Restored.Sub(f.At)) }

var fastEndpoints = []string{"fast-a", "fast-b", "fast-c"}

// bounce is a restart fault's course: stop takes the process or service
// down, it stays down for down, start brings it back (and waits until it
// serves), and fault f is over.
func (h *Harness) bounce(ctx context.Context, f int, stop func() error, down time.Duration, start func(context.Context) error) error {
	if err := stop(); err != nil {
		return err
	}
	if down > 0 && !timing.Sleep(ctx, down) {
		return ctx.Err()
	}
	if err := start(ctx); err != nil {
		return err
	}
	h.Restored(f)
	return nil
}

// Fault records a fault that starts now.
func (h *Harness) Fault(kind, target string, measure []string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	h.faults = append(h.faults, Fault{Kind: kind, Target: target, At: now, Restored: now, Measure: measure})
	h.cfg.logf("%s: fault %d: %s %s", h.sc.Name, len(h.faults), kind, target)
	return len(h.faults) - 1
}

// Restored records that fault i is over.
func (h *Harness) Restored(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults[i].Restored = time.Now()
	h.cfg.logf("%s: fault %d over after %v", h.sc.Name, i+1, h.faults[i].Outage().Round(time.Millisecond))
}

func randomSuffix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// joinErrs joins the non-nil errors.
func joinErrs(errs ...error) error { return errors.Join(errs...) }

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(s))
}
