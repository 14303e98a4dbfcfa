package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type request struct {
	Name string   `json:"name"`
	IDs  []string `json:"ids,omitempty"`
}

// copier is a kind that copies a topic's partition 0, a page a step, to
// sent (its effect), marking each offset so nothing is copied twice. Its
// cursor is the next offset. Its record is the runner's Job itself.
type copier struct {
	reader  *kread.Reader
	markers Markers
	page    int

	mu      sync.Mutex
	sent    []int64
	steps   int
	entered chan string   // when not nil: each step says its cursor here...
	gate    chan struct{} // ...then waits for a value here, or for cancellation
	release chan struct{} // when not nil: a cancelled step waits for it to close
	failAt  string        // a step at this cursor fails, once
	// cancelled, when not nil, gets the cursor of each held step whose
	// context ended.
	cancelled chan string
	prefix    string // of the marker keys
}

func (k *copier) Step(ctx context.Context, job Job[request]) (Step, error) {
	if err := k.wait(ctx, job.Cursor); err != nil {
		return Step{}, err
	}
	from, _ := strconv.ParseInt(job.Cursor, 10, 64)
	res, err := k.reader.Read(ctx, 0, from, 1<<20)
	if err != nil {
		return Step{}, err
	}
	recs := res.Records[:min(k.page, len(res.Records))]
	if len(recs) == 0 {
		return Step{}, nil
	}
	var s Step
	for i, already := range k.markers.Sent(ctx, k.keys(recs)) {
		if already {
			s.AlreadySent++
			continue
		}
		k.mu.Lock()
		k.sent = append(k.sent, recs[i].Offset)
		k.mu.Unlock()
		s.Sent++
	}
	k.markers.Mark(ctx, k.keys(recs))
	s.Scanned, s.Matched = int64(len(recs)), int64(len(recs))
	if next := recs[len(recs)-1].Offset + 1; next < res.HighWatermark {
		s.Next = strconv.FormatInt(next, 10)
	}
	return s, nil
}

// wait lets the test hold a step, and fails the one at failAt.
func (k *copier) wait(ctx context.Context, cursor string) error {
	k.mu.Lock()
	k.steps++
	fail := cursor != "" && cursor == k.failAt
	if fail {
		k.failAt = ""
	}
	k.mu.Unlock()
	if fail {
		return errors.New("boom")
	}
	if k.entered == nil {
		return nil
	}
	select {
	case k.entered <- cursor:
	case <-ctx.Done(): // stopped before the test took the step
		return ctx.Err()
	}
	select {
	case <-k.gate:
		return nil
	case <-ctx.Done():
		if k.cancelled != nil {
			k.cancelled <- cursor
		}
		if k.release != nil {
			<-k.release
		}
		return ctx.Err()
	}
}

func (k *copier) keys(recs []*kgo.Record) []string {
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = k.prefix + "copied:" + strconv.FormatInt(r.Offset, 10)
	}
	return keys
}

func (k *copier) Record(j Job[request]) Job[request]     { return j }
func (k *copier) FromRecord(j Job[request]) Job[request] { return j }

func (k *copier) stepCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.steps
}

func (k *copier) copied() []int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]int64(nil), k.sent...)
}

type fixture struct {
	brokers []string
	topic   string
	mr      *miniredis.Miniredis // nil on the real Redis
	rdb     *redis.Client
	prefix  string // of every Redis key: "test:" on miniredis
	logger  *slog.Logger
}

// newFixture writes n records to partition 0 of a new topic on kfake (or
// the real broker, when the test command gives one) and starts miniredis,
// whose clock the lease tests move.
func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	b := testenv.Kfake(t)
	if real, ok := testenv.RealKafka(); ok {
		b = real
	}
	f := &fixture{brokers: b.Brokers, topic: testenv.Unique("jobs"), mr: miniredis.RunT(t), prefix: "test:",
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	f.rdb = redis.NewClient(&redis.Options{Addr: f.mr.Addr()})
	t.Cleanup(func() { _ = f.rdb.Close() })
	f.produce(t, n)
	return f
}

// fixtures are a fixture on miniredis and, when LANEWAY_TEST_REDIS_URL is
// set, one on the real Redis, its keys under a prefix of their own.
func fixtures(t *testing.T, n int) map[string]*fixture {
	t.Helper()
	out := map[string]*fixture{}
	for _, rb := range testenv.Redises(t) {
		f := newFixture(t, n)
		if rb.Name != "miniredis" {
			f.mr, f.rdb, f.prefix = nil, testenv.RedisClient(t, rb), testenv.Unique("jobs")+":"
		}
		out[rb.Name] = f
	}
	return out
}

// produce writes n records to partition 0 of the fixture's new topic.
func (f *fixture) produce(t *testing.T, n int) {
	t.Helper()
	cl := f.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, f.topic); err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: f.topic, Value: fmt.Appendf(nil, "r%d", i)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) client(t *testing.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (f *fixture) copier(t *testing.T, page int) *copier {
	return &copier{
		reader:  kread.NewReader(f.client(t), f.topic),
		markers: Markers{Redis: f.rdb, TTL: time.Hour, Name: "copy", Logger: f.logger},
		page:    page,
		prefix:  f.prefix,
	}
}

// held is a copier whose steps wait for the test (copier.entered).
func (f *fixture) held(t *testing.T, page int) *copier {
	k := f.copier(t, page)
	k.entered, k.gate = make(chan string), make(chan struct{})
	return k
}

// runner starts a runner of kind k; it stops when the test ends.
func (f *fixture) runner(t *testing.T, k *copier, tweaks ...func(*Config[request, Job[request]])) *Runner[request, Job[request]] {
	t.Helper()
	cfg := Config[request, Job[request]]{
		Kind: k, Redis: f.rdb, Name: "copy", IDPrefix: "cp_", JobKeyPrefix: f.prefix + "job:", LeaseKeyPrefix: f.prefix + "lease:",
		Lease: time.Minute, Logger: f.logger, Now: func() time.Time { return t0 },
	}
	for _, tweak := range tweaks {
		tweak(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Start(t, r.Start, r.Stop)
	return r
}

// waitStatus waits, on the runner's saves, until job id has status.
func waitStatus(t *testing.T, r *Runner[request, Job[request]], id, status string) Job[request] {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		changed := r.Watch()
		j, ok, err := r.Get(context.Background(), id)
		if err != nil || !ok {
			t.Fatalf("job %s: found %v, %v", id, ok, err)
		}
		if j.Status == status {
			return j
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("job %s is %s, want %s", id, j.Status, status)
		}
	}
}

// stored reads a job's record from Redis, as another instance would.
func (f *fixture) stored(t *testing.T, r *Runner[request, Job[request]], id string) Job[request] {
	t.Helper()
	j, ok, err := r.load(context.Background(), id)
	if err != nil || !ok {
		t.Fatalf("stored job %s: found %v, %v", id, ok, err)
	}
	return j
}

// start submits req and fails the test unless that started its job.
func start(t *testing.T, r *Runner[request, Job[request]], req request) Job[request] {
	t.Helper()
	job, created, err := r.Submit(context.Background(), req, "")
	if err != nil || !created {
		t.Fatalf("submit %+v: created %v, %v", req, created, err)
	}
	return job
}

// receive waits for a held step to say its cursor.
func receive(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no step started")
		return ""
	}
}
