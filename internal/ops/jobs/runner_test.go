package jobs

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// offsets returns from, from+1, ..., to-1.
func offsets(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

func TestJobsRunToTheEndAndSaveProgress(t *testing.T) {
	f := newFixture(t, 25)
	k := f.copier(t, 10)
	r := f.runner(t, k)
	job := start(t, r, request{Name: "all"})
	if job.Status != StatusRunning || !job.Until.Equal(t0) {
		t.Fatalf("submit: %+v; want it running, until now", job)
	}
	done := waitStatus(t, r, job.ID, StatusDone)
	if done.Sent != 25 || done.Scanned != 25 || done.Cursor != "" || done.FinishedAt == nil || !done.FinishedAt.Equal(t0) {
		t.Fatalf("done %+v", done)
	}
	if got := k.copied(); !slices.Equal(got, offsets(0, 25)) {
		t.Fatalf("copied %v", got)
	}
	testenv.Stop(t, r.Stop) // the job's goroutine has saved its end
	if s := f.stored(t, r, job.ID); s.Status != StatusDone || s.Sent != 25 {
		t.Fatalf("stored %+v", s)
	}
	if f.mr.Exists("test:lease:" + job.ID) {
		t.Fatal("a finished job keeps its lease")
	}
	until := t0.Add(-time.Hour)
	withUntil := f.runner(t, k, func(c *Config[request, Job[request]]) {
		c.Prepare = func(r request) (request, *time.Time, error) { return r, &until, nil }
	})
	if j, _, err := withUntil.Submit(context.Background(), request{Name: "until"}, ""); err != nil || !j.Until.Equal(until) {
		t.Fatalf("until given: %+v, %v", j, err)
	}
}

func TestJobsAreIdempotentByRequestAndKey(t *testing.T) {
	f := newFixture(t, 5)
	k := f.copier(t, 10)
	r := f.runner(t, k)
	ctx := context.Background()
	a, _, err := r.Submit(ctx, request{Name: "a"}, "")
	if err != nil || a.ID != ID("cp_", request{Name: "a"}, "") {
		t.Fatalf("submit: %+v, %v", a, err)
	}
	if again, created, err := r.Submit(ctx, request{Name: "a"}, ""); err != nil || created || again.ID != a.ID {
		t.Fatalf("same request: %+v created %v, %v; want the same job, not started again", again, created, err)
	}
	waitStatus(t, r, a.ID, StatusDone)
	steps := k.stepCount()
	if again, created, err := r.Submit(ctx, request{Name: "a"}, ""); err != nil || created || again.Status != StatusDone || again.Sent != 5 {
		t.Fatalf("same request when done: %+v created %v, %v", again, created, err)
	}
	keyed, _, err := r.Submit(ctx, request{Name: "b"}, "k1")
	if err != nil || keyed.ID == a.ID {
		t.Fatalf("keyed: %+v, %v", keyed, err)
	}
	if same, created, err := r.Submit(ctx, request{Name: "b"}, "k1"); err != nil || created || same.ID != keyed.ID {
		t.Fatalf("same key, same request: %+v created %v, %v; want the keyed job", same, created, err)
	}
	// A key reused for another request is refused: answering with the
	// keyed job would drop the other request silently.
	if other, _, err := r.Submit(ctx, request{Name: "other"}, "k1"); !errors.Is(err, ErrKeyReused) {
		t.Fatalf("same key, other request: %+v, %v; want ErrKeyReused", other, err)
	}
	waitStatus(t, r, keyed.ID, StatusDone)
	if n := k.stepCount() - steps; n != 1 {
		t.Fatalf("%d steps after the first job, want 1 (the keyed job's)", n)
	}
}

func TestJobsLeaseLetsOneInstanceRunAJob(t *testing.T) {
	f := newFixture(t, 20)
	ka, kb := f.held(t, 10), f.copier(t, 10)
	a, b := f.runner(t, ka), f.runner(t, kb)
	job := start(t, a, request{Name: "x"})
	ctx := context.Background()
	if c := receive(t, ka.entered); c != "" {
		t.Fatalf("first step at %q", c)
	}
	if got, created, err := b.Submit(ctx, request{Name: "x"}, ""); err != nil || created || got.ID != job.ID || got.Status != StatusRunning {
		t.Fatalf("second instance: %+v created %v, %v; want the job reported, not run", got, created, err)
	}
	ka.gate <- struct{}{}
	if c := receive(t, ka.entered); c != "10" {
		t.Fatalf("second step at %q", c)
	}
	ka.gate <- struct{}{}
	waitStatus(t, a, job.ID, StatusDone)
	testenv.Stop(t, a.Stop) // the job's goroutine has saved its end
	if got, ok, err := b.Get(ctx, job.ID); err != nil || !ok || got.Status != StatusDone || got.Sent != 20 {
		t.Fatalf("read on the second instance: %+v found %v, %v", got, ok, err)
	}
	if n := kb.stepCount(); n != 0 {
		t.Fatalf("the second instance ran %d steps", n)
	}
}

func TestJobsRunOnceInAProcessWhenTheirLeaseLapses(t *testing.T) {
	f := newFixture(t, 10)
	k := f.held(t, 10)
	r := f.runner(t, k)
	job := start(t, r, request{Name: "x"})
	receive(t, k.entered)
	f.mr.FastForward(time.Minute) // a long step: the lease lapses
	ctx := context.Background()
	if got, created, err := r.Submit(ctx, request{Name: "x"}, ""); err != nil || created || got.Status != StatusRunning {
		t.Fatalf("repeat while it runs here: %+v created %v, %v; want it reported", got, created, err)
	}
	// Its step ends with the lease lapsed, which another runner may have
	// taken: the job stops here with nothing saved, and a repeat resumes it.
	k.gate <- struct{}{}
	waitGone(t, r, job.ID)
	if s := f.stored(t, r, job.ID); s.Status != StatusRunning || s.Cursor != "" || s.Sent != 0 {
		t.Fatalf("stored after the lease lapsed %+v: want it untouched", s)
	}
	if got, created, err := r.Submit(ctx, request{Name: "x"}, ""); err != nil || !created {
		t.Fatalf("repeat after it stopped: %+v created %v, %v; want it resumed", got, created, err)
	}
	receive(t, k.entered)
	k.gate <- struct{}{}
	if done := waitStatus(t, r, job.ID, StatusDone); done.AlreadySent != 10 || !slices.Equal(k.copied(), offsets(0, 10)) {
		t.Fatalf("job %+v after copying %v: want every offset copied once", done, k.copied())
	}
}

func TestJobsStopDrainsAndARepeatResumesFromTheSavedCursor(t *testing.T) {
	f := newFixture(t, 30)
	ka := f.held(t, 10)
	ka.release = make(chan struct{})
	a := f.runner(t, ka)
	req := request{Name: "x", IDs: []string{"1", "2"}}
	job := start(t, a, req)
	ctx := context.Background()
	receive(t, ka.entered)
	ka.gate <- struct{}{}
	receive(t, ka.entered) // the second step is held

	stopped := make(chan struct{})
	go func() {
		testenv.Stop(t, a.Stop)
		close(stopped)
	}()
	select {
	case <-a.ctx.Done(): // Stop has cancelled the held step
	case <-time.After(30 * time.Second):
		t.Fatal("Stop did not cancel the jobs")
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while a job's step still ran")
	default:
	}
	close(ka.release)
	<-stopped
	a.mu.Lock()
	left := len(a.running)
	a.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d jobs still running after Stop", left)
	}
	if s := f.stored(t, a, job.ID); s.Status != StatusRunning || s.Cursor != "10" || s.Sent != 10 {
		t.Fatalf("stored after Stop %+v: want running, at cursor 10", s)
	}

	kb := f.copier(t, 10)
	b := f.runner(t, kb)
	if got, created, err := b.Submit(ctx, req, ""); err != nil || created {
		t.Fatalf("repeat within the lease: %+v created %v, %v; want it left to its runner", got, created, err)
	}
	f.mr.FastForward(time.Minute) // the stopped runner's lease expires
	got, created, err := b.Submit(ctx, req, "")
	if err != nil || !created || got.Sent != 10 {
		t.Fatalf("repeat after the lease: %+v created %v, %v; want it resumed", got, created, err)
	}
	if done := waitStatus(t, b, job.ID, StatusDone); done.Sent != 30 || done.AlreadySent != 0 {
		t.Fatalf("resumed job %+v: want 30 sent in all, none twice", done)
	}
	if got := kb.copied(); !slices.Equal(got, offsets(10, 30)) {
		t.Fatalf("the resumed job copied %v, want offsets 10 to 29", got)
	}
}

