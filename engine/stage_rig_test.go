package engine

// The rig of the delivery stage's integration tests: a kfake cluster (or the
// real broker), the stage's topics, endpoint and breaker fakes, a recording
// webhook receiver, and helpers that wait on conditions with deadlines.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/deadtopic"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/poll"
	"github.com/laneway/laneway/internal/testkit/testenv"
	"github.com/laneway/laneway/partition"
)

// stageRig is one test's Kafka and topics.
type stageRig struct {
	t       *testing.T
	name    string // "kfake" or "real"
	brokers []string
	cluster *kfake.Cluster // nil on the real broker
	tops    topics.Config
	group   string
	cl      *kgo.Client // produces the test's deliveries (manual partitions)
	adm     *kadm.Client
}

// kfakeStageRig starts a kfake cluster of one broker for this test, with
// topics of the given partition count.
func kfakeStageRig(t *testing.T, partitions int32, opts ...kfake.Opt) *stageRig {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.DefaultNumPartitions(int(partitions))}, opts...)...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	r := newStageRig(t, "kfake", c.ListenAddrs(), partitions)
	r.cluster = c
	return r
}

// stageBackends are the backends a test runs on: kfake, and the real broker
// when LANEWAY_TEST_KAFKA_BROKERS is set.
func stageBackends(t *testing.T, partitions int32, fn func(t *testing.T, r *stageRig)) {
	t.Run("kfake", func(t *testing.T) { fn(t, kfakeStageRig(t, partitions)) })
	if b, ok := testenv.RealKafka(); ok {
		t.Run("real", func(t *testing.T) { fn(t, newStageRig(t, "real", b.Brokers, partitions)) })
	} else {
		t.Logf("%s not set: skipping the real-broker run", testenv.KafkaEnv)
	}
}

func newStageRig(t *testing.T, name string, brokers []string, partitions int32) *stageRig {
	t.Helper()
	ns := testenv.Unique("stage")
	tops := topics.Config{
		Events: ns + ".events", Deliveries: ns + ".deliveries", Parked: ns + ".parked", Dead: ns + ".dead",
		Endpoints: ns + ".endpoints", Inbound: ns + ".inbound", Sources: ns + ".sources", FeedPrefix: ns + ".feed.", BatchPrefix: ns + ".batch.",
		Partitions: partitions,
	}.WithDefaults()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	r := &stageRig{t: t, name: name, brokers: brokers, tops: tops, group: topics.GroupsFor(ns).Deliveries, cl: cl, adm: kadm.NewClient(cl)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := topics.Ensure(ctx, r.adm, tops); err != nil {
		t.Fatalf("topics: %v", err)
	}
	return r
}

// delivery is one delivery of the test, to partition p of deliveries.
func testDelivery(eventID, endpointID, entity string, revision int64) event.Delivery {
	now := time.Now().UTC()
	return event.Delivery{
		EventID: eventID, EndpointID: endpointID, Tenant: "acme", Type: "order.updated",
		Entity: entity, Revision: revision, OccurredAt: now, CreatedAt: now,
		Data: json.RawMessage(`{"n":1}`),
	}
}

// produce writes the deliveries to partition p of the deliveries topic.
func (r *stageRig) produce(p int32, ds ...event.Delivery) {
	r.t.Helper()
	recs := make([]*kgo.Record, len(ds))
	for i := range ds {
		value, err := json.Marshal(&ds[i])
		if err != nil {
			r.t.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: r.tops.Deliveries, Partition: p, Key: []byte(ds[i].EndpointID), Value: value}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		r.t.Fatalf("produce deliveries: %v", err)
	}
}

// endOffset is the end offset of topic/p.
func (r *stageRig) endOffset(topic string, p int32) int64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := r.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		r.t.Fatalf("end offsets of %s: %v", topic, err)
	}
	o, ok := ends.Lookup(topic, p)
	if !ok || o.Err != nil {
		r.t.Fatalf("end offset of %s/%d: %v", topic, p, o.Err)
	}
	return o.Offset
}

