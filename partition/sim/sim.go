package sim

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/partition"
)

// params is one run's configuration, drawn from its seed.
type params struct {
	endpoints, entities, events int
	produceFor                  time.Duration // events are published over this span
	faultsFor                   time.Duration // faults happen over this span, then everything heals
	faults                      int
	drainWithin                 time.Duration // after healing, everything must be finished within this
	factShare                   float64       // share of facts (coalesce: false)
	invalidShare, abortedShare  float64

	retry              deliver.RetryPolicy
	breaker            breaker.Config
	disableAfter       time.Duration
	parkAfter          time.Duration
	laneBuffer         int
	parkedWindow       int
	maxAppendsInFlight int
	maxQueuedAppends   int
	maxTracked         int // MaxTrackedOffsets: the default, which never binds, but in large runs
	maxPollRecords     int
	replayHoldRecords  int
	readRecords        int
	attemptTimeout     time.Duration
	revokeTimeout      time.Duration
	retention          time.Duration
	shortRetention     bool // retention below max_age: parked records may expire unread

	pollEvery, tickEvery, commitEvery time.Duration
	answerLatency, produceLatency     [2]time.Duration
	readLatency                       [2]time.Duration
	// producerRetry is how long the producer waits before it retries what
	// a stopped owner left in flight (produce.go, producerRetries).
	producerRetry               [2]time.Duration
	produceFailure, readFailure float64
	commitFailure               float64
	maxProgressBytes            int // small ones leave endpoints out of the committed parked progress
	// Byte budgets: the defaults (which never bind here) or a few records.
	laneBytes, parkedWindowBytes, maxQueuedAppendBytes int64
	maxInFlight                                        int // the instance's attempt slots; 0: no cap
	// pullShare of the endpoints are pull endpoints: their attempts are
	// appends to a feed (issue #17), which the oracle reads as a consumer.
	pullShare float64

	// The group and the fence (loss.go): the session timeout, how often a
	// member heartbeats, how long a heartbeat takes to be answered, and
	// the bound on how much slower than the coordinator's a member's
	// clock may run.
	sessionTimeout, heartbeatEvery time.Duration
	heartbeatLatency               [2]time.Duration
	drift                          float64

	// The producer's and the commit's misbehaviour (inputs.go): a share of
	// events published with a revision below one published before, a
	// share published again under the same event id, and a share of
	// commits that land but report a failure.
	backwardShare, repeatShare, commitAckLost float64
	// fetchDelay is how long a fetched batch takes to reach the owner:
	// the engine's poll loop fetches, then dispatches, and the process may
	// freeze in between (rule 14). Zero: at once.
	fetchDelay time.Duration
	// configLag is how late endpoint config changes reach the owner (the
	// store's compacted topic read by every instance): zero, at once.
	configLag time.Duration
}

