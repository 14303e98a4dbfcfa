package inbound

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestReplayJobIDsAreUnchanged pins ids computed by the versions before
// the jobs package: a repeated request after an upgrade must find its job.
func TestReplayJobIDsAreUnchanged(t *testing.T) {
	f := newFixture(t, testenv.Kfake(t))
	s := f.service(func(c *Config) { c.CaptureOnly = true }, nil)
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	for want, req := range map[string]struct {
		req ReplayRequest
		key string
	}{
		"rp_5347bb625ac49ac8489a4be2": {ReplayRequest{Action: ActionReverify, IDs: []string{"in_1_5", "in_0_2", "in_1_5"}}, ""},
		"rp_c7650a2136a1593e8d53a1f0": {ReplayRequest{Action: ActionRepublish, Source: "gh", Status: StatusRejected, Since: &since}, ""},
		"rp_cfe958f0a4227e1070ee6616": {ReplayRequest{Action: ActionReverify, Since: &since}, "key-1"},
	} {
		job, _, err := s.replays.Submit(context.Background(), req.req, req.key)
		if err != nil || job.ID != want {
			t.Errorf("%+v: id %s, %v; want %s", req, job.ID, err, want)
		}
	}
}

// TestReplayResumesARecordAnOlderVersionWrote resumes a job from a record
// stored by the versions before the jobs package (one of two requests
// done, its runner gone), and checks the finished job is stored with the
// same fields.
func TestReplayResumesARecordAnOlderVersionWrote(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		f := newFixture(t, b)
		s := f.service(func(c *Config) { c.CaptureOnly = true }, nil)
		c := server(t, s)
		c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_x"})
		var ids []string
		for i := range 2 {
			ids = append(ids, c.capture("stripe", stripeBody(i), stripeHeaders("whsec_x", time.Now(), stripeBody(i))))
		}
		ids = slices.Sorted(slices.Values(ids))
		const id = "rp_cfe958f0a4227e1070ee6616" // of Idempotency-Key key-1
		req, _ := json.Marshal(ReplayRequest{Action: ActionRepublish, IDs: ids})
		stored := `{"id":"` + id + `","status":"running","request":` + string(req) + `,"until":"2026-03-01T13:00:00Z",` +
			`"scanned":1,"matched":1,"replayed":1,"skipped":0,"already_replayed":0,` +
			`"started_at":"2026-03-01T13:00:00Z","updated_at":"2026-03-01T13:00:01Z","cursor":"1"}`
		ctx := context.Background()
		key := f.prefix + "inbound:replay:" + id
		if err := f.rdb.Set(ctx, key, stored, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}

		job, created, err := s.replays.Submit(ctx, ReplayRequest{Action: ActionRepublish, IDs: ids}, "key-1")
		if err != nil || !created || job.ID != id || job.Replayed != 1 {
			t.Fatalf("resubmit: %+v created %v, %v; want the stored job resumed", job, created, err)
		}
		done := waitJob(t, s, c, id)
		if done.Replayed != 2 || done.Scanned != 2 || done.Matched != 2 {
			t.Fatalf("resumed job %+v: want the second request only replayed (2 in all)", done)
		}
		testenv.Stop(t, s.Stop) // waits for the job's goroutine, so its last save is done
		raw, err := f.rdb.Get(ctx, key).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		// Strict: a field the older versions do not know fails, and the
		// counts must be where they read them.
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var rec ReplayJob
		if err := dec.Decode(&rec); err != nil || rec.Replayed != 2 || rec.Status != jobs.StatusDone || rec.FinishedAt == nil {
			t.Fatalf("stored %s: %+v, %v", raw, rec, err)
		}
	})
}