// readAll reads every record of topic written so far, partition by
// partition in offset order (read uncommitted: the stage's produces are not
// transactional).
func (r *stageRig) readAll(topic string) []*kgo.Record {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := r.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		r.t.Fatalf("end offsets of %s: %v", topic, err)
	}
	want := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			offsets[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		r.t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			r.t.Fatalf("reading %s: %v (left %v)", topic, ctx.Err(), want)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			out = append(out, rec)
			if rec.Offset+1 >= want[rec.Partition] {
				delete(want, rec.Partition)
			}
		})
	}
	slices.SortStableFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

// deadLetters reads every dead letter written so far.
func (r *stageRig) deadLetters() []event.DeadLetter {
	r.t.Helper()
	return deadtopic.Read(r.t, r.brokers, r.tops.Dead)
}

// waitDeadLetters waits until cond holds for the dead letters written.
func (r *stageRig) waitDeadLetters(within time.Duration, what string, cond func([]event.DeadLetter) bool) []event.DeadLetter {
	r.t.Helper()
	return deadtopic.Follow(r.t, r.brokers, r.tops.Dead).Until(r.t, within, what, cond)
}

// stageOpts are what a test changes in a stage's config.
type stageOpts struct {
	endpoints EndpointSource
	breakers  Breakers
	tweak     func(*DeliveryConfig)
}

// testStage is a running DeliveryStage with its own metrics registry.
type testStage struct {
	*DeliveryStage
	reg      *prometheus.Registry
	stopping atomic.Bool
	stopped  chan struct{} // closed when Stop has returned
	stopTook time.Duration
	// events are the stage's events, unless the test's tweak set its own
	// OnEvent.
	events eventLog
}

// startStage starts a delivery stage on the rig's topics and group. Its
// sender's timeout is the config's AttemptTimeout, as in the app.
func (r *stageRig) startStage(o stageOpts) *testStage {
	r.t.Helper()
	reg := prometheus.NewRegistry()
	cfg := DeliveryConfig{
		Brokers: r.brokers, Topics: r.tops, Group: r.group, Endpoints: o.endpoints, Breakers: o.breakers,
		InstanceID: r.group, CommitInterval: 100 * time.Millisecond, Metrics: NewMetrics(reg),
		Retry:  deliver.RetryPolicy{Base: 50 * time.Millisecond, Min: 50 * time.Millisecond, Max: 200 * time.Millisecond, MaxAttempts: 5, MaxAge: time.Hour},
		Logger: testenv.Logger(),
		// Quick fetches keep assignment and resume fast on kfake.
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)},
	}
	events := newEventLog()
	cfg.OnEvent = events.Add
	if o.tweak != nil {
		o.tweak(&cfg)
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = deliver.DefaultTimeout
	}
	if cfg.Sender == nil {
		sender, err := deliver.NewSender(deliver.Config{
			Timeout: cfg.AttemptTimeout, AllowTargets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		})
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(sender.Close)
		cfg.Sender = sender
	}
	s, err := NewDeliveryStage(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	reg.MustRegister(s.Collector())
	ts := &testStage{DeliveryStage: s, reg: reg, stopped: make(chan struct{}), events: events}
	if err := s.Start(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(ts.stop)
	return ts
}

// stop stops the stage unless a stop was started already (a test that
// gave up on a hanging Stop must not hang in its cleanup too).
func (ts *testStage) stop() {
	if ts.stopping.Swap(true) {
		return
	}
	start := time.Now()
	// It returns nil; and this may outlive a test that gave up on it, so
	// it reports nothing to the test.
	_ = ts.Stop(context.Background())
	ts.stopTook = time.Since(start)
	close(ts.stopped)
}

// stopWithin calls Stop and fails the test if it has not returned within
// bound; it returns how long Stop took.
func (ts *testStage) stopWithin(t *testing.T, bound time.Duration) time.Duration {
	t.Helper()
	go ts.stop()
	select {
	case <-ts.stopped:
		return ts.stopTook
	case <-time.After(bound):
		t.Fatalf("Stop has not returned within %v", bound)
		return 0
	}
}

// waitOwned waits until the stage owns partition p and has read its parked
// partition (fetching resumed).
func (ts *testStage) waitOwned(t *testing.T, p int32) {
	t.Helper()
	waitCond(t, time.Minute, fmt.Sprintf("the stage to own deliveries partition %d", p), func() (bool, string) {
		d := ts.owned(p)
		if d == nil {
			return false, "not assigned"
		}
		var ready bool
		d.do(func(o *partition.Owner) { ready = !o.Backpressured() })
		return ready, "assigned, parked partition not read yet"
	})
}

// counter returns the value of the counter name with the given labels (0
// when the series does not exist).
func (ts *testStage) counter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	v, _ := metricValue(t, ts.reg, name, labels...)
	return v
}