func TestJobsFailedStepFailsTheJobAndARepeatResumesIt(t *testing.T) {
	f := newFixture(t, 30)
	k := f.copier(t, 10)
	k.failAt = "20"
	r := f.runner(t, k)
	job := start(t, r, request{Name: "x"})
	failed := waitStatus(t, r, job.ID, StatusFailed)
	if failed.Error != "boom" || failed.Cursor != "20" || failed.Sent != 20 || failed.FinishedAt != nil {
		t.Fatalf("failed job %+v", failed)
	}
	testenv.Stop(t, r.Stop) // the job's goroutine has saved its end and dropped its lease
	k2 := f.copier(t, 10)
	r2 := f.runner(t, k2)
	again, created, err := r2.Submit(context.Background(), request{Name: "x"}, "")
	if err != nil || !created || again.Status != StatusRunning || again.Error != "" {
		t.Fatalf("repeat of a failed job: %+v created %v, %v; want it resumed at once", again, created, err)
	}
	if done := waitStatus(t, r2, job.ID, StatusDone); done.Sent != 30 {
		t.Fatalf("resumed job %+v: want 30 sent in all", done)
	}
	if got := k2.copied(); !slices.Equal(got, offsets(20, 30)) {
		t.Fatalf("the resumed job copied %v, want offsets 20 to 29", got)
	}
}