func drawParams(r *rand.Rand) params {
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	p := params{
		endpoints: 1 + r.IntN(3), entities: 1 + r.IntN(8), events: 10 + r.IntN(60),
		produceFor: ms(1000, 30000), faultsFor: 60 * time.Second, faults: r.IntN(16),
		drainWithin: 15 * time.Minute, factShare: []float64{0, 0.3, 1}[r.IntN(3)],
		invalidShare: []float64{0, 0.03}[r.IntN(2)], abortedShare: []float64{0, 0.1}[r.IntN(2)],
		retry: deliver.RetryPolicy{
			Base: ms(200, 2000), Max: ms(3000, 20000), Min: 100 * time.Millisecond,
			MaxAttempts: 3 + r.IntN(8), MaxAge: ms(15000, 300000),
		},
		breaker:            breaker.Config{Threshold: 2 + r.IntN(5), FirstPause: ms(500, 5000), MaxPause: ms(5000, 30000)},
		disableAfter:       ms(10000, 120000),
		parkAfter:          ms(500, 5000),
		laneBuffer:         2 + r.IntN(20),
		parkedWindow:       2 + r.IntN(8),
		maxAppendsInFlight: 1 + r.IntN(8),
		maxQueuedAppends:   5 + r.IntN(50),
		maxPollRecords:     1 + r.IntN(20),
		replayHoldRecords:  300 + r.IntN(200), // above any run's records: replays stay within the hold
		readRecords:        4 + r.IntN(30),
		attemptTimeout:     ms(500, 5000),
		pollEvery:          20 * time.Millisecond, tickEvery: 50 * time.Millisecond, commitEvery: time.Second,
		answerLatency:  [2]time.Duration{time.Millisecond, ms(10, 800)},
		produceLatency: [2]time.Duration{time.Millisecond, ms(2, 500)},
		readLatency:    [2]time.Duration{time.Millisecond, ms(2, 300)},
		producerRetry:  [2]time.Duration{100 * time.Millisecond, 5 * time.Second},
		produceFailure: []float64{0, 0, 0.05, 0.2}[r.IntN(4)],
		readFailure:    []float64{0, 0.05}[r.IntN(2)],
		commitFailure:  []float64{0, 0.1}[r.IntN(2)],
	}
	p.maxProgressBytes = []int{partition.DefaultMaxProgressBytes, 40, 70}[r.IntN(3)]
	p.laneBytes, p.parkedWindowBytes, p.maxQueuedAppendBytes = partition.DefaultLaneBytes, partition.DefaultParkedWindowBytes, partition.DefaultMaxQueuedAppendBytes
	if r.IntN(2) == 0 {
		p.maxInFlight = 1 + r.IntN(4)
	}
	if r.IntN(2) == 0 {
		p.laneBytes = int64(500 + r.IntN(4000))
		p.parkedWindowBytes = int64(300 + r.IntN(3000))
		p.maxQueuedAppendBytes = int64(1000 + r.IntN(10000))
		if r.IntN(2) == 0 {
			p.laneBuffer = 1000 // the byte budget parks first
		}
	}
	p.pullShare = []float64{0, 0.5, 1}[r.IntN(3)]
	p.maxTracked = partition.DefaultMaxTrackedOffsets
	p.revokeTimeout = p.attemptTimeout + 2*time.Second
	// Retention beyond the maximum age by more than an owner may take to
	// reach a record (the assignment scan, a crash, an outage): max_age
	// dead-letters every parked record first, paused or not, so nothing may
	// ever expire unread. (Production: 7 days against 72 hours.)
	p.retention = p.retry.MaxAge + ms(60000, 120000)
	if r.IntN(400) == 0 {
		largeRun(&p, r)
	}
	return p
}

// shortRetention makes one seed in ten keep parked records for less than
// max_age (5 to 20 s): a misconfiguration, or an owner-less outage longer
// than the margin, in which records expire before they are read back. The
// oracle then requires every element lost that way to be counted (see
// lostToRetention). It is drawn from the seed, not the random stream, so
// every other seed runs as before.
func shortRetention(seed uint64) (time.Duration, bool) {
	if seed%10 != 3 {
		return 0, false
	}
	return time.Duration(5000+(seed/10)%15001) * time.Millisecond, true
}

