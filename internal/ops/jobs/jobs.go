// Package jobs runs resumable background jobs (dead-letter redrives,
// inbound replays): one runner owns what every such job needs, so that a
// kind of job only says what one step of it does.
//
// The runner keeps each job's record in Redis under an id derived from the
// request (or its idempotency key), so repeating a request answers with the
// same job; a lease in Redis lets one instance run a job at a time: it
// names its owner (a random token per acquisition), is renewed during
// steps, and every renewal, record write and release compares the token
// in one Redis script, so a runner that lost the lease stops and writes
// nothing more; every step saves the job's counts and cursor, so a job
// whose runner went away resumes where it stopped when its request is
// repeated. Start and Stop
// bound the goroutines: Stop cancels every job and waits for it.
package jobs

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/ops/jobs/jobrecord"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Job states, as stored and shown by the API.
const (
	StatusRunning = jobrecord.StatusRunning
	StatusDone    = jobrecord.StatusDone
	StatusFailed  = jobrecord.StatusFailed
)

// Defaults of Config, and the page size of the paged kinds (redrives,
// inbound replays) that take none.
const (
	DefaultJobTTL   = 7 * 24 * time.Hour
	DefaultLease    = 30 * time.Second
	DefaultPageSize = 500
)

// ErrStopped is returned by Submit before Start and after Stop: a job
// launched then would have no goroutine owner to drain it.
var ErrStopped = errors.New("jobs: the runner is not running")

// ErrKeyReused is returned by Submit when the idempotency key names a job
// of a different request: answering with that job would drop the request
// silently, as a reused key with a different event did before.
var ErrKeyReused = errors.New("jobs: this idempotency key was used for a different request")

// Progress counts what a job did. Scanned counts records examined; Matched
// those the request selected; Sent those the job wrote; Skipped those it
// cannot send; AlreadySent those a marker says were written before.
type Progress struct {
	Scanned, Matched, Sent, Skipped, AlreadySent int64
}

func (p *Progress) add(q Progress) {
	p.Scanned += q.Scanned
	p.Matched += q.Matched
	p.Sent += q.Sent
	p.Skipped += q.Skipped
	p.AlreadySent += q.AlreadySent
}

// Job is the runner's view of one job. Each kind stores and shows it in its
// own record type (Kind.Record), the format its deployments already wrote.
type Job[Req any] struct {
	ID      string
	Status  string
	Request Req
	// Until is the end of the job's range, fixed at submission (now, when
	// the request gave none), so that a resumed job covers the same
	// records and never those it wrote itself.
	Until time.Time
	Progress
	Error      string
	StartedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
	// Cursor is where the next step starts; "" before the first.
	Cursor string
}

// Format maps jobs to a kind's record type and back (Kind's Record and
// FromRecord): a record that embeds jobrecord.Head and jobrecord.Tail
// around its own names for the counts Sent, Skipped and AlreadySent.
type Format[Req, Rec any] struct {
	// Fields points into rec at its head, its counts (sent, skipped,
	// already sent) and its tail.
	Fields func(rec *Rec) (*jobrecord.Head[Req], *int64, *int64, *int64, *jobrecord.Tail)
}

// Record is j as its kind's record.
func (f Format[Req, Rec]) Record(j Job[Req]) Rec {
	var rec Rec
	head, sent, skipped, alreadySent, tail := f.Fields(&rec)
	*head = jobrecord.Head[Req]{ID: j.ID, Status: j.Status, Request: j.Request, Until: j.Until, Scanned: j.Scanned, Matched: j.Matched}
	*sent, *skipped, *alreadySent = j.Sent, j.Skipped, j.AlreadySent
	*tail = jobrecord.Tail{Error: j.Error, StartedAt: j.StartedAt, UpdatedAt: j.UpdatedAt, FinishedAt: j.FinishedAt, Cursor: j.Cursor}
	return rec
}

// FromRecord is the job a stored record describes.
func (f Format[Req, Rec]) FromRecord(rec Rec) Job[Req] {
	h, sent, skipped, alreadySent, t := f.Fields(&rec)
	return Job[Req]{
		ID: h.ID, Status: h.Status, Request: h.Request, Until: h.Until,
		Progress: Progress{Scanned: h.Scanned, Matched: h.Matched, Sent: *sent, Skipped: *skipped, AlreadySent: *alreadySent},
		Error:    t.Error, StartedAt: t.StartedAt, UpdatedAt: t.UpdatedAt, FinishedAt: t.FinishedAt, Cursor: t.Cursor,
	}
}

// Step is what one step did: the counts to add, and the cursor after it.
type Step struct {
	Progress
	// Next is where the next step starts; "" ends the job.
	Next string
}

// Pager is a kind whose step reads the page of items at the job's cursor
// and sends them.
type Pager[Req, Item any] interface {
	// Page reads the items of the step, how many records it examined for
	// them, and the cursor after it ("" at the end).
	Page(ctx context.Context, job Job[Req]) (items []Item, scanned int, next string, err error)
	// Send writes the items; its Progress says how (Sent, Skipped,
	// AlreadySent).
	Send(ctx context.Context, job Job[Req], items []Item) (Progress, error)
}

