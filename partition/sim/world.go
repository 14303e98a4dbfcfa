// Package sim runs the real partition.Owner under a seeded scheduler with
// simulated time, through random combinations of the engine's features and
// faults, and checks Laneway's guarantees with an oracle after every run.
//
// One seed decides everything: the endpoints, the events, the receiver's
// answers and latencies, the order in which completions arrive, and every
// fault (pause and resume, limits and event types changed live, deletes,
// disables, 410 and the disable threshold, breakers, parking, produce
// failures and late acknowledgements, read failures, aborted batches,
// retention, Redis flushes, crashes, rebalances with attempts still
// running, lost partitions, redrives). A failing seed replays exactly:
// go test ./partition/sim -run 'TestSim$' -seed N -v. The fixed bugs' scenarios
// are scripts of their own (regressions_test.go).
package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/partition"
)

// element is one record of the deliveries log as the oracle sees it: one
// (event, endpoint) delivery, in the order the log holds them.
type element struct {
	index    int // its position in the log of elements
	offset   int64
	event    string
	endpoint string
	entity   string
	revision int64
	coalesce bool
	invalid  bool // the record is not a valid delivery
	redriven bool
	created  time.Time // its delivery's CreatedAt: max_age counts from here (rule 10)
	// pos is the element's position in its (endpoint, entity) stream.
	pos int
}

// payload is the delivery data: it names the element, so a delivery seen
// by the receiver (through a parked copy or a redrive too) is traced back.
type payload struct {
	I int `json:"i"`
}

// logRecord is one record of a simulated Kafka partition.
type logRecord struct {
	rec     *kgo.Record
	aborted bool      // written in an aborted transaction: read_committed skips it
	at      time.Time // when it was appended (retention counts from here)
}

// kafka is the simulated cluster: the deliveries, parked and dead
// partitions, and the commits.
type kafka struct {
	deliveries       []logRecord
	parked           []logRecord
	parkedLogStart   int64
	dead             []event.DeadLetter
	deliveriesCommit int64
	parkedProgress   partition.ParkedProgress // committed with the deliveries commit
	parkedSrc        map[int64]bool           // the deliveries offsets the parked records came from
	parkedFirst      map[int64]time.Time      // when each of them first landed parked (rule 9)
	down             bool                     // produces, reads and commits fail
	maxValue         int64                    // the largest record value written, for the byte bounds
	now              func() time.Time
	tracef           func(format string, args ...any)
}

func (k *kafka) appendDelivery(rec *kgo.Record, aborted bool) int64 {
	rec.Offset = int64(len(k.deliveries))
	k.maxValue = max(k.maxValue, int64(len(rec.Value)))
	k.deliveries = append(k.deliveries, logRecord{rec: rec, aborted: aborted, at: k.now()})
	return rec.Offset
}

// lastRecordEnd is one past the deliveries partition's last record a
// read-committed consumer gets (what the stage finds at assignment).
func (k *kafka) lastRecordEnd() int64 {
	for o := len(k.deliveries) - 1; o >= 0; o-- {
		if !k.deliveries[o].aborted {
			return int64(o) + 1
		}
	}
	return 0
}

func (k *kafka) appendParked(rec *kgo.Record) int64 {
	cp := *rec
	cp.Offset = int64(len(k.parked))
	k.parked = append(k.parked, logRecord{rec: &cp, at: k.now()})
	if k.parkedSrc == nil {
		k.parkedSrc = map[int64]bool{}
	}
	k.parkedSrc[partition.SrcOffset(&cp)] = true
	if k.parkedFirst == nil {
		k.parkedFirst = map[int64]time.Time{}
	}
	if _, ok := k.parkedFirst[partition.SrcOffset(&cp)]; !ok {
		k.parkedFirst[partition.SrcOffset(&cp)] = k.now()
	}
	k.tracef("parked offset %d: %s src %d", cp.Offset, cp.Key, partition.SrcOffset(&cp))
	k.maxValue = max(k.maxValue, int64(len(cp.Value)))
	return cp.Offset
}

// receiverMode is how an endpoint's receiver answers for a while.
type receiverMode int

const (
	modeHealthy    receiverMode = iota
	modeFlaky                   // mostly 2xx, some 5xx, resets, timeouts
	modeFailing                 // 503 and timeouts
	modeSlow                    // 2xx, slowly
	modeThrottling              // 429 with Retry-After
	modeGone                    // 410
	modeTooLarge                // 413 now and then
	modeHoldFail                // holds each request, then 503 (the runbook)
)

var modeNames = []string{"healthy", "flaky", "failing", "slow", "throttling", "gone", "too_large", "hold_fail"}

func (m receiverMode) String() string { return modeNames[m] }

// receiver is every endpoint's receiver: what it was sent, in order.
type receiver struct {
	inFlight map[streamKey][]*attemptRun
	// delivered counts the 2xx per element.
	delivered map[int]int
	// deliveredEvents are (event, endpoint) pairs answered 2xx.
	deliveredEvents map[eventKey]bool
	// maxPos is the highest stream position delivered per stream.
	maxPos map[streamKey]int
	// lastDelivery is when the receiver last answered 2xx (for liveness).
	lastDelivery time.Time
}

type streamKey struct{ endpoint, entity string }
type eventKey struct{ event, endpoint string }

func newReceiver() *receiver {
	return &receiver{
		inFlight: map[streamKey][]*attemptRun{}, delivered: map[int]int{},
		deliveredEvents: map[eventKey]bool{}, maxPos: map[streamKey]int{},
	}
}