// largeRun makes p a run of thousands of events over hundreds or thousands
// of entities, so that a structure growing per distinct entity, or per
// event, passes its bound (rule 5). Receivers and produces answer faster,
// reads return hundreds of records, and draining (rule 6) and retention's
// margin over the maximum age (rule 1) allow for the backlog: the owner reaches a parked record at its
// window's pace, so the time it takes grows with the backlog ahead of it.
func largeRun(p *params, r *rand.Rand) {
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.IntN(hi-lo+1)) * time.Millisecond }
	p.entities, p.events = 200+r.IntN(1300), 1000+r.IntN(1500)
	p.answerLatency = [2]time.Duration{time.Millisecond, ms(5, 100)}
	p.produceLatency = [2]time.Duration{time.Millisecond, ms(2, 50)}
	p.readRecords = 200 + r.IntN(800) // fetches of a few hundred KiB
	// Replays stay within the hold here too (a replay beyond it is not
	// checked, see docs/reliability.md); the hold then bounds the lanes
	// only while it lasts (rule 5).
	p.replayHoldRecords = p.endpoints*p.events + 100
	backlog := time.Duration(p.events) * 100 * time.Millisecond
	p.drainWithin += 3 * backlog
	p.retention += backlog
	p.maxTracked = 300 + r.IntN(1500) // binds: the owner stops fetching while a delivery holds the watermark
	// One produce in five failing for the whole run (each retried in order
	// after a backoff) paces parked appends and dead letters below what
	// thousands of events need within retention's margin (seed 31075: a
	// disabled endpoint's backlog dead-lettered at about one a second).
	p.produceFailure = min(p.produceFailure, 0.05)
}

// Result is one run's outcome.
type Result struct {
	Seed       uint64
	Violations []string
	Trace      []string
	Elements   int
	Delivered  int
	Dead       int
	EndedAt    time.Duration // simulated time the run took
	Peaks      map[string]Peak
	// Stalls counts the members that went silent to the coordinator
	// (frozen, or cut off from it), Frozen those of them frozen, and
	// Losses those the group dropped, giving the partition to another.
	Stalls, Frozen, Losses int
}

// OK reports whether the run kept every guarantee.
func (r Result) OK() bool { return len(r.Violations) == 0 }

// Sim is one simulated run.
type Sim struct {
	seed uint64
	rng  *rand.Rand
	// group draws the heartbeats' timing (loss.go) apart from rng, so that
	// they leave the rest of a seed's run as it was before them.
	group *rand.Rand
	p     params
	start time.Time
	now   time.Time
	queue eventQueue
	seq   uint64

	kafka     *kafka
	endpoints endpoints
	modes     map[string]receiverMode
	redis     map[string]breaker.Breaker
	receiver  *receiver
	current   *instance
	releasing bool // an owner is releasing the partition: no new one yet
	gen       int
	healed    bool
	done      bool
	// undeliverable: an endpoint was disabled or deleted during the run,
	// so a lane may have had DeadLetterConcurrency tasks out at once;
	// pausedEver: one was paused, so one may have had its expired heads.
	undeliverable, pausedEver bool
	scenario                  *scenario

	elements []*element
	byOffset map[int64]*element
	streams  map[streamKey][]*element
	deadElem map[int]bool
	redriven map[int]bool     // dead elements already redriven
	pull     map[string]bool  // pull endpoints
	feeds    map[string][]int // each pull endpoint's feed: elements in append order
	revs     map[string]int64
	// published are the events published (not aborted), for the producer
	// that publishes one again (inputs.go).
	published []publishedEvent

	policy policy // rules 8–14 (policy.go)
	// configs is every endpoint's config history, for the owner's late
	// view of it (inputs.go).
	configs        map[string][]configAt
	metrics        simMetrics
	expiredCounted int // parked offsets the owners counted as expired (short retention)
	logger         *slog.Logger

	keepTrace  bool
	trace      []string
	violations []string
	peaks      map[string]Peak // rule 5's structures at their highest; nil: not kept
	// stalls, frozen and losses count the members that went silent, were
	// frozen, and were dropped by the group (Result).
	stalls, frozen, losses int
}

// Options tune a run.
type Options struct {
	// Trace keeps the whole trace (else only its last lines on a failure).
	Trace bool
	// Peaks keeps each structure's highest value and share of its bound.
	Peaks bool
	// scenario replaces the seed's random events and faults by a script
	// (the named regressions); nil: a random run.
	scenario *scenario
}

// scenario is a hand-built run: tune sets its configuration over the
// seed's draw, script schedules its events and faults. The seed still
// decides what the script leaves open (latencies, endpoints' limits, the
// order of simultaneous events).
type scenario struct {
	tune   func(*params)
	script func(*Sim)
}