// Paged is the Kind of jobs whose step reads the page of items at the
// job's cursor (p.Page) and sends them (p.Send), every item of the page
// counted as matched, and whose records f maps.
func Paged[Req, Rec, Item any](p Pager[Req, Item], f Format[Req, Rec]) Kind[Req, Rec] {
	return paged[Req, Rec, Item]{Format: f, pager: p}
}

type paged[Req, Rec, Item any] struct {
	Format[Req, Rec]
	pager Pager[Req, Item]
}

func (k paged[Req, Rec, Item]) Step(ctx context.Context, job Job[Req]) (Step, error) {
	items, scanned, next, err := k.pager.Page(ctx, job)
	if err != nil {
		return Step{}, err
	}
	prog, err := k.pager.Send(ctx, job, items)
	if err != nil {
		return Step{}, err
	}
	prog.Scanned, prog.Matched = int64(scanned), int64(len(items))
	return Step{Progress: prog, Next: next}, nil
}

// Kind is one sort of job: its step, and its record format (a Format,
// for a record built of jobrecord's parts). Paged builds one.
type Kind[Req, Rec any] interface {
	// Step does the work of one page from job.Cursor. An error fails the
	// job (a repeated request resumes it from the last saved cursor).
	Step(ctx context.Context, job Job[Req]) (Step, error)
	// Record is the job as the kind's API shows it and Redis stores it
	// (as JSON); FromRecord reads it back.
	Record(job Job[Req]) Rec
	FromRecord(rec Rec) Job[Req]
}

// Config configures a Runner.
type Config[Req, Rec any] struct {
	// Kind does the steps and maps records. Required.
	Kind Kind[Req, Rec]
	// Redis keeps job records and leases. Required.
	Redis redis.UniversalClient
	// Name names the kind in logs and errors ("redrive"). Required.
	Name string
	// IDPrefix starts every job id ("rd_"). Required.
	IDPrefix string
	// JobKeyPrefix and LeaseKeyPrefix are the Redis keys of a job's record
	// and lease, less the job id. Required.
	JobKeyPrefix, LeaseKeyPrefix string
	// SentName names Progress.Sent in the end-of-job log line (and
	// "already_"+SentName, AlreadySent). Default "sent".
	SentName string
	// Prepare checks a request and puts it in its normal form, so that
	// the same request always has the same job id, and gives the end of
	// its range (nil: now). Default: the request as it is, no end.
	Prepare func(req Req) (Req, *time.Time, error)
	// Describe gives the attributes of the job-started log line. Default
	// none.
	Describe func(req Req) []any
	// JobTTL is how long a job's record stays readable. Default
	// DefaultJobTTL (7 days).
	JobTTL time.Duration
	// Lease is how long a job's runner may go silent before a repeated
	// request resumes the job elsewhere. Default DefaultLease (30s).
	Lease time.Duration
	// RenewEvery is how often a running job renews its lease, during its
	// steps too; keep it well under Lease. A renewal that finds the lease
	// lapsed or another runner's stops the job here. Default Lease/3, so
	// that one late renewal loses nothing.
	RenewEvery time.Duration
	// Logger receives job starts, ends and failures. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config[Req, Rec]) setDefaults() error {
	if c.Kind == nil || c.Redis == nil || c.Name == "" || c.IDPrefix == "" || c.JobKeyPrefix == "" || c.LeaseKeyPrefix == "" {
		return errors.New("jobs: Kind, Redis, Name, IDPrefix, JobKeyPrefix and LeaseKeyPrefix are required")
	}
	c.SentName = cmp.Or(c.SentName, "sent")
	if c.Prepare == nil {
		c.Prepare = func(req Req) (Req, *time.Time, error) { return req, nil, nil }
	}
	if c.Describe == nil {
		c.Describe = func(Req) []any { return nil }
	}
	c.JobTTL = valutil.PositiveOr(c.JobTTL, DefaultJobTTL)
	c.Lease = valutil.PositiveOr(c.Lease, DefaultLease)
	c.RenewEvery = valutil.PositiveOr(c.RenewEvery, c.Lease/3)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Now = timing.Clock(c.Now)
	return nil
}

// ID is the job id of a request: a hash of the idempotency key when there
// is one, else of the request's JSON, so that repeating a request (in a
// normal form: SortIDs, UTC) finds its job. Existing job ids depend on it:
// do not change it.
func ID(prefix string, req any, key string) string {
	h := sha256.New()
	if key != "" {
		h.Write([]byte("key\x00" + key))
	} else {
		raw, _ := json.Marshal(req) // requests are plain structs: they always encode
		h.Write(raw)
	}
	return prefix + hex.EncodeToString(h.Sum(nil))[:24]
}

// SortIDs sorts ids and drops repeats, so that the same selection in
// another order is the same request (and job).
func SortIDs(ids []string) []string {
	if len(ids) == 0 {
		return ids
	}
	return slices.Compact(slices.Sorted(slices.Values(ids)))
}

// UTC returns t in UTC (nil stays nil), so that the same instant written
// in another zone is the same request (and job).
func UTC(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
