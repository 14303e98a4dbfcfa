package deadletter

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// redrive sends letters as one step of a job would, for tests that fake a
// runner that died after some steps.
func (r *Redriver) redrive(ctx context.Context, letters []Letter) (jobs.Progress, error) {
	return r.kind.Send(ctx, jobs.Job[Request]{}, letters)
}

// save writes a job record straight to Redis, where and as the versions
// before the jobs package wrote it.
func (r *Redriver) save(ctx context.Context, j Job) {
	raw, err := json.Marshal(j)
	if err != nil {
		panic(err)
	}
	key := r.kind.cfg.KeyPrefix + "redrive:" + r.kind.cfg.Finder.topic + ":" + j.ID
	if err := r.kind.cfg.Redis.Set(ctx, key, raw, r.kind.cfg.JobTTL).Err(); err != nil {
		panic(err)
	}
}

func jobID(req Request, key string) string { return jobs.ID("rd_", req, key) }

// TestRedriveJobIDsAreUnchanged pins ids computed by the versions before
// the jobs package: a repeated request after an upgrade must find its job.
func TestRedriveJobIDsAreUnchanged(t *testing.T) {
	r := newFixture(t).redriver(t, nil)
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	for want, req := range map[string]struct {
		req Request
		key string
	}{
		"rd_e03d3607aaef7f3f5a1d68df": {Request{EndpointID: "ep_a"}, ""},
		"rd_ee6af1f50f3e5772a7d4aaf5": {Request{IDs: []string{"b:ep", "a:ep", "b:ep"}}, ""},
		"rd_9af65b88326099c62ef2c9d2": {Request{EndpointID: "ep_a", Reason: "max_attempts", Since: &since}, ""},
		"rd_cfe958f0a4227e1070ee6616": {Request{EndpointID: "ep_a"}, "key-1"},
	} {
		job, _, err := r.Submit(context.Background(), req.req, req.key)
		if err != nil || job.ID != want {
			t.Errorf("%+v: id %s, %v; want %s", req, job.ID, err, want)
		}
	}
}

// TestRedriveReadsAndWritesTheRecordFormat reads a finished job as an older
// version stored it, and checks a job this version runs is stored with the
// same fields.
func TestRedriveReadsAndWritesTheRecordFormat(t *testing.T) {
	f := newFixture(t)
	f.kill(t, "ep_a", event.ReasonMaxAttempts, t0, 30, 3)
	r := f.redriver(t, nil)
	ctx := context.Background()
	old := Request{EndpointID: "ep_old"}
	key := "laneway:redrive:" + f.dead + ":" + jobID(old, "")
	stored := `{"id":"` + jobID(old, "") + `","status":"done","request":{"endpoint_id":"ep_old"},` +
		`"until":"2026-03-01T13:00:00Z","scanned":9,"matched":7,"redriven":5,"skipped":1,"already_redriven":1,` +
		`"started_at":"2026-03-01T13:00:00Z","updated_at":"2026-03-01T13:00:01Z","finished_at":"2026-03-01T13:00:01Z"}`
	if err := f.redis.Set(ctx, key, stored, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	j, created, err := r.Submit(ctx, old, "")
	if err != nil || created || j.Status != jobs.StatusDone || j.Scanned != 9 || j.Redriven != 5 || j.AlreadyRedriven != 1 || j.Skipped != 1 {
		t.Fatalf("older record: %+v created %v, %v; want it read as done", j, created, err)
	}

	job, _, err := r.Submit(ctx, Request{EndpointID: "ep_a"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if done := waitJob(t, r, job.ID); done.Redriven != 30 {
		t.Fatalf("job %+v: want 30 redriven", done)
	}
	testenv.Stop(t, r.Stop) // waits for the job's goroutine, so its last save is done
	raw, err := f.redis.Get(ctx, "laneway:redrive:"+f.dead+":"+job.ID).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	want := []string{"already_redriven", "finished_at", "id", "matched", "redriven", "request", "scanned", "skipped", "started_at", "status", "until", "updated_at"}
	if got := slices.Sorted(maps.Keys(fields)); !slices.Equal(got, want) {
		t.Fatalf("stored fields %v, want %v", got, want)
	}
	if fields["redriven"] != 30.0 || fields["status"] != jobs.StatusDone {
		t.Fatalf("stored %s", raw)
	}
}
