// Package jobrecord holds the fields every stored and shown job record shares
// (a dead-letter redrive's, an inbound replay's), as plain types that the
// API's clients can use without the job runner's Redis code.
//
// A kind's record embeds Head, then its own counts (named for what the
// kind sends), then Tail, so that its JSON keeps one field order: the
// order its deployments already stored and its API already showed.
package jobrecord

import "time"

// Job states, as stored and shown.
const (
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// Head is what a job record starts with: which job, for what request, over
// which range, and how many records it examined and selected.
type Head[Req any] struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Request Req    `json:"request"`
	// Until is the end of the range fixed at submission (now, when the
	// request gave none), so a resumed job covers the same records and
	// never those it wrote itself.
	Until time.Time `json:"until"`
	// Scanned counts the records examined; Matched those the request
	// selected.
	Scanned int64 `json:"scanned"`
	Matched int64 `json:"matched"`
}

// Tail is what a job record ends with: its error, times and cursor.
type Tail struct {
	Error      string     `json:"error,omitempty"`
	StartedAt  time.Time  `json:"started_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// Cursor is where a resumed job continues (hidden by the API).
	Cursor string `json:"cursor,omitempty"`
}

// Finished reports whether the job is done or failed.
func (h Head[Req]) Finished() bool { return h.Status == StatusDone || h.Status == StatusFailed }