// metricValue finds a series of name whose labels include the given
// name/value pairs.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			}
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// waitCond polls cond until it holds or within passes; the failure names
// what was awaited and cond's last description.
func waitCond(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var desc string
	if poll.Until(ctx, 10*time.Millisecond, func() bool {
		var ok bool
		ok, desc = cond()
		return ok
	}) != nil {
		t.Fatalf("timed out after %v waiting for %s: %s", within, what, desc)
	}
}

// testEndpoint is an active endpoint at url with a fresh secret.
func testEndpoint(id, url string) endpoint.Endpoint {
	now := time.Now().UTC()
	return endpoint.Endpoint{
		ID: id, Tenant: "acme", URL: url, MaxConcurrency: 4, Status: endpoint.StatusActive,
		Secrets: []endpoint.Secret{{Value: endpoint.NewSecret()}}, CreatedAt: now, UpdatedAt: now,
	}
}

// fakeEndpoints is an in-memory EndpointSource that records every Disable.
// It also has a Put, which the stage must never call: a disable writes the
// status only (Put would write back a whole endpoint read earlier).
type fakeEndpoints struct {
	mu       sync.Mutex
	eps      map[string]endpoint.Endpoint
	disables []disableCall
	puts     []endpoint.Endpoint
	// beforeDisable, if set, runs at the start of Disable (under no lock):
	// a concurrent writer acting between the engine's read and its write.
	beforeDisable func(id string)
	// disableFails, if set, is asked before each Disable: an error fails
	// the write (the store unavailable) and leaves the endpoint as it is.
	disableFails func() error
}

type disableCall struct {
	id, reason string
	at         time.Time
	err        error
	changed    bool
}

func newFakeEndpoints(eps ...endpoint.Endpoint) *fakeEndpoints {
	f := &fakeEndpoints{eps: map[string]endpoint.Endpoint{}}
	for _, e := range eps {
		f.eps[e.ID] = e
	}
	return f
}

func (f *fakeEndpoints) Get(id string) (endpoint.Endpoint, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.eps[id]
	return e, ok
}

func (f *fakeEndpoints) Disable(_ context.Context, id, reason string, at time.Time) (endpoint.Endpoint, bool, error) {
	if f.beforeDisable != nil {
		f.beforeDisable(id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	call := disableCall{id: id, reason: reason, at: at}
	e, ok := f.eps[id]
	if f.disableFails != nil {
		call.err = f.disableFails()
	}
	switch {
	case call.err != nil:
	case !ok:
		call.err = endpoint.ErrNotFound
	case e.Status != endpoint.StatusDisabled:
		e.Status, e.DisabledReason, e.UpdatedAt = endpoint.StatusDisabled, reason, at.UTC()
		f.eps[id] = e
		call.changed = true
	}
	f.disables = append(f.disables, call)
	return e, call.changed, call.err
}

// Put is never called by the stage; a call is recorded so the test fails.
func (f *fakeEndpoints) Put(_ context.Context, e endpoint.Endpoint) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, e)
	f.eps[e.ID] = e
	return nil
}

func (f *fakeEndpoints) delete(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.eps, id)
}

func (f *fakeEndpoints) calls() ([]disableCall, []endpoint.Endpoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.disables), slices.Clone(f.puts)
}