// Run runs the simulation of seed and checks the oracle.
func Run(seed uint64, opts Options) Result {
	s := newSim(seed, opts)
	s.run()
	return s.result()
}

func newSim(seed uint64, opts Options) *Sim {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Sim{
		seed: seed, rng: rng, group: rand.New(rand.NewPCG(seed^0x6a09e667f3bcc908, seed)), p: drawParams(rng), start: start, now: start, scenario: opts.scenario,
		kafka: &kafka{}, endpoints: endpoints{}, modes: map[string]receiverMode{},
		redis: map[string]breaker.Breaker{}, receiver: newReceiver(),
		byOffset: map[int64]*element{}, streams: map[streamKey][]*element{},
		deadElem: map[int]bool{}, redriven: map[int]bool{}, revs: map[string]int64{},
		pull: map[string]bool{}, feeds: map[string][]int{}, policy: newPolicy(),
		keepTrace: opts.Trace,
	}
	s.p.drawGroup(seed)
	if r, ok := shortRetention(seed); ok && opts.scenario == nil {
		s.p.retention, s.p.shortRetention = r, true
	}
	if opts.scenario == nil {
		s.p.drawInputs(seed)
	}
	if opts.Peaks {
		s.peaks = map[string]Peak{}
	}
	if opts.scenario != nil {
		opts.scenario.tune(&s.p)
	}
	s.kafka.tracef = s.tracef
	s.logger = slog.New(traceHandler{s: s})
	s.metrics.s = s
	s.kafka.now = s.Now
	return s
}

// Now is the simulated clock.
func (s *Sim) Now() time.Time { return s.now }

func (s *Sim) run() {
	s.setUp()
	for !s.done && s.queue.Len() > 0 {
		ev := heap.Pop(&s.queue).(*scheduled)
		s.now = ev.at
		ev.fn()
		if s.now.Sub(s.start) > s.p.faultsFor+s.p.drainWithin {
			s.violate("rule 6: not drained %v after the faults stopped", s.p.drainWithin)
			break
		}
	}
	s.finalChecks()
}

// setUp creates the endpoints, schedules the events and the faults, and
// starts the first owner.
func (s *Sim) setUp() {
	for i := range s.p.endpoints {
		id := fmt.Sprintf("ep%d", i)
		ep := endpoint.Endpoint{ID: id, Tenant: "t", URL: "http://receiver/" + id,
			MaxConcurrency: 1 + s.rng.IntN(4), Status: endpoint.StatusActive}
		if s.chance(s.p.pullShare) {
			// A batch endpoint's attempts are appends to its feed too (its
			// runner, which sends the feed, has its own simulation in
			// internal/modes/batch); the owner treats both alike.
			ep.URL, ep.Mode, s.pull[id] = "", endpoint.ModePull, true
			if s.chance(0.5) {
				ep.URL, ep.Mode = "http://receiver/"+id, endpoint.ModeBatch
			}
		}
		s.endpoints[id] = ep
		s.configChanged(id)
	}
	s.tracef("seed %d: %d endpoints (%d pull), %d entities, %d events, %d faults, facts %.0f%%", s.seed,
		s.p.endpoints, len(s.pull), s.p.entities, s.p.events, s.p.faults, 100*s.p.factShare)
	if s.scenario != nil {
		s.scenario.script(s)
	} else {
		for range s.p.events {
			s.at(s.start.Add(s.rand(s.p.produceFor)), s.publish)
		}
		for range s.p.faults {
			s.at(s.start.Add(s.rand(s.p.faultsFor)), s.fault)
		}
	}
	s.at(s.start.Add(s.p.faultsFor), s.heal)
	s.after(time.Second, s.sweepRetention)
	in := s.newInstance()
	s.current = in
	in.assign()
}

// at schedules fn at t; events at the same time run in a random order.
func (s *Sim) at(t time.Time, fn func()) {
	s.seq++
	heap.Push(&s.queue, &scheduled{at: t, tie: s.rng.Uint64(), seq: s.seq, fn: fn})
}

