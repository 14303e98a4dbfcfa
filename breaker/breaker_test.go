package breaker

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// opened is a breaker the default Config has just opened at t0.
func opened() Breaker {
	return Breaker{
		State: Open, ConsecutiveFailures: 20, FailingSince: at(-time.Hour),
		OpenedAt: t0, PausedUntil: at(5 * time.Minute), Pause: 5 * time.Minute,
	}
}

func probing(pause time.Duration) Breaker {
	b := opened()
	b.State, b.Pause, b.PausedUntil = Probing, pause, at(pause)
	return b
}

func TestRecord(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		b       Breaker
		success bool
		now     time.Time
		want    Breaker
	}{
		{
			name: "first failure starts the streak", b: Breaker{}, now: t0,
			want: Breaker{State: Closed, ConsecutiveFailures: 1, FailingSince: t0},
		},
		{
			name: "later failure keeps FailingSince",
			b:    Breaker{State: Closed, ConsecutiveFailures: 5, FailingSince: t0}, now: at(time.Hour),
			want: Breaker{State: Closed, ConsecutiveFailures: 6, FailingSince: t0},
		},
		{
			name: "failure below the threshold stays closed",
			b:    Breaker{State: Closed, ConsecutiveFailures: 18, FailingSince: t0}, now: at(time.Minute),
			want: Breaker{State: Closed, ConsecutiveFailures: 19, FailingSince: t0},
		},
		{
			name: "failure reaching the threshold opens for FirstPause",
			b:    Breaker{State: Closed, ConsecutiveFailures: 19, FailingSince: t0}, now: at(time.Minute),
			want: Breaker{
				State: Open, ConsecutiveFailures: 20, FailingSince: t0,
				OpenedAt: at(time.Minute), PausedUntil: at(6 * time.Minute), Pause: 5 * time.Minute,
			},
		},
		{
			name: "custom threshold and first pause",
			cfg:  Config{Threshold: 3, FirstPause: time.Minute},
			b:    Breaker{State: Closed, ConsecutiveFailures: 2, FailingSince: t0}, now: t0,
			want: Breaker{
				State: Open, ConsecutiveFailures: 3, FailingSince: t0,
				OpenedAt: t0, PausedUntil: at(time.Minute), Pause: time.Minute,
			},
		},
		{
			name: "threshold 1 opens on the first failure", cfg: Config{Threshold: 1},
			b: Breaker{}, now: t0,
			want: Breaker{
				State: Open, ConsecutiveFailures: 1, FailingSince: t0,
				OpenedAt: t0, PausedUntil: at(5 * time.Minute), Pause: 5 * time.Minute,
			},
		},
		{
			name: "failure while open is counted but does not extend the pause",
			b:    opened(), now: at(time.Second),
			want: func() Breaker { b := opened(); b.ConsecutiveFailures++; return b }(),
		},
		{
			name: "failure while open after the pause, before any probe, is no probe",
			b:    opened(), now: at(time.Hour),
			want: func() Breaker { b := opened(); b.ConsecutiveFailures++; return b }(),
		},
		{
			name: "failed probe round re-opens with the pause doubled, OpenedAt kept",
			b:    probing(5 * time.Minute), now: at(6 * time.Minute),
			want: Breaker{
				State: Open, ConsecutiveFailures: 21, FailingSince: at(-time.Hour),
				OpenedAt: t0, PausedUntil: at(16 * time.Minute), Pause: 10 * time.Minute,
			},
		},
		{
			name: "doubling is capped at MaxPause",
			b:    probing(40 * time.Minute), now: at(time.Hour),
			want: Breaker{
				State: Open, ConsecutiveFailures: 21, FailingSince: at(-time.Hour),
				OpenedAt: t0, PausedUntil: at(2 * time.Hour), Pause: time.Hour,
			},
		},
		{
			name: "a pause at MaxPause stays there",
			b:    probing(time.Hour), now: at(time.Hour),
			want: Breaker{
				State: Open, ConsecutiveFailures: 21, FailingSince: at(-time.Hour),
				OpenedAt: t0, PausedUntil: at(2 * time.Hour), Pause: time.Hour,
			},
		},
		{
			name: "a damaged zero pause restarts from FirstPause",
			b:    probing(0), now: t0,
			want: Breaker{
				State: Open, ConsecutiveFailures: 21, FailingSince: at(-time.Hour),
				OpenedAt: t0, PausedUntil: at(10 * time.Minute), Pause: 10 * time.Minute,
			},
		},
		{
			name: "MaxPause below FirstPause is raised to it",
			cfg:  Config{FirstPause: 10 * time.Minute, MaxPause: time.Minute},
			b:    probing(10 * time.Minute), now: t0,
			want: Breaker{
				State: Open, ConsecutiveFailures: 21, FailingSince: at(-time.Hour),
				OpenedAt: t0, PausedUntil: at(10 * time.Minute), Pause: 10 * time.Minute,
			},
		},
		{
			name: "unknown state reads as closed",
			b:    Breaker{State: "half-open", ConsecutiveFailures: 3, FailingSince: t0}, now: t0,
			want: Breaker{State: Closed, ConsecutiveFailures: 4, FailingSince: t0},
		},
		{
			name: "success resets a closed streak", success: true,
			b: Breaker{State: Closed, ConsecutiveFailures: 19, FailingSince: t0}, now: t0,
			want: Breaker{State: Closed},
		},
		{
			name: "one success closes from probing", success: true,
			b: probing(20 * time.Minute), now: at(20 * time.Minute), want: Breaker{State: Closed},
		},
		{
			name: "a success while open closes too", success: true,
			b: opened(), now: at(time.Second), want: Breaker{State: Closed},
		},
		{
			name: "success on the zero breaker", success: true,
			b: Breaker{}, now: t0, want: Breaker{State: Closed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Record(tt.b, tt.success, tt.now, tt.cfg); got != tt.want {
				t.Fatalf("Record(%+v, %v)\n got %+v\nwant %+v", tt.b, tt.success, got, tt.want)
			}
		})
	}
}

