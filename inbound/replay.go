package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Replay job states.
const (
	JobRunning = "running"
	JobDone    = "done"
	JobFailed  = "failed"
)

// MaxReplayIDs bounds the ids of one replay request (a time range has no
// such bound).
const MaxReplayIDs = 10_000

// ReplayRequest selects captured requests to verify again: the listed
// ids, or every decided request in a time range (optionally of one source
// and one status). Action is reverify or republish.
type ReplayRequest struct {
	Action string     `json:"action"`
	IDs    []string   `json:"ids,omitempty"`
	Source string     `json:"source,omitempty"`
	Status string     `json:"status,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	Until  *time.Time `json:"until,omitempty"`
}

// RequestError says why a replay request was refused.
type RequestError struct{ Reason string }

func (e *RequestError) Error() string { return "invalid replay request: " + e.Reason }

// Validate checks the request's shape.
func (r *ReplayRequest) Validate() error {
	switch {
	case r.Action != ActionReverify && r.Action != ActionRepublish:
		return &RequestError{"action must be reverify or republish"}
	case len(r.IDs) == 0 && r.Since == nil:
		return &RequestError{"give ids, or since with an optional until, source and status"}
	case len(r.IDs) > 0 && (r.Source != "" || r.Status != "" || r.Since != nil || r.Until != nil):
		return &RequestError{"ids cannot be combined with source, status, since or until"}
	case len(r.IDs) > MaxReplayIDs:
		return &RequestError{fmt.Sprintf("at most %d ids per request; use a time range for more", MaxReplayIDs)}
	case r.Status != "" && r.Status != StatusVerified && r.Status != StatusRejected && r.Status != StatusDuplicate:
		return &RequestError{"status must be verified, rejected or duplicate (pending requests are verified anyway)"}
	case r.Since != nil && r.Until != nil && r.Until.Before(*r.Since):
		return &RequestError{"until is before since"}
	}
	for _, id := range r.IDs {
		if _, _, ok := ParseRequestID(id); !ok {
			return &RequestError{fmt.Sprintf("%q is not a request id (in_<partition>_<offset>)", id)}
		}
	}
	return nil
}

// normalised sorts and de-duplicates ids and puts times in UTC, so that the
// same request always has the same job id.
func (r ReplayRequest) normalised() ReplayRequest {
	if len(r.IDs) > 0 {
		r.IDs = slices.Compact(slices.Sorted(slices.Values(r.IDs)))
	}
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	r.Since, r.Until = utc(r.Since), utc(r.Until)
	return r
}

// ReplayJob is a replay's progress. Replayed requests are copied to the
// end of the inbound topic and verified there by the verify stage; their
// outcomes are listed with job = the job's id.
type ReplayJob struct {
	ID      string        `json:"id"`
	Status  string        `json:"status"`
	Request ReplayRequest `json:"request"`
	// Until is the end of the range fixed at submission (now, when the
	// request gave none), so a resumed job covers the same requests and
	// never its own copies.
	Until time.Time `json:"until"`
	// Scanned counts records examined (ids for an id list); Matched the
	// requests selected; Replayed those copied; Skipped those that cannot
	// be replayed (expired, not a capture, refused at the door);
	// AlreadyReplayed those this job copied before it was resumed.
	Scanned         int64      `json:"scanned"`
	Matched         int64      `json:"matched"`
	Replayed        int64      `json:"replayed"`
	Skipped         int64      `json:"skipped"`
	AlreadyReplayed int64      `json:"already_replayed"`
	Error           string     `json:"error,omitempty"`
	StartedAt       time.Time  `json:"started_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	// Cursor is where a resumed job continues (hidden by the API).
	Cursor string `json:"cursor,omitempty"`
}

type replayConfig struct {
	finder   *Finder
	producer *kgo.Client
	topic    string
	redis    redis.UniversalClient
	prefix   string
	pageSize int
	jobTTL   time.Duration
	lease    time.Duration
	metrics  *metrics
	logger   *slog.Logger
	now      func() time.Time
}

// replayer runs replay jobs in the background, with progress in Redis
// (like deadletter.Redriver): a repeated request for a job whose runner
// went away resumes it from its last saved cursor.
type replayer struct {
	cfg    replayConfig
	ctx    context.Context
	cancel context.CancelFunc
	jobs   sync.WaitGroup

	mu      sync.Mutex
	running map[string]*ReplayJob
	changed chan struct{} // closed and replaced at every saved step
}

func newReplayer(cfg replayConfig) *replayer {
	ctx, cancel := context.WithCancel(context.Background())
	return &replayer{cfg: cfg, ctx: ctx, cancel: cancel, running: map[string]*ReplayJob{}, changed: make(chan struct{})}
}

// stop cancels running jobs and waits for them; their progress stays in
// Redis and repeating the request resumes them.
func (r *replayer) stop() {
	r.cancel()
	r.jobs.Wait()
}