// fakeBreakers is a Breakers that lets everything through and records the
// calls that matter for handover: Warm, Record, Flush and Forget, in order.
type fakeBreakers struct {
	mu      sync.Mutex
	loaded  map[string]bool
	records []string // endpoint ids, one per Record
	events  []string // "warm:<id>", "flush", "forget:<id>,<id>" in call order
	forgets [][]string
}

func newFakeBreakers() *fakeBreakers { return &fakeBreakers{loaded: map[string]bool{}} }

func (b *fakeBreakers) Allow(string, time.Time, int, int) breaker.Decision {
	return breaker.Decision{Allowed: true}
}

func (b *fakeBreakers) Record(id string, _ bool, _ time.Time) breaker.Breaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.records = append(b.records, id)
	return breaker.Breaker{}
}

func (b *fakeBreakers) Get(string) breaker.Breaker { return breaker.Breaker{} }

func (b *fakeBreakers) Loaded(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loaded[id]
}

func (b *fakeBreakers) Reset(string) {}

func (b *fakeBreakers) Warm(_ context.Context, ids []string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, id := range ids {
		b.loaded[id] = true
		b.events = append(b.events, "warm:"+id)
	}
	return nil
}

func (b *fakeBreakers) Flush(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, "flush")
	return nil
}

func (b *fakeBreakers) Forget(ids ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	sorted := slices.Sorted(slices.Values(ids))
	for _, id := range ids {
		delete(b.loaded, id)
	}
	b.forgets = append(b.forgets, sorted)
	b.events = append(b.events, "forget:"+strings.Join(sorted, ","))
}

func (b *fakeBreakers) snapshot() (records, events []string, forgets [][]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.records), slices.Clone(b.events), slices.Clone(b.forgets)
}

var _ Breakers = (*fakeBreakers)(nil)

// receiver is a webhook receiver whose answer the test decides per
// request: a fleet.Recorder, which records every request with its answer.
type receiver struct{ *fleet.Recorder }

// newReceiver starts a receiver; handle gets each request's index.
func newReceiver(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	t.Helper()
	rc := fleet.NewRecorder(fleet.RecorderConfig{Answer: func(w http.ResponseWriter, r *http.Request, rq *fleet.Request) {
		handle(w, r, rq.N)
	}})
	t.Cleanup(rc.Close)
	return &receiver{rc}
}

// waitEnded waits until the handler of request n returned and saw its
// request's context end (the client gave the attempt up).
func (rc *receiver) waitEnded(t *testing.T, n int) {
	t.Helper()
	waitCond(t, 30*time.Second, fmt.Sprintf("request %d's context to end", n), func() (bool, string) {
		rq := rc.requests()[n]
		return !rq.Done.IsZero() && rq.Ended, fmt.Sprintf("%+v", rq)
	})
}

// waitEndedID waits until a request of delivery msgID saw its context end.
func (rc *receiver) waitEndedID(t *testing.T, msgID string) {
	t.Helper()
	waitCond(t, 30*time.Second, msgID+"'s request context to end", func() (bool, string) {
		return rc.endedID(msgID), fmt.Sprintf("%+v", rc.requests())
	})
}

func (rc *receiver) endedID(msgID string) bool {
	for _, rq := range rc.requests() {
		if rq.MsgID == msgID && !rq.Done.IsZero() && rq.Ended {
			return true
		}
	}
	return false
}

// answered counts the requests of delivery msgID answered with code.
func (rc *receiver) answered(msgID string, code int) int {
	n := 0
	for _, rq := range rc.requests() {
		if rq.MsgID == msgID && rq.Answered(code) {
			n++
		}
	}
	return n
}

func (rc *receiver) requests() []fleet.Request { return rc.Requests(nil) }

// next waits for the next request to arrive and returns its index.
func (rc *receiver) next(t *testing.T, within time.Duration, what string) int {
	t.Helper()
	select {
	case n := <-rc.Arrivals():
		return n
	case <-time.After(within):
		t.Fatalf("no request within %v: %s", within, what)
		return -1
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
