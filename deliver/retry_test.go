package deliver_test

import (
	"math"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"github.com/laneway/laneway/deliver"
)

func constant(f float64) func() float64 { return func() float64 { return f } }

// The contract: d = min(6 h, 30 s × 2^(attempt−1)), delay in [d/2, d].
func TestDelayBounds(t *testing.T) {
	tests := []struct {
		attempt int
		d       time.Duration
	}{
		{-5, 30 * time.Second}, // nonsense counts as the first attempt
		{0, 30 * time.Second},
		{1, 30 * time.Second},
		{2, time.Minute},
		{3, 2 * time.Minute},
		{5, 8 * time.Minute},
		{10, 256 * 30 * time.Second * 2}, // 4 h 16 m
		{11, 6 * time.Hour},              // 8 h 32 m, capped
		{20, 6 * time.Hour},
		{64, 6 * time.Hour}, // 2^63 would overflow
		{math.MaxInt, 6 * time.Hour},
	}
	var p deliver.RetryPolicy
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range tests {
		if got := p.Delay(tc.attempt, 0, constant(0)); got != tc.d/2 {
			t.Errorf("attempt %d, rnd 0: %v, want %v", tc.attempt, got, tc.d/2)
		}
		if got := p.Delay(tc.attempt, 0, constant(1)); got != tc.d {
			t.Errorf("attempt %d, rnd 1: %v, want %v", tc.attempt, got, tc.d)
		}
		for range 1000 {
			if got := p.Delay(tc.attempt, 0, rng.Float64); got < tc.d/2 || got > tc.d {
				t.Fatalf("attempt %d: %v outside [%v, %v]", tc.attempt, got, tc.d/2, tc.d)
			}
		}
	}
}

func TestDelaySpreadsRetries(t *testing.T) {
	var p deliver.RetryPolicy
	seen := map[time.Duration]bool{}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100 {
		seen[p.Delay(4, 0, rng.Float64)] = true
	}
	if len(seen) < 90 {
		t.Fatalf("100 delays took only %d distinct values: retries would arrive together", len(seen))
	}
	// The default source must work too.
	if d := p.Delay(1, 0, nil); d < 15*time.Second || d > 30*time.Second {
		t.Fatalf("Delay with nil rnd = %v, want within [15s, 30s]", d)
	}
}

func TestDelayRetryAfter(t *testing.T) {
	var p deliver.RetryPolicy
	tests := []struct {
		name       string
		attempt    int
		retryAfter time.Duration
		want       time.Duration
	}{
		{"longer Retry-After wins", 1, 2 * time.Hour, 2 * time.Hour},
		{"Retry-After capped at max", 1, 10 * time.Hour, 6 * time.Hour},
		{"huge Retry-After capped", 1, time.Duration(math.MaxInt64), 6 * time.Hour},
		{"shorter Retry-After ignored", 5, time.Second, 4 * time.Minute}, // d = 8m, rnd 0
		{"negative ignored", 1, -time.Hour, 15 * time.Second},
	}
	for _, tc := range tests {
		if got := p.Delay(tc.attempt, tc.retryAfter, constant(0)); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestDelayNeverImmediate(t *testing.T) {
	p := deliver.RetryPolicy{Base: time.Nanosecond, Min: 10 * time.Millisecond}
	for _, rnd := range []func() float64{constant(0), constant(math.NaN()), constant(-3)} {
		if got := p.Delay(1, 0, rnd); got != 10*time.Millisecond {
			t.Errorf("tiny base: %v, want the 10ms minimum", got)
		}
	}
	if got := (deliver.RetryPolicy{Base: time.Nanosecond}).Delay(1, 0, constant(0)); got != deliver.DefaultRetryMin {
		t.Errorf("tiny base, default minimum: %v, want %v", got, deliver.DefaultRetryMin)
	}
	// A broken rnd above 1 must not exceed the cap.
	var def deliver.RetryPolicy
	if got := def.Delay(30, 0, constant(7)); got != 6*time.Hour {
		t.Errorf("rnd 7 at cap: %v, want 6h", got)
	}
}

func TestExhausted(t *testing.T) {
	created := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var p deliver.RetryPolicy
	tests := []struct {
		name       string
		attempts   int
		createdAt  time.Time
		age        time.Duration
		wantReason string
	}{
		{"fresh", 1, created, time.Minute, ""},
		{"19 attempts", 19, created, 71 * time.Hour, ""},
		{"20 attempts", 20, created, time.Hour, "max_attempts"},
		{"more attempts", 25, created, time.Hour, "max_attempts"},
		{"just under 72h", 3, created, 72*time.Hour - time.Second, ""},
		{"72h old", 3, created, 72 * time.Hour, "max_age"},
		{"both: attempts reported", 20, created, 100 * time.Hour, "max_attempts"},
		{"unknown age", 3, time.Time{}, 0, ""},
	}
	for _, tc := range tests {
		reason, dead := p.Exhausted(tc.attempts, tc.createdAt, created.Add(tc.age))
		if reason != tc.wantReason || dead != (tc.wantReason != "") {
			t.Errorf("%s: (%q, %v), want %q", tc.name, reason, dead, tc.wantReason)
		}
	}
	custom := deliver.RetryPolicy{MaxAttempts: 3, MaxAge: time.Hour}
	if reason, _ := custom.Exhausted(3, created, created); reason != "max_attempts" {
		t.Errorf("custom MaxAttempts ignored: %q", reason)
	}
	if reason, _ := custom.Exhausted(1, created, created.Add(time.Hour)); reason != "max_age" {
		t.Errorf("custom MaxAge ignored: %q", reason)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"120", 120 * time.Second, true},
		{" 7 ", 7 * time.Second, true},
		{"0", 0, true},
		{now.Add(time.Hour).Format(http.TimeFormat), time.Hour, true},
		{"Sat, 01 Jun 2030 12:00:30 GMT", 30 * time.Second, true},
		{"Saturday, 01-Jun-30 12:00:30 GMT", 30 * time.Second, true}, // RFC 850
		{"Sat Jun  1 12:00:30 2030", 30 * time.Second, true},         // asctime
		{"99999999999999999999", time.Duration(math.MaxInt64), true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, false},
		{"", 0, false},
		{"-5", 0, false},
		{"+5", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"120s", 0, false},
	}
	for _, tc := range tests {
		got, ok := deliver.ParseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.wantOK)
		}
	}
}
