package jobs

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/ops/jobs/jobrecord"
)

// copyRecord is a record built of jobrecord's parts, as a kind's is.
type copyRecord struct {
	jobrecord.Head[request]
	Copied        int64 `json:"copied"`
	Skipped       int64 `json:"skipped"`
	AlreadyCopied int64 `json:"already_copied"`
	jobrecord.Tail
}

var copyFormat = Format[request, copyRecord]{Fields: func(r *copyRecord) (*jobrecord.Head[request], *int64, *int64, *int64, *jobrecord.Tail) {
	return &r.Head, &r.Copied, &r.Skipped, &r.AlreadyCopied, &r.Tail
}}

// TestFormatRoundTrip maps every field of a job to the record's JSON, in
// the record's order, and back.
func TestFormatRoundTrip(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	done := t0.Add(time.Minute)
	job := Job[request]{
		ID: "cp_1", Status: StatusDone, Request: request{Name: "x"}, Until: t0,
		Progress: Progress{Scanned: 1, Matched: 2, Sent: 3, Skipped: 4, AlreadySent: 5},
		Error:    "e", StartedAt: t0, UpdatedAt: done, FinishedAt: &done, Cursor: "c",
	}
	rec := copyFormat.Record(job)
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"cp_1","status":"done","request":{"name":"x"},"until":"2026-03-01T12:00:00Z","scanned":1,"matched":2,` +
		`"copied":3,"skipped":4,"already_copied":5,"error":"e","started_at":"2026-03-01T12:00:00Z",` +
		`"updated_at":"2026-03-01T12:01:00Z","finished_at":"2026-03-01T12:01:00Z","cursor":"c"}`
	if string(raw) != want {
		t.Errorf("record JSON\n%s\nwant\n%s", raw, want)
	}
	back := copyFormat.FromRecord(rec)
	if back.ID != job.ID || back.Progress != job.Progress || back.Cursor != job.Cursor || back.Error != job.Error ||
		!back.FinishedAt.Equal(done) || !back.Until.Equal(t0) || back.Request.Name != job.Request.Name {
		t.Errorf("round trip: %+v, want %+v", back, job)
	}
}