func TestJobsRefuseSubmitsBeforeStartAndAfterStop(t *testing.T) {
	f := newFixture(t, 1)
	r, err := New(Config[request, Job[request]]{
		Kind: f.copier(t, 1), Redis: f.rdb, Name: "copy", IDPrefix: "cp_", JobKeyPrefix: "test:job:", LeaseKeyPrefix: "test:lease:",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := r.Submit(ctx, request{Name: "x"}, ""); !errors.Is(err, ErrStopped) {
		t.Fatalf("before Start: %v", err)
	}
	for _, step := range []func(context.Context) error{r.Start, r.Stop, r.Start} {
		if err := step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := r.Submit(ctx, request{Name: "x"}, ""); !errors.Is(err, ErrStopped) {
		t.Fatalf("after Stop: %v", err)
	}
	if keys := f.mr.Keys(); len(keys) != 0 {
		t.Fatalf("refused submits wrote %v", keys)
	}
	if _, err := New(Config[request, Job[request]]{Kind: f.copier(t, 1), Redis: f.rdb}); err == nil {
		t.Fatal("a config without names and keys accepted")
	}
}

func TestJobsMarkersRememberForTheirTTLAndForgiveRedisFailures(t *testing.T) {
	f := newFixture(t, 1)
	m := Markers{Redis: f.rdb, TTL: time.Hour, Name: "copy", Logger: f.logger}
	ctx := context.Background()
	m.Mark(ctx, []string{"a", "c"})
	if got := m.Sent(ctx, []string{"a", "b", "c"}); !slices.Equal(got, []bool{true, false, true}) {
		t.Fatalf("sent %v", got)
	}
	f.mr.FastForward(time.Hour)
	if got := m.Sent(ctx, []string{"a"}); got[0] {
		t.Fatal("a marker outlived its TTL")
	}
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	m.Redis = down
	m.Mark(ctx, []string{"a"})
	if got := m.Sent(ctx, []string{"a", "b"}); !slices.Equal(got, []bool{false, false}) {
		t.Fatalf("sent %v without Redis, want none", got)
	}
}