func TestAllow(t *testing.T) {
	closedWithFailures := Breaker{State: Closed, ConsecutiveFailures: 19, FailingSince: t0}
	tests := []struct {
		name     string
		b        Breaker
		now      time.Time
		max, in  int
		want     Decision
		wantNext Breaker
	}{
		{"zero breaker allows", Breaker{}, t0, 4, 0, Decision{Allowed: true}, Breaker{}},
		{
			"closed allows beyond max: the lane enforces its own limit",
			closedWithFailures, t0, 4, 9, Decision{Allowed: true}, closedWithFailures,
		},
		{"open denies during the pause", opened(), at(time.Minute), 4, 0, Decision{Wait: 4 * time.Minute}, opened()},
		{"open denies until the last instant", opened(), at(5*time.Minute - 1), 4, 0, Decision{Wait: 1}, opened()},
		{
			"open at the end of the pause starts probing",
			opened(), at(5 * time.Minute), 4, 0, Decision{Allowed: true, Probe: true}, probing(5 * time.Minute),
		},
		{
			"open long after the pause starts probing",
			opened(), at(48 * time.Hour), 4, 0, Decision{Allowed: true, Probe: true}, probing(5 * time.Minute),
		},
		{
			"probing allows below max_concurrency",
			probing(5 * time.Minute), at(6 * time.Minute), 4, 3, Decision{Allowed: true, Probe: true}, probing(5 * time.Minute),
		},
		{
			"probing denies at max_concurrency, no wait: a result is due",
			probing(5 * time.Minute), at(6 * time.Minute), 4, 4, Decision{Probe: true}, probing(5 * time.Minute),
		},
		{
			"probing with max_concurrency 0 still sends one probe",
			probing(5 * time.Minute), at(6 * time.Minute), 0, 0, Decision{Allowed: true, Probe: true}, probing(5 * time.Minute),
		},
		{
			"probing with max_concurrency 0 sends only one",
			probing(5 * time.Minute), at(6 * time.Minute), 0, 1, Decision{Probe: true}, probing(5 * time.Minute),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, d := Allow(tt.b, tt.now, tt.max, tt.in)
			if d != tt.want {
				t.Errorf("decision = %+v, want %+v", d, tt.want)
			}
			if next != tt.wantNext {
				t.Errorf("next breaker\n got %+v\nwant %+v", next, tt.wantNext)
			}
		})
	}
}