// Submit starts the replay of req, or returns the job already started for
// the same request (or the same idempotency key). created reports whether
// this call started or resumed it.
func (r *replayer) Submit(ctx context.Context, req ReplayRequest, idempotencyKey string) (ReplayJob, bool, error) {
	if err := req.Validate(); err != nil {
		return ReplayJob{}, false, err
	}
	req = req.normalised()
	id := replayJobID(req, idempotencyKey)
	job, found, err := r.load(ctx, id)
	if err != nil {
		return ReplayJob{}, false, err
	}
	if !found {
		now := r.cfg.now().UTC()
		job = ReplayJob{ID: id, Status: JobRunning, Request: req, Until: now, StartedAt: now, UpdatedAt: now}
		if req.Until != nil {
			job.Until = *req.Until
		}
		ok, err := r.cfg.redis.SetNX(ctx, r.jobKey(id), mustJSON(job), r.cfg.jobTTL).Result()
		if err != nil {
			return ReplayJob{}, false, fmt.Errorf("create replay: %w", err)
		}
		if !ok {
			return r.Submit(ctx, req, idempotencyKey) // lost a race: report the winner's job
		}
	} else if job.Status == JobDone {
		return job, false, nil
	}
	leased, err := r.cfg.redis.SetNX(ctx, r.leaseKey(id), "1", r.cfg.lease).Result()
	if err != nil {
		return ReplayJob{}, false, fmt.Errorf("replay lease: %w", err)
	}
	if !leased {
		if j, ok, _ := r.Get(ctx, id); ok {
			job = j
		}
		return job, false, nil // someone is running it
	}
	job.Status, job.Error = JobRunning, ""
	r.launch(job)
	return job, true, nil
}

// Get returns a job's progress.
func (r *replayer) Get(ctx context.Context, id string) (ReplayJob, bool, error) {
	r.mu.Lock()
	j, ok := r.running[id]
	var snapshot ReplayJob
	if ok {
		snapshot = *j
	}
	r.mu.Unlock()
	if ok {
		return snapshot, true, nil
	}
	return r.load(ctx, id)
}

func replayJobID(req ReplayRequest, key string) string {
	h := sha256.New()
	if key != "" {
		h.Write([]byte("key\x00" + key))
	} else {
		h.Write(mustJSON(req))
	}
	return "rp_" + hex.EncodeToString(h.Sum(nil))[:24]
}

func mustJSON(v any) []byte {
	raw, _ := json.Marshal(v) // plain structs always encode
	return raw
}

func (r *replayer) launch(job ReplayJob) {
	r.mu.Lock()
	r.running[job.ID] = &job
	r.mu.Unlock()
	r.cfg.logger.Info("inbound replay started", "job", job.ID, "action", job.Request.Action, "source", job.Request.Source, "ids", len(job.Request.IDs))
	r.jobs.Add(1)
	go func() {
		defer r.jobs.Done()
		r.run(job.ID)
	}()
}

func (r *replayer) run(id string) {
	defer func() {
		r.mu.Lock()
		delete(r.running, id)
		r.mu.Unlock()
	}()
	for {
		done, err := r.step(id)
		if err == nil && !done {
			continue
		}
		r.finish(id, err)
		return
	}
}

// step replays one page and saves the progress.
func (r *replayer) step(id string) (done bool, err error) {
	ctx := r.ctx
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := r.cfg.redis.Set(ctx, r.leaseKey(id), "1", r.cfg.lease).Err(); err != nil {
		r.cfg.logger.Warn("could not renew replay lease", "job", id, "err", err)
	}
	job := r.snapshot(id)
	var ids []string
	var scanned int
	next := ""
	if len(job.Request.IDs) > 0 {
		from, _ := strconv.Atoi(job.Cursor) // "" is 0
		to := min(from+r.cfg.pageSize, len(job.Request.IDs))
		ids, scanned = job.Request.IDs[from:to], to-from
		if to < len(job.Request.IDs) {
			next = strconv.Itoa(to)
		}
	} else {
		page, err := r.cfg.finder.Find(ctx, job.filter(), job.Cursor, r.cfg.pageSize)
		if err != nil {
			return false, err
		}
		for _, it := range page.Items {
			ids = append(ids, it.ID)
		}
		scanned, next = page.Scanned, page.Next
	}
	counts, err := r.replay(ctx, job, ids)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	j := r.running[id]
	j.Scanned += int64(scanned)
	j.Matched += int64(len(ids))
	j.Replayed += counts.replayed
	j.Skipped += counts.skipped
	j.AlreadyReplayed += counts.already
	j.Cursor = next
	j.UpdatedAt = r.cfg.now().UTC()
	saved := *j
	r.mu.Unlock()
	r.save(ctx, saved)
	return next == "", nil
}

func (r *replayer) snapshot(id string) ReplayJob {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *r.running[id]
}

