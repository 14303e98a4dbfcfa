package deadletter

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

	"github.com/laneway/laneway/endpoint"
)

// Job states.
const (
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// MaxRequestIDs bounds the ids of one redrive request (a time range has no
// such bound).
const MaxRequestIDs = 10_000

// Request says which dead letters to redrive: the listed ids, or every
// letter of one endpoint in a time range (optionally of one reason).
type Request struct {
	IDs        []string   `json:"ids,omitempty"`
	EndpointID string     `json:"endpoint_id,omitempty"`
	Reason     string     `json:"reason,omitempty"`
	Since      *time.Time `json:"since,omitempty"`
	Until      *time.Time `json:"until,omitempty"`
}

// RequestError says why a request was refused.
type RequestError struct{ Reason string }

func (e *RequestError) Error() string { return "invalid redrive request: " + e.Reason }

// Validate checks the request's shape.
func (r *Request) Validate() error {
	switch {
	case len(r.IDs) == 0 && r.EndpointID == "":
		return &RequestError{"give ids, or endpoint_id with an optional since/until"}
	case len(r.IDs) > 0 && (r.EndpointID != "" || r.Since != nil || r.Until != nil || r.Reason != ""):
		return &RequestError{"ids cannot be combined with endpoint_id, reason, since or until"}
	case len(r.IDs) > MaxRequestIDs:
		return &RequestError{fmt.Sprintf("at most %d ids per request; use a time range for more", MaxRequestIDs)}
	case r.Since != nil && r.Until != nil && r.Until.Before(*r.Since):
		return &RequestError{"until is before since"}
	}
	for _, id := range r.IDs {
		if id == "" || len(id) > 1024 {
			return &RequestError{"ids must be non-empty and at most 1024 bytes"}
		}
	}
	return nil
}

// normalised sorts and de-duplicates ids and puts times in UTC, so that the
// same request always has the same job id.
func (r Request) normalised() Request {
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

// Job is a redrive's progress.
type Job struct {
	ID      string  `json:"id"`
	Status  string  `json:"status"`
	Request Request `json:"request"`
	// Until is the end of the range fixed at submission (now, when the
	// request gave none), so a resumed job covers the same letters.
	Until time.Time `json:"until"`
	// Scanned counts dead-topic records examined; Matched the letters the
	// request selected; Redriven those written back to the deliveries
	// topic; Skipped those that cannot be redriven (no delivery, endpoint
	// deleted or disabled); AlreadyRedriven those an earlier redrive sent.
	Scanned         int64      `json:"scanned"`
	Matched         int64      `json:"matched"`
	Redriven        int64      `json:"redriven"`
	Skipped         int64      `json:"skipped"`
	AlreadyRedriven int64      `json:"already_redriven"`
	Error           string     `json:"error,omitempty"`
	StartedAt       time.Time  `json:"started_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	FinishedAt      *time.Time `json:"finished_at,omitempty"`
	// Cursor is where a resumed job continues.
	Cursor string `json:"cursor,omitempty"`
}

// Endpoints tells whether a letter's endpoint can take deliveries.
type Endpoints interface {
	Get(id string) (endpoint.Endpoint, bool)
}

// Config configures a Redriver.
type Config struct {
	// Finder searches the dead topic. Required.
	Finder *Finder
	// Producer writes redriven deliveries. Required.
	Producer *kgo.Client
	// DeliveriesTopic receives them. Required.
	DeliveriesTopic string
	// Endpoints is the endpoint config. Required.
	Endpoints Endpoints
	// Redis keeps job progress and which letters were redriven. Required.
	Redis redis.UniversalClient
	// KeyPrefix prefixes every Redis key. Default "laneway:".
	KeyPrefix string
	// PageSize is the number of letters read and written per step. Default 500.
	PageSize int
	// JobTTL is how long a job's progress stays readable. Default 7 days.
	JobTTL time.Duration
	// MarkerTTL is how long a redriven letter is remembered, so that a
	// second redrive over the same range does not send it again. It
	// should match the dead topic's retention. Default 30 days.
	MarkerTTL time.Duration
	// Lease is how long a job's runner may go silent before a repeated
	// request resumes the job elsewhere. Default 30s.
	Lease time.Duration
	// Logger receives job starts, ends and failures. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() error {
	if c.Finder == nil || c.Producer == nil || c.DeliveriesTopic == "" || c.Endpoints == nil || c.Redis == nil {
		return errors.New("deadletter: Finder, Producer, DeliveriesTopic, Endpoints and Redis are required")
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "laneway:"
	}
	if c.PageSize <= 0 {
		c.PageSize = 500
	}
	if c.JobTTL <= 0 {
		c.JobTTL = 7 * 24 * time.Hour
	}
	if c.MarkerTTL <= 0 {
		c.MarkerTTL = 30 * 24 * time.Hour
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Redriver runs redrive jobs in the background. Jobs survive the process:
// a repeated request for a job whose runner went away resumes it from its
// last saved cursor.
type Redriver struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	jobs   sync.WaitGroup

	mu      sync.Mutex
	running map[string]*Job // jobs this process runs, for fresh progress
}

// NewRedriver checks cfg and returns a Redriver; Stop ends its jobs.
func NewRedriver(cfg Config) (*Redriver, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Redriver{cfg: cfg, ctx: ctx, cancel: cancel, running: map[string]*Job{}}, nil
}

// Stop cancels running jobs and waits for them. Their progress stays in
// Redis; repeating the request resumes them.
func (r *Redriver) Stop() {
	r.cancel()
	r.jobs.Wait()
}

// Submit starts the redrive of req, or returns the job already started for
// the same request (or the same idempotency key). created reports whether
// this call started or resumed it.
func (r *Redriver) Submit(ctx context.Context, req Request, idempotencyKey string) (job Job, created bool, err error) {
	if err := req.Validate(); err != nil {
		return Job{}, false, err
	}
	req = req.normalised()
	id := jobID(req, idempotencyKey)
	existing, found, err := r.load(ctx, id)
	if err != nil {
		return Job{}, false, err
	}
	if !found {
		now := r.cfg.Now().UTC()
		existing = Job{ID: id, Status: StatusRunning, Request: req, Until: now, StartedAt: now, UpdatedAt: now}
		if req.Until != nil {
			existing.Until = *req.Until
		}
		if ok, err := r.create(ctx, existing); err != nil || !ok {
			if err != nil {
				return Job{}, false, err
			}
			return r.Submit(ctx, req, idempotencyKey) // lost a race: report the winner's job
		}
	} else if existing.Status == StatusDone {
		return existing, false, nil
	}
	leased, err := r.takeLease(ctx, id)
	if err != nil || !leased {
		if j, ok, _ := r.Get(ctx, id); ok {
			existing = j // freshest progress, when it runs here
		}
		return existing, false, err // someone is running it
	}
	existing.Status, existing.Error = StatusRunning, ""
	r.launch(existing)
	return existing, true, nil
}

// Get returns a job's progress.
func (r *Redriver) Get(ctx context.Context, id string) (Job, bool, error) {
	r.mu.Lock()
	j, ok := r.running[id]
	var snapshot Job
	if ok {
		snapshot = *j
	}
	r.mu.Unlock()
	if ok {
		return snapshot, true, nil
	}
	return r.load(ctx, id)
}

func jobID(req Request, key string) string {
	h := sha256.New()
	if key != "" {
		h.Write([]byte("key\x00" + key))
	} else {
		raw, _ := json.Marshal(req) // plain struct always encodes
		h.Write(raw)
	}
	return "rd_" + hex.EncodeToString(h.Sum(nil))[:24]
}

func (r *Redriver) launch(job Job) {
	r.mu.Lock()
	r.running[job.ID] = &job
	r.mu.Unlock()
	r.cfg.Logger.Info("redrive started", "job", job.ID, "endpoint", job.Request.EndpointID, "ids", len(job.Request.IDs))
	r.jobs.Add(1)
	go func() {
		defer r.jobs.Done()
		r.run(job.ID)
	}()
}

// run pages through the matching letters until the range is exhausted, the
// redriver stops, or a step fails.
func (r *Redriver) run(id string) {
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

// step redrives one page and saves the progress.
func (r *Redriver) step(id string) (done bool, err error) {
	ctx := r.ctx
	if err := ctx.Err(); err != nil {
		return false, err
	}
	r.renewLease(ctx, id)
	job := r.snapshot(id)
	page, err := r.cfg.Finder.Find(ctx, job.filter(), job.Cursor, r.cfg.PageSize)
	if err != nil {
		return false, err
	}
	counts, err := r.redrive(ctx, page.Letters)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	j := r.running[id]
	j.Scanned += int64(page.Scanned)
	j.Matched += int64(len(page.Letters))
	j.Redriven += counts.redriven
	j.Skipped += counts.skipped
	j.AlreadyRedriven += counts.already
	j.Cursor = page.Next
	j.UpdatedAt = r.cfg.Now().UTC()
	saved := *j
	r.mu.Unlock()
	r.save(ctx, saved)
	return page.Next == "", nil
}

func (r *Redriver) snapshot(id string) Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return *r.running[id]
}

func (j Job) filter() Filter {
	f := Filter{EndpointID: j.Request.EndpointID, Reason: j.Request.Reason, Until: j.Until}
	if j.Request.Since != nil {
		f.Since = *j.Request.Since
	}
	if len(j.Request.IDs) > 0 {
		f.IDs = map[string]bool{}
		for _, id := range j.Request.IDs {
			f.IDs[id] = true
		}
	}
	return f
}

func (r *Redriver) finish(id string, err error) {
	r.mu.Lock()
	j := r.running[id]
	now := r.cfg.Now().UTC()
	j.UpdatedAt = now
	switch {
	case err == nil:
		j.Status, j.FinishedAt = StatusDone, &now
	case errors.Is(err, context.Canceled) && r.ctx.Err() != nil:
		// Shutting down: the job stays "running" with its cursor saved
		// and its lease left to expire, so a repeated request resumes it.
	default:
		j.Status, j.Error = StatusFailed, err.Error()
	}
	saved := *j
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.save(ctx, saved)
	if saved.Status != StatusRunning {
		r.cfg.Redis.Del(ctx, r.leaseKey(id))
	}
	r.cfg.Logger.Info("redrive ended", "job", id, "status", saved.Status, "redriven", saved.Redriven,
		"skipped", saved.Skipped, "already_redriven", saved.AlreadyRedriven, "err", saved.Error)
}

type stepCounts struct{ redriven, skipped, already int64 }

// redrive writes the page's redrivable letters, in order, to the
// deliveries topic, skipping those an earlier redrive already sent.
func (r *Redriver) redrive(ctx context.Context, letters []Letter) (stepCounts, error) {
	var c stepCounts
	var candidates []Letter
	for _, l := range letters {
		if !r.redrivable(l) {
			c.skipped++
			continue
		}
		candidates = append(candidates, l)
	}
	sent := r.alreadySent(ctx, candidates)
	now := r.cfg.Now().UTC()
	var recs []*kgo.Record
	var fresh []Letter
	for i, l := range candidates {
		if sent[i] {
			c.already++
			continue
		}
		d := *l.Delivery
		d.Attempts, d.NotBefore, d.LastError, d.CreatedAt = 0, time.Time{}, "", now
		value, err := json.Marshal(&d)
		if err != nil {
			return c, err
		}
		recs = append(recs, &kgo.Record{Topic: r.cfg.DeliveriesTopic, Key: []byte(d.EndpointID), Value: value})
		fresh = append(fresh, l)
	}
	if len(recs) > 0 {
		if err := r.cfg.Producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return c, fmt.Errorf("write redriven deliveries: %w", err)
		}
	}
	r.markSent(ctx, fresh)
	c.redriven = int64(len(fresh))
	return c, nil
}

// redrivable reports whether the letter holds a delivery whose endpoint
// exists and is active (a disabled endpoint would dead-letter it again).
func (r *Redriver) redrivable(l Letter) bool {
	if l.Delivery == nil {
		return false
	}
	ep, ok := r.cfg.Endpoints.Get(l.Delivery.EndpointID)
	return ok && ep.Status == endpoint.StatusActive
}

// alreadySent asks Redis which letters an earlier redrive wrote. Losing
// Redis forgets that, which can only cause a duplicate delivery.
func (r *Redriver) alreadySent(ctx context.Context, letters []Letter) []bool {
	out := make([]bool, len(letters))
	if len(letters) == 0 {
		return out
	}
	pipe := r.cfg.Redis.Pipeline()
	cmds := make([]*redis.IntCmd, len(letters))
	for i, l := range letters {
		cmds[i] = pipe.Exists(ctx, r.markerKey(l))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		r.cfg.Logger.Warn("redrive markers unavailable; letters may be sent twice", "err", err)
		return out
	}
	for i, cmd := range cmds {
		out[i] = cmd.Val() > 0
	}
	return out
}

func (r *Redriver) markSent(ctx context.Context, letters []Letter) {
	if len(letters) == 0 {
		return
	}
	pipe := r.cfg.Redis.Pipeline()
	for _, l := range letters {
		pipe.Set(ctx, r.markerKey(l), 1, r.cfg.MarkerTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		r.cfg.Logger.Warn("could not remember redriven letters", "err", err)
	}
}

func (r *Redriver) markerKey(l Letter) string {
	// The topic is part of the key: Laneways with other topic prefixes may
	// share the Redis.
	return r.cfg.KeyPrefix + "redriven:" + r.cfg.Finder.topic + ":" + strconv.Itoa(int(l.Partition)) + ":" + strconv.FormatInt(l.Offset, 10)
}

func (r *Redriver) jobKey(id string) string {
	return r.cfg.KeyPrefix + "redrive:" + r.cfg.Finder.topic + ":" + id
}

func (r *Redriver) leaseKey(id string) string {
	return r.cfg.KeyPrefix + "redrive-lease:" + r.cfg.Finder.topic + ":" + id
}

func (r *Redriver) load(ctx context.Context, id string) (Job, bool, error) {
	raw, err := r.cfg.Redis.Get(ctx, r.jobKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Job{}, false, nil
	}
	if err != nil {
		return Job{}, false, fmt.Errorf("load redrive %s: %w", id, err)
	}
	var j Job
	if err := json.Unmarshal(raw, &j); err != nil {
		return Job{}, false, fmt.Errorf("load redrive %s: %w", id, err)
	}
	return j, true, nil
}

func (r *Redriver) create(ctx context.Context, j Job) (bool, error) {
	raw, _ := json.Marshal(j) // plain struct always encodes
	ok, err := r.cfg.Redis.SetNX(ctx, r.jobKey(j.ID), raw, r.cfg.JobTTL).Result()
	if err != nil {
		return false, fmt.Errorf("create redrive: %w", err)
	}
	return ok, nil
}

// save stores progress; a failure is logged, not fatal: the job runs on,
// and this process still answers for it.
func (r *Redriver) save(ctx context.Context, j Job) {
	raw, _ := json.Marshal(j) // plain struct always encodes
	if err := r.cfg.Redis.Set(ctx, r.jobKey(j.ID), raw, r.cfg.JobTTL).Err(); err != nil {
		r.cfg.Logger.Warn("could not save redrive progress", "job", j.ID, "err", err)
	}
}

func (r *Redriver) takeLease(ctx context.Context, id string) (bool, error) {
	ok, err := r.cfg.Redis.SetNX(ctx, r.leaseKey(id), "1", r.cfg.Lease).Result()
	if err != nil {
		return false, fmt.Errorf("redrive lease: %w", err)
	}
	return ok, nil
}

// renewLease keeps the job ours while it makes progress. If Redis lost
// the lease (flushed), it is simply taken again.
func (r *Redriver) renewLease(ctx context.Context, id string) {
	if err := r.cfg.Redis.Set(ctx, r.leaseKey(id), "1", r.cfg.Lease).Err(); err != nil {
		r.cfg.Logger.Warn("could not renew redrive lease", "job", id, "err", err)
	}
}