// TestLifecycle walks an endpoint through death and recovery with the
// default Config, as the engine would drive it.
func TestLifecycle(t *testing.T) {
	var cfg Config
	var b Breaker
	now := t0
	for i := range 20 {
		if _, d := Allow(b, now, 4, 0); !d.Allowed {
			t.Fatalf("attempt %d denied while closed: %+v", i+1, b)
		}
		b = Record(b, false, now, cfg)
		now = now.Add(time.Second)
	}
	if b.State != Open || b.Pause != 5*time.Minute || !b.FailingSince.Equal(t0) {
		t.Fatalf("after 20 failures: %+v, want open for 5m, failing since t0", b)
	}
	openedAt := b.OpenedAt

	// Probe rounds keep failing: 10m, 20m, 40m, then capped at 1h.
	for _, want := range []time.Duration{10, 20, 40, 60, 60} {
		if _, d := Allow(b, b.PausedUntil.Add(-time.Nanosecond), 4, 0); d.Allowed {
			t.Fatalf("allowed before the pause ended: %+v", b)
		}
		now = b.PausedUntil
		var probes int
		for inFlight := range 10 { // bounded: a broken limit fails, not hangs
			var d Decision
			b, d = Allow(b, now, 4, inFlight)
			if !d.Allowed {
				break
			}
			probes++
		}
		if probes != 4 || b.State != Probing {
			t.Fatalf("probe round sent %d probes in state %s, want 4 while probing", probes, b.State)
		}
		now = now.Add(5 * time.Second)
		b = Record(b, false, now, cfg) // the first result fails the round
		for range probes - 1 {         // the others fail later, without extending the pause
			b = Record(b, false, now.Add(time.Second), cfg)
		}
		if b.State != Open || b.Pause != want*time.Minute || !b.PausedUntil.Equal(now.Add(b.Pause)) {
			t.Fatalf("after a failed round: %+v, want open for %dm from %v", b, want, now)
		}
	}
	if !b.OpenedAt.Equal(openedAt) || !b.FailingSince.Equal(t0) {
		t.Fatalf("OpenedAt %v FailingSince %v, want kept at %v and %v", b.OpenedAt, b.FailingSince, openedAt, t0)
	}
	if got, want := b.FailingFor(now), now.Sub(t0); got != want {
		t.Fatalf("FailingFor = %v, want %v", got, want)
	}

	now = b.PausedUntil
	b, _ = Allow(b, now, 4, 0)
	b = Record(b, true, now.Add(time.Second), cfg)
	if b != (Breaker{State: Closed}) || b.FailingFor(now) != 0 {
		t.Fatalf("after a successful probe: %+v, want closed with no history", b)
	}
}