// breakers is the simulated breaker store: each instance's cache over a
// shared "Redis" that can be flushed.
type breakers struct {
	cfg    breaker.Config
	redis  map[string]breaker.Breaker
	memory map[string]breaker.Breaker
	loaded map[string]bool
	// fromStore are the breakers loaded from "Redis" or reset: rule 12
	// wants one of them before an endpoint's first attempt.
	fromStore map[string]bool
}

func newBreakers(cfg breaker.Config, redis map[string]breaker.Breaker) *breakers {
	return &breakers{cfg: cfg, redis: redis, memory: map[string]breaker.Breaker{}, loaded: map[string]bool{},
		fromStore: map[string]bool{}}
}

func (b *breakers) Allow(id string, now time.Time, maxConcurrency, inFlight int) breaker.Decision {
	next, d := breaker.Allow(b.memory[id], now, maxConcurrency, inFlight)
	b.memory[id] = next
	b.loaded[id] = true
	return d
}

func (b *breakers) Record(id string, success bool, now time.Time) breaker.Breaker {
	next := breaker.Record(b.memory[id], success, now, b.cfg)
	b.memory[id] = next
	b.loaded[id] = true
	return next
}

func (b *breakers) Get(id string) breaker.Breaker { return b.memory[id] }
func (b *breakers) Loaded(id string) bool         { return b.loaded[id] }
func (b *breakers) Reset(id string) {
	b.memory[id] = breaker.Breaker{}
	b.loaded[id] = true
	b.fromStore[id] = true
}

// warm loads one breaker from "Redis".
func (b *breakers) warm(id string) {
	if !b.loaded[id] {
		b.memory[id] = b.redis[id]
		b.loaded[id] = true
	}
	b.fromStore[id] = true
}

// flush writes the cache to "Redis" (a clean handover).
func (b *breakers) flush() {
	for id, br := range b.memory {
		b.redis[id] = br
	}
}

// endpoints is the simulated endpoint config store, read by the owner.
type endpoints map[string]endpoint.Endpoint

func (e endpoints) Get(id string) (endpoint.Endpoint, bool) {
	ep, ok := e[id]
	return ep, ok
}

func deliveryRecord(topic string, d *event.Delivery) *kgo.Record {
	value, err := json.Marshal(d)
	if err != nil {
		panic(fmt.Sprintf("sim: encoding a delivery: %v", err))
	}
	return &kgo.Record{Topic: topic, Key: []byte(d.EndpointID), Value: value}
}

// elementOf reads the element index from a delivery's data.
func elementOf(d *event.Delivery) (int, bool) {
	var p payload
	if json.Unmarshal(d.Data, &p) != nil {
		return 0, false
	}
	return p.I, true
}

// answer decides the receiver's answer and its latency, by the endpoint's
// current mode.
func (s *Sim) answer(endpointID string) (deliver.Result, time.Duration) {
	timeout := s.p.attemptTimeout
	lat := s.latency(s.p.answerLatency)
	status := func(code int) deliver.Result {
		return deliver.Result{Err: &deliver.StatusError{Code: code}, StatusCode: code, Duration: lat}
	}
	ok := deliver.Result{StatusCode: 200, Duration: lat}
	switch s.modes[endpointID] {
	case modeFlaky:
		switch s.rng.IntN(10) {
		case 0:
			return status(500), lat
		case 1:
			return deliver.Result{Err: &deliver.TransportError{Err: errors.New("connection reset")}, Duration: lat}, lat
		case 2:
			return deliver.Result{Err: &deliver.TimeoutError{After: timeout}, Duration: timeout}, timeout
		}
	case modeFailing:
		if s.chance(0.3) {
			return deliver.Result{Err: &deliver.TimeoutError{After: timeout}, Duration: timeout}, timeout
		}
		return status(http.StatusServiceUnavailable), lat
	case modeSlow:
		lat = timeout / 2
		ok.Duration = lat
		if s.chance(0.2) {
			return deliver.Result{Err: &deliver.TimeoutError{After: timeout}, Duration: timeout}, timeout
		}
	case modeThrottling:
		if s.chance(0.7) {
			r := status(http.StatusTooManyRequests)
			r.RetryAfter = time.Duration(1+s.rng.IntN(5)) * time.Second
			return r, lat
		}
	case modeGone:
		return status(http.StatusGone), lat
	case modeHoldFail:
		lat = min(timeout, 1500*time.Millisecond)
		return status(http.StatusServiceUnavailable), lat
	case modeTooLarge:
		if s.chance(0.3) {
			return status(http.StatusRequestEntityTooLarge), lat
		}
	}
	return ok, lat
}

// appendAnswer is a pull endpoint's attempt: an append to its feed topic,
// which fails while Kafka is down and, in the receiver's failing modes,
// as a broker that refuses or times out would. No HTTP status exists
// here: 410, 413 and 429 never happen to a feed.
func (s *Sim) appendAnswer(endpointID string) (deliver.Result, time.Duration) {
	lat := s.latency(s.p.produceLatency)
	fail := deliver.Result{Err: &deliver.FeedError{Err: errors.New("NOT_ENOUGH_REPLICAS")}, Duration: lat}
	switch {
	case s.kafka.down:
		return fail, lat
	case s.modes[endpointID] == modeFailing, s.modes[endpointID] == modeHoldFail:
		return fail, lat
	case s.modes[endpointID] == modeFlaky && s.chance(0.2):
		return fail, lat
	case s.modes[endpointID] == modeSlow:
		lat = s.p.attemptTimeout / 2
	}
	return deliver.Result{Duration: lat}, lat
}
