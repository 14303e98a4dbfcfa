package deadletter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/ops/jobs/jobrecord"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type endpoints map[string]endpoint.Endpoint

func (e endpoints) Get(id string) (endpoint.Endpoint, bool) { ep, ok := e[id]; return ep, ok }

type fixture struct {
	client     *kgo.Client
	dead, dels string
	finder     *Finder
	redis      *redis.Client
	eps        endpoints
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	b := testenv.Kfake(t)
	if real, ok := testenv.RealKafka(); ok {
		b = real
	}
	f := &fixture{dead: testenv.Unique("dead"), dels: testenv.Unique("deliveries"), eps: endpoints{}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	f.client = cl
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, -1, testenv.KeepForever(), f.dead); err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 4, -1, nil, f.dels); err != nil {
		t.Fatal(err)
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	f.finder = NewFinder(reader, f.dead)
	mr := miniredis.RunT(t)
	f.redis = redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = f.redis.Close() })
	return f
}

// kill writes n dead letters for endpoint ep, cycling over entities, 100 ms
// apart from start; revisions rise per entity.
func (f *fixture) kill(t *testing.T, ep, reason string, start time.Time, n, entities int) []event.DeadLetter {
	t.Helper()
	f.eps[ep] = endpoint.Endpoint{ID: ep, Status: endpoint.StatusActive}
	var recs []*kgo.Record
	var out []event.DeadLetter
	for i := range n {
		d := &event.Delivery{
			EventID: fmt.Sprintf("ev-%s-%d", ep, i), EndpointID: ep, Entity: fmt.Sprintf("ent-%d", i%entities),
			Revision: int64(i / entities), Type: "t", Tenant: "acme", Attempts: 20, LastError: "boom",
		}
		at := start.Add(time.Duration(i) * 100 * time.Millisecond)
		l := event.DeadLetter{ID: d.EventID + ":" + ep, Reason: reason, DeadAt: at, EndpointID: ep, Delivery: d}
		raw, _ := json.Marshal(l)
		recs = append(recs, &kgo.Record{Topic: f.dead, Key: []byte(ep), Value: raw, Timestamp: at})
		out = append(out, l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := f.client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f *fixture) redriver(t *testing.T, tweak func(*Config)) *Redriver {
	t.Helper()
	cfg := Config{
		Finder: f.finder, Producer: f.client, DeliveriesTopic: f.dels, Endpoints: f.eps, Redis: f.redis,
		PageSize: 100, Now: func() time.Time { return t0.Add(time.Hour) },
	}
	if tweak != nil {
		tweak(&cfg)
	}
	r, err := NewRedriver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Start(t, r.Start, r.Stop)
	return r
}

// redriven reads every delivery written to the deliveries topic.
func (f *fixture) redriven(t *testing.T, want int) []event.Delivery {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.client.OptValue(kgo.SeedBrokers).([]string)...),
		kgo.ConsumeTopics(f.dels), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []event.Delivery
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d redriven deliveries, want %d", len(out), want)
		}
		fs.EachRecord(func(r *kgo.Record) {
			d, err := event.ParseDelivery(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		})
	}
	return out
}

func waitJob(t *testing.T, r *Redriver, id string) Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		j, ok, err := r.Get(context.Background(), id)
		if err != nil || !ok {
			t.Fatalf("job %s: found %v, %v", id, ok, err)
		}
		if j.Status != jobs.StatusRunning {
			return j
		}
		time.Sleep(10 * time.Millisecond) // polling a job's progress, not synchronising on time
	}
	t.Fatalf("job %s still running", id)
	return Job{}
}

func TestFindFiltersAndPagesOneEndpointPartition(t *testing.T) {
	f := newFixture(t)
	f.kill(t, "ep_a", event.ReasonMaxAttempts, t0, 50, 5)
	f.kill(t, "ep_b", event.ReasonGone, t0, 50, 5)
	ctx := context.Background()
	var got []Letter
	cursor := ""
	for {
		page, err := f.finder.Find(ctx, Filter{EndpointID: "ep_a", Since: t0.Add(time.Second), Until: t0.Add(2900 * time.Millisecond)}, cursor, 7)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page.Items...)
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if len(got) != 20 || got[0].Delivery.EventID != "ev-ep_a-10" || got[19].Delivery.EventID != "ev-ep_a-29" {
		t.Fatalf("got %d letters: first %+v", len(got), got[:min(1, len(got))])
	}
	for _, l := range got {
		if l.EndpointID != "ep_a" {
			t.Fatalf("letter of %s in ep_a's search", l.EndpointID)
		}
	}
	page, err := f.finder.Find(ctx, Filter{Reason: event.ReasonGone}, "", 1000)
	if err != nil || len(page.Items) != 50 {
		t.Fatalf("reason filter: %d letters, %v", len(page.Items), err)
	}
}