// TestRandomOutcomes drives the state machine like a lane would, with
// endpoints that flip between healthy, flaky and dead, and checks every
// transition against a simple model.
func TestRandomOutcomes(t *testing.T) {
	seen := map[string]int{}
	for seed := range uint64(200) {
		simulate(t, seed, seen)
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	// Without these the invariants could hold vacuously.
	for _, k := range []string{"open", "probe", "reopen", "close from probing", "denied while open", "probe limit"} {
		if seen[k] == 0 {
			t.Errorf("no run reached %q: the simulation does not exercise it", k)
		}
	}
}

func simulate(t *testing.T, seed uint64, seen map[string]int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := Config{
		Threshold:  1 + rng.IntN(6),
		FirstPause: time.Duration(1+rng.IntN(10)) * time.Minute,
	}
	cfg.MaxPause = cfg.FirstPause * time.Duration(1+rng.IntN(12))
	maxConc := rng.IntN(5)
	var (
		b            Breaker
		now          = t0
		inFlight     int
		failures     int // the model: failures since the last success
		failingSince time.Time
		pSuccess     = 0.5
	)
	for range 2000 {
		prev := b
		switch rng.IntN(5) {
		case 0:
			now = now.Add(time.Duration(rng.Int64N(int64(2 * cfg.FirstPause))))
		case 1:
			pSuccess = []float64{0, 0, 0.3, 0.95}[rng.IntN(4)]
		case 2, 3:
			var d Decision
			b, d = Allow(b, now, maxConc, inFlight)
			checkAllow(t, prev, b, d, now, maxConc, inFlight, seen)
			if d.Allowed {
				inFlight++
			}
		case 4:
			if inFlight == 0 {
				continue
			}
			inFlight--
			success := rng.Float64() < pSuccess
			b = Record(b, success, now, cfg)
			if success {
				failures, failingSince = 0, time.Time{}
			} else if failures++; failures == 1 {
				failingSince = now
			}
			checkRecord(t, prev, b, success, now, cfg.withDefaults(), seen)
		}
		checkInvariants(t, b, failures, failingSince, cfg.withDefaults())
		if t.Failed() {
			return
		}
	}
}

func checkAllow(t *testing.T, prev, b Breaker, d Decision, now time.Time, maxConc, inFlight int, seen map[string]int) {
	t.Helper()
	paused := prev.State == Open && now.Before(prev.PausedUntil)
	switch {
	case paused && (d.Allowed || d.Wait != prev.PausedUntil.Sub(now) || d.Wait <= 0 || b != prev):
		t.Errorf("open until %v, at %v: decision %+v, next %+v", prev.PausedUntil, now, d, b)
	case paused:
		seen["denied while open"]++
	case prev.State == Open && (b.State != Probing || !d.Probe):
		t.Errorf("pause over at %v but not probing: %+v %+v", now, b, d)
	case d.Probe && d.Allowed != (inFlight < max(maxConc, 1)):
		t.Errorf("probing with %d in flight, max %d: allowed %v", inFlight, maxConc, d.Allowed)
	case d.Probe && !d.Allowed:
		seen["probe limit"]++
	case d.Probe:
		seen["probe"]++
	case !d.Allowed:
		t.Errorf("closed breaker denied: %+v %+v", prev, d)
	}
}

func checkRecord(t *testing.T, prev, b Breaker, success bool, now time.Time, cfg Config, seen map[string]int) {
	t.Helper()
	switch {
	case success && b != (Breaker{State: Closed}):
		t.Errorf("success left %+v, want closed with no history", b)
	case success && prev.State == Probing:
		seen["close from probing"]++
	case success:
	case prev.State == Open:
		if b.State != Open || b.Pause != prev.Pause || b.PausedUntil != prev.PausedUntil {
			t.Errorf("failure while open changed the pause: %+v -> %+v", prev, b)
		}
	case prev.State == Probing:
		want := min(2*prev.Pause, cfg.MaxPause)
		if b.State != Open || b.Pause != want || !b.PausedUntil.Equal(now.Add(want)) || b.OpenedAt != prev.OpenedAt {
			t.Errorf("failed probe: %+v -> %+v, want open for %v from %v", prev, b, want, now)
		}
		seen["reopen"]++
	case b.State == Open:
		if b.Pause != cfg.FirstPause || !b.PausedUntil.Equal(now.Add(cfg.FirstPause)) || !b.OpenedAt.Equal(now) {
			t.Errorf("opening: %+v -> %+v, want open for %v from %v", prev, b, cfg.FirstPause, now)
		}
		seen["open"]++
	}
}

func checkInvariants(t *testing.T, b Breaker, failures int, failingSince time.Time, cfg Config) {
	t.Helper()
	if b.ConsecutiveFailures != failures || !b.FailingSince.Equal(failingSince) {
		t.Errorf("%+v: want %d failures since %v", b, failures, failingSince)
	}
	switch b.State {
	case Open, Probing:
		if failures < cfg.Threshold || b.Pause < cfg.FirstPause || b.Pause > cfg.MaxPause || b.OpenedAt.IsZero() {
			t.Errorf("%s breaker %+v breaks its invariants (cfg %+v)", b.State, b, cfg)
		}
	default:
		if failures >= cfg.Threshold || b.Pause != 0 || !b.PausedUntil.IsZero() || !b.OpenedAt.IsZero() {
			t.Errorf("closed breaker %+v breaks its invariants (cfg %+v)", b, cfg)
		}
	}
}

func TestBreakerJSON(t *testing.T) {
	b := probing(20 * time.Minute)
	data, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var got Breaker
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got != b {
		t.Fatalf("round trip of %s\n got %+v\nwant %+v", data, got, b)
	}
	if data, _ := json.Marshal(Breaker{}); string(data) != "{}" {
		t.Fatalf("zero breaker encodes as %s, want {}", data)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{"": "closed", Closed: "closed", Open: "open", Probing: "probing"} {
		if got := s.String(); got != want {
			t.Errorf("State(%q).String() = %q, want %q", string(s), got, want)
		}
	}
}

func TestFailingFor(t *testing.T) {
	if got := (Breaker{}).FailingFor(t0); got != 0 {
		t.Fatalf("zero breaker failing for %v, want 0", got)
	}
	b := Breaker{FailingSince: t0}
	if got := b.FailingFor(at(5 * 24 * time.Hour)); got != 5*24*time.Hour {
		t.Fatalf("FailingFor = %v, want 120h", got)
	}
}