func (j *ReplayJob) filter() Filter {
	f := Filter{Source: j.Request.Source, Status: j.Request.Status, Until: j.Until, decided: true}
	if j.Request.Since != nil {
		f.Since = *j.Request.Since
	}
	return f
}

type replayCounts struct{ replayed, skipped, already int64 }

// replay copies the captures named by ids to the end of the inbound topic,
// marked with the action and job, skipping those this job copied before.
func (r *replayer) replay(ctx context.Context, job ReplayJob, ids []string) (replayCounts, error) {
	var c replayCounts
	sent := r.alreadySent(ctx, job.ID, ids)
	var fresh []string
	var recs []*kgo.Record
	now := r.cfg.now().UTC()
	for i, id := range ids {
		if sent[i] {
			c.already++
			continue
		}
		capt, ok, err := r.cfg.finder.Get(ctx, id)
		if err != nil {
			return c, err
		}
		if !ok || capt.Reject != "" {
			c.skipped++
			continue
		}
		if capt.ReplayOf == "" {
			capt.ReplayOf = capt.ID
		}
		capt.Action, capt.Job = job.Request.Action, job.ID
		recs = append(recs, capt.record(r.cfg.topic, now))
		fresh = append(fresh, id)
	}
	if len(recs) > 0 {
		if err := r.cfg.producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return c, fmt.Errorf("write replayed requests: %w", err)
		}
		r.cfg.metrics.replayed.WithLabelValues(job.Request.Action).Add(float64(len(recs)))
	}
	r.markSent(ctx, job.ID, fresh)
	c.replayed = int64(len(fresh))
	return c, nil
}

// alreadySent asks Redis which ids this job copied before. Losing Redis
// forgets that, which can only replay a request twice.
func (r *replayer) alreadySent(ctx context.Context, job string, ids []string) []bool {
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out
	}
	pipe := r.cfg.redis.Pipeline()
	cmds := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Exists(ctx, r.markerKey(job, id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		r.cfg.logger.Warn("replay markers unavailable; requests may be replayed twice", "job", job, "err", err)
		return out
	}
	for i, cmd := range cmds {
		out[i] = cmd.Val() > 0
	}
	return out
}

func (r *replayer) markSent(ctx context.Context, job string, ids []string) {
	if len(ids) == 0 {
		return
	}
	pipe := r.cfg.redis.Pipeline()
	for _, id := range ids {
		pipe.Set(ctx, r.markerKey(job, id), 1, r.cfg.jobTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		r.cfg.logger.Warn("could not remember replayed requests", "job", job, "err", err)
	}
}

func (r *replayer) finish(id string, err error) {
	r.mu.Lock()
	j := r.running[id]
	now := r.cfg.now().UTC()
	j.UpdatedAt = now
	switch {
	case err == nil:
		j.Status, j.FinishedAt = JobDone, &now
	case errors.Is(err, context.Canceled) && r.ctx.Err() != nil:
		// Shutting down: the job stays "running" with its cursor saved and
		// its lease left to expire, so a repeated request resumes it.
	default:
		j.Status, j.Error = JobFailed, err.Error()
	}
	saved := *j
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.save(ctx, saved)
	if saved.Status != JobRunning {
		r.cfg.redis.Del(ctx, r.leaseKey(id))
	}
	r.cfg.logger.Info("inbound replay ended", "job", id, "status", saved.Status, "replayed", saved.Replayed,
		"skipped", saved.Skipped, "already_replayed", saved.AlreadyReplayed, "err", saved.Error)
}

func (r *replayer) load(ctx context.Context, id string) (ReplayJob, bool, error) {
	raw, err := r.cfg.redis.Get(ctx, r.jobKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return ReplayJob{}, false, nil
	}
	if err != nil {
		return ReplayJob{}, false, fmt.Errorf("load replay %s: %w", id, err)
	}
	var j ReplayJob
	if err := json.Unmarshal(raw, &j); err != nil {
		return ReplayJob{}, false, fmt.Errorf("load replay %s: %w", id, err)
	}
	return j, true, nil
}

// save stores progress; a failure is logged, not fatal.
func (r *replayer) save(ctx context.Context, j ReplayJob) {
	if err := r.cfg.redis.Set(ctx, r.jobKey(j.ID), mustJSON(j), r.cfg.jobTTL).Err(); err != nil {
		r.cfg.logger.Warn("could not save replay progress", "job", j.ID, "err", err)
	}
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// watch returns a channel closed at the next saved step of any job.
func (r *replayer) watch() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *replayer) jobKey(id string) string   { return r.cfg.prefix + "inbound:replay:" + id }
func (r *replayer) leaseKey(id string) string { return r.cfg.prefix + "inbound:replay-lease:" + id }
func (r *replayer) markerKey(job, id string) string {
	return r.cfg.prefix + "inbound:replayed:" + job + ":" + id
}