func TestRedriveRangeKeepsOrderAndIsIdempotent(t *testing.T) {
	f := newFixture(t)
	letters := f.kill(t, "ep_a", event.ReasonEndpointDisabled, t0, 12_000, 40)
	f.kill(t, "ep_b", event.ReasonEndpointDisabled, t0, 10, 2)
	r := f.redriver(t, func(c *Config) { c.PageSize = 1000 })
	ctx := context.Background()
	req := Request{EndpointID: "ep_a"}
	job, created, err := r.Submit(ctx, req, "")
	if err != nil || !created {
		t.Fatalf("submit: created %v, %v", created, err)
	}
	again, created, err := r.Submit(ctx, req, "")
	if err != nil || created || again.ID != job.ID {
		t.Fatalf("second submit: %+v created %v, %v; want the same job", again, created, err)
	}
	done := waitJob(t, r, job.ID)
	if done.Status != jobs.StatusDone || done.Redriven != 12_000 || done.Matched != 12_000 {
		t.Fatalf("job ended %+v", done)
	}
	got := f.redriven(t, 12_000)
	for i, d := range got {
		want := letters[i].Delivery
		if d.EventID != want.EventID || d.Attempts != 0 || d.LastError != "" || !d.CreatedAt.Equal(t0.Add(time.Hour)) {
			t.Fatalf("delivery %d = %+v, want %s reset for a fresh start", i, d, want.EventID)
		}
	}
	// A finished job answers again without sending anything.
	if j, created, _ := r.Submit(ctx, req, ""); created || j.Status != jobs.StatusDone {
		t.Fatalf("resubmitting a finished job: %+v created %v", j, created)
	}
	// A different request over the same letters skips what was sent.
	until := t0.Add(time.Hour)
	j2, _, err := r.Submit(ctx, Request{EndpointID: "ep_a", Until: &until}, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := waitJob(t, r, j2.ID); d.AlreadyRedriven != 12_000 || d.Redriven != 0 {
		t.Fatalf("overlapping redrive %+v: want every letter already redriven", d)
	}
}

func TestRedriveByIDsSkipsDisabledEndpoints(t *testing.T) {
	f := newFixture(t)
	a := f.kill(t, "ep_a", event.ReasonMaxAttempts, t0, 20, 4)
	b := f.kill(t, "ep_b", event.ReasonMaxAttempts, t0, 5, 1)
	f.eps["ep_b"] = endpoint.Endpoint{ID: "ep_b", Status: endpoint.StatusDisabled}
	r := f.redriver(t, nil)
	ids := []string{a[3].ID, a[17].ID, a[5].ID, b[0].ID, "ev-x:ep_a"}
	job, _, err := r.Submit(context.Background(), Request{IDs: ids}, "key-1")
	if err != nil {
		t.Fatal(err)
	}
	done := waitJob(t, r, job.ID)
	if done.Matched != 4 || done.Redriven != 3 || done.Skipped != 1 {
		t.Fatalf("job %+v: want 4 matched, 3 redriven, 1 skipped (disabled endpoint)", done)
	}
	got := f.redriven(t, 3)
	if got[0].EventID != a[3].Delivery.EventID || got[1].EventID != a[5].Delivery.EventID || got[2].EventID != a[17].Delivery.EventID {
		t.Fatalf("redriven %s %s %s: want dead order 3, 5, 17", got[0].EventID, got[1].EventID, got[2].EventID)
	}
}

func TestRedriveResumesAJobWhoseRunnerWentAway(t *testing.T) {
	f := newFixture(t)
	f.kill(t, "ep_a", event.ReasonMaxAttempts, t0, 300, 3)
	ctx := context.Background()
	// A runner that got one page done and died: progress saved, lease gone.
	first := f.redriver(t, nil)
	req := Request{EndpointID: "ep_a"}
	page, err := f.finder.Find(ctx, Filter{EndpointID: "ep_a", Until: t0.Add(time.Hour)}, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.redrive(ctx, page.Items); err != nil {
		t.Fatal(err)
	}
	norm, _, _ := jobs.Prepare(Validate, selection)(req)
	id := jobID(norm, "")
	first.save(ctx, Job{
		Head:     jobrecord.Head[Request]{ID: id, Status: jobs.StatusRunning, Request: req, Until: t0.Add(time.Hour), Matched: 100},
		Redriven: 100, Tail: jobrecord.Tail{Cursor: page.Next},
	})

	job, created, err := f.redriver(t, nil).Submit(ctx, req, "")
	if err != nil || !created || job.ID != id {
		t.Fatalf("resubmit: %+v created %v, %v; want the job resumed", job, created, err)
	}
	done := waitJob(t, first, id) // read through Redis: another redriver runs it
	if done.Status != jobs.StatusDone || done.Redriven != 300 || done.AlreadyRedriven != 0 {
		t.Fatalf("resumed job %+v: want 300 redriven in total and nothing twice", done)
	}
	if got := f.redriven(t, 300); len(got) != 300 {
		t.Fatalf("%d deliveries", len(got))
	}
}

func TestRequestValidation(t *testing.T) {
	now := t0
	before := t0.Add(-time.Hour)
	for _, req := range []Request{
		{},
		{IDs: []string{"a:b"}, EndpointID: "ep"},
		{IDs: []string{""}},
		{EndpointID: "ep", Since: &now, Until: &before},
		{IDs: make([]string, MaxRequestIDs+1)},
	} {
		var re *jobs.RequestError
		if err := Validate(req); !errors.As(err, &re) {
			t.Errorf("%+v: err %v, want a RequestError", req, err)
		}
	}
	if err := Validate(Request{EndpointID: "ep", Since: &before, Until: &now}); err != nil {
		t.Errorf("valid request refused: %v", err)
	}
}