func (s *Sim) after(d time.Duration, fn func()) { s.at(s.now.Add(d), fn) }

// atGroup schedules fn at t with a tie drawn from the group's stream.
func (s *Sim) atGroup(t time.Time, fn func()) {
	s.seq++
	heap.Push(&s.queue, &scheduled{at: t, tie: s.group.Uint64(), seq: s.seq, fn: fn})
}

func (s *Sim) chance(p float64) bool { return p > 0 && s.rng.Float64() < p }

func (s *Sim) rand(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(s.rng.Int64N(int64(d)))
}

func (s *Sim) latency(r [2]time.Duration) time.Duration { return r[0] + s.rand(r[1]-r[0]) }

func (s *Sim) tracef(format string, args ...any) {
	line := fmt.Sprintf("%9.3fs ", s.now.Sub(s.start).Seconds()) + fmt.Sprintf(format, args...)
	s.trace = append(s.trace, line)
	if !s.keepTrace && len(s.trace) > 4000 {
		s.trace = append(s.trace[:0], s.trace[2000:]...)
	}
}

func (s *Sim) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.tracef("VIOLATION %s", msg)
	if slices.Contains(s.violations, msg) {
		return
	}
	if len(s.violations) < 20 {
		s.violations = append(s.violations, msg)
	}
}

func (s *Sim) result() Result {
	r := Result{Seed: s.seed, Violations: s.violations, Trace: s.trace, Elements: len(s.elements), EndedAt: s.now.Sub(s.start),
		Peaks: s.peaks, Stalls: s.stalls, Frozen: s.frozen, Losses: s.losses}
	for _, e := range s.elements {
		if s.receiver.deliveredEvents[eventKey{e.event, e.endpoint}] {
			r.Delivered++
		}
	}
	r.Dead = len(s.deadElem)
	return r
}

// TraceText is the trace as text.
func (r Result) TraceText() string { return strings.Join(r.Trace, "\n") }

type scheduled struct {
	at  time.Time
	tie uint64
	seq uint64
	fn  func()
}

type eventQueue []*scheduled

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	if q[i].tie != q[j].tie {
		return q[i].tie < q[j].tie
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*scheduled)) }
func (q *eventQueue) Pop() any {
	old := *q
	n := len(old)
	x := old[n-1]
	old[n-1] = nil
	*q = old[:n-1]
	return x
}

// simMetrics counts what the oracle needs from the owner's metrics.
type simMetrics struct{ s *Sim }

func (m *simMetrics) Attempt(string, string, float64) {}
func (m *simMetrics) Ended(string)                    {}
func (m *simMetrics) Dead(string)                     {}
func (m *simMetrics) Superseded(int)                  {}
func (m *simMetrics) Parked(string, string)           {}
func (m *simMetrics) Unparked(string)                 {}
func (m *simMetrics) StaleSkipped()                   { m.s.tracef("counted a stale parked record skipped") }
func (m *simMetrics) ParkedExpired(n int) {
	if !m.s.p.shortRetention {
		m.s.violate("rule 1: %d parked offsets expired under retention before they were read back", n)
		return
	}
	m.s.expiredCounted += n
	m.s.tracef("counted %d parked offsets expired under retention", n)
}

// traceHandler writes the owner's log lines into the trace.
type traceHandler struct {
	s     *Sim
	attrs []slog.Attr
}

func (h traceHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || os.Getenv("SIM_DEBUG") != ""
}

func (h traceHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString("  owner: " + r.Message)
	write := func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	}
	for _, a := range h.attrs {
		write(a)
	}
	r.Attrs(write)
	h.s.tracef("%s", b.String())
	return nil
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{s: h.s, attrs: append(slices.Clone(h.attrs), attrs...)}
}

func (h traceHandler) WithGroup(string) slog.Handler { return h }
