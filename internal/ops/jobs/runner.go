package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// finalSaveTimeout bounds the last save of a job, made after its context
// may have been cancelled by Stop.
const finalSaveTimeout = 5 * time.Second

// Runner runs the jobs of one kind in the background, one goroutine each.
type Runner[Req, Rec any] struct {
	cfg  Config[Req, Rec]
	jobs sync.WaitGroup

	mu      sync.Mutex
	ctx     context.Context // nil until Start
	cancel  context.CancelFunc
	stopped bool
	running map[string]*Job[Req] // jobs this process runs, for fresh progress
	changed chan struct{}        // closed and replaced at every save
}

// New checks cfg and returns a Runner; it runs jobs once started.
func New[Req, Rec any](cfg Config[Req, Rec]) (*Runner[Req, Rec], error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Runner[Req, Rec]{cfg: cfg, running: map[string]*Job[Req]{}, changed: make(chan struct{})}, nil
}

// Start lets Submit launch jobs, which run until Stop: ctx is not their
// lifetime (nor used otherwise). It cannot fail. A stopped runner does not
// start again.
func (r *Runner[Req, Rec]) Start(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil && !r.stopped {
		r.ctx, r.cancel = context.WithCancel(context.Background())
	}
	return nil
}

// Stop cancels the running jobs and waits for their goroutines. Their
// records stay "running" with their cursors saved and their leases left to
// expire, so that a repeated request resumes them. ctx is not used: Stop
// waits for the job goroutines however long they take to notice the
// cancel (each one's last save is bounded by finalSaveTimeout). It
// returns nil.
func (r *Runner[Req, Rec]) Stop(context.Context) error {
	r.mu.Lock()
	r.stopped = true
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.jobs.Wait()
	return nil
}

// Submit starts the job of req (checked and normalised by
// Config.Prepare), or returns the job already started for the same request
// (or the same idempotency key). created reports whether this call started
// or resumed the job; a job running elsewhere, or done, is only reported.
func (r *Runner[Req, Rec]) Submit(ctx context.Context, req Req, idempotencyKey string) (rec Rec, created bool, err error) {
	req, until, err := r.cfg.Prepare(req)
	if err != nil {
		return rec, false, err
	}
	if !r.accepting() {
		return rec, false, ErrStopped
	}
	job, err := r.findOrCreate(ctx, ID(r.cfg.IDPrefix, req, idempotencyKey), req, until)
	if err != nil {
		return rec, false, err
	}
	if idempotencyKey != "" && !sameRequest(job.Request, req) {
		return rec, false, ErrKeyReused
	}
	if job.Status == StatusDone {
		return r.cfg.Kind.Record(job), false, nil
	}
	return r.resume(ctx, job)
}

// resume runs a job that is not done, unless another runner holds it.
func (r *Runner[Req, Rec]) resume(ctx context.Context, job Job[Req]) (rec Rec, created bool, err error) {
	if here, ok := r.snapshot(job.ID); ok {
		// Its lease lapsed during a long step: it still runs here.
		return r.cfg.Kind.Record(here), false, nil
	}
	token, err := r.takeLease(ctx, job.ID)
	if err != nil {
		return rec, false, err
	}
	if token == "" { // someone runs it; if here, Get has fresher progress
		if fresh, ok, _ := r.Get(ctx, job.ID); ok {
			return fresh, false, nil
		}
		return r.cfg.Kind.Record(job), false, nil
	}
	// Read it again under the lease: a runner saves a job's end before it
	// drops the lease, so a job that ended since the first read is not run
	// a second time (from its last cursor, "" when it was complete).
	if job, err = r.reload(ctx, job); err != nil || job.Status == StatusDone {
		r.dropLease(ctx, job.ID, token)
		if err != nil {
			return rec, false, err
		}
		return r.cfg.Kind.Record(job), false, nil
	}
	job.Status, job.Error = StatusRunning, ""
	if !r.launch(job, token) {
		r.dropLease(ctx, job.ID, token) // stopped meanwhile: let a repeat resume it at once
		return rec, false, ErrStopped
	}
	return r.cfg.Kind.Record(job), true, nil
}

// Get returns a job's progress: fresh from memory when it runs here, else
// as last saved.
func (r *Runner[Req, Rec]) Get(ctx context.Context, id string) (rec Rec, found bool, err error) {
	job, found := r.snapshot(id)
	if !found {
		job, found, err = r.load(ctx, id)
	}
	if !found || err != nil {
		return rec, false, err
	}
	return r.cfg.Kind.Record(job), true, nil
}

// Watch returns a channel closed at the next save of any job's progress,
// or when a job stops running here, so that a waiter wakes on progress
// instead of polling.
func (r *Runner[Req, Rec]) Watch() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

func (r *Runner[Req, Rec]) accepting() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctx != nil && !r.stopped
}

// findOrCreate loads the job, or creates its record when there is none.
func (r *Runner[Req, Rec]) findOrCreate(ctx context.Context, id string, req Req, until *time.Time) (Job[Req], error) {
	for {
		job, found, err := r.load(ctx, id)
		if err != nil || found {
			return job, err
		}
		now := r.cfg.Now().UTC()
		job = Job[Req]{ID: id, Status: StatusRunning, Request: req, Until: now, StartedAt: now, UpdatedAt: now}
		if until != nil {
			job.Until = *until
		}
		created, err := r.create(ctx, job)
		if err != nil || created {
			return job, err
		}
		// Another submit created it first: read the winner's record.
	}
}

// reload reads job's record again; job itself if the record expired.
func (r *Runner[Req, Rec]) reload(ctx context.Context, job Job[Req]) (Job[Req], error) {
	fresh, found, err := r.load(ctx, job.ID)
	if err != nil || !found {
		return job, err
	}
	return fresh, nil
}

// launch runs job, whose lease token holds, in a goroutine Stop waits
// for; false when stopped. The check and the Add share the lock with Stop,
// so no Add follows its Wait. A job never runs twice here: two goroutines
// would share its progress.
func (r *Runner[Req, Rec]) launch(job Job[Req], token string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	if _, ok := r.running[job.ID]; ok {
		return true
	}
	r.running[job.ID] = &job
	r.cfg.Logger.Info(r.cfg.Name+" started", append([]any{"job", job.ID}, r.cfg.Describe(job.Request)...)...)
	r.jobs.Add(1)
	ctx := r.ctx
	go func() {
		defer r.jobs.Done()
		r.run(ctx, job.ID, token)
	}()
	return true
}

// run steps through the job until it is complete, the runner stops, a
// step fails, or the job's lease is lost. Then another runner has the job:
// this one stops its step and writes nothing more, or both would write
// the job's record and produce its pages.
func (r *Runner[Req, Rec]) run(ctx context.Context, id, token string) {
	defer r.forget(id)
	stepCtx, cancel := context.WithCancel(ctx)
	lost := r.keepLease(stepCtx, cancel, id, token)
	var err error
	for done := false; !done && err == nil; {
		done, err = r.step(stepCtx, id, token)
	}
	cancel()
	if <-lost || errors.Is(err, errLeaseLost) {
		r.cfg.Logger.Warn(r.cfg.Name+" lost its lease: stopped here, another runner may run it", "job", id)
		return
	}
	r.finish(ctx, id, token, err)
}

// keepLease renews the job's lease every RenewEvery, during steps too,
// from a goroutine that ends with ctx. When a renewal finds the lease gone
// or another runner's, it cancels ctx (and so the step). The channel gets
// whether it did once the goroutine ends: run waits for it.
func (r *Runner[Req, Rec]) keepLease(ctx context.Context, cancel context.CancelFunc, id, token string) <-chan bool {
	lost := make(chan bool, 1)
	go func() {
		tick := time.NewTicker(r.cfg.RenewEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				lost <- false
				return
			case <-tick.C:
			}
			err := r.renewLease(ctx, id, token)
			if errors.Is(err, errLeaseLost) {
				cancel()
				lost <- true
				return
			}
			if err != nil && ctx.Err() == nil { // the next renewal tells whether it is still ours
				r.cfg.Logger.Warn("could not renew "+r.cfg.Name+" lease", "job", id, "err", err)
			}
		}
	}()
	return lost
}

// step does one step of the job and saves its progress, unless the lease
// is lost (errLeaseLost).
func (r *Runner[Req, Rec]) step(ctx context.Context, id, token string) (done bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	job, _ := r.snapshot(id)
	s, err := r.cfg.Kind.Step(ctx, job)
	if err != nil {
		return false, err
	}
	saved := r.update(id, func(j *Job[Req], _ time.Time) {
		j.add(s.Progress)
		j.Cursor = s.Next
	})
	if err := r.save(ctx, saved, token); err != nil {
		return false, err
	}
	return s.Next == "", nil
}

// finish records how the job ended, unless its lease is lost.
func (r *Runner[Req, Rec]) finish(ctx context.Context, id, token string, err error) {
	saved := r.update(id, func(j *Job[Req], now time.Time) {
		switch {
		case err == nil:
			j.Status, j.FinishedAt = StatusDone, &now
		case errors.Is(err, context.Canceled) && ctx.Err() != nil:
			// Stopping: the job stays "running" with its cursor saved and
			// its lease left to expire, so a repeated request resumes it.
		default:
			j.Status, j.Error = StatusFailed, err.Error()
		}
	})
	// The job's context may be cancelled; its end must be saved anyway.
	saveCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSaveTimeout)
	defer cancel()
	if errors.Is(r.save(saveCtx, saved, token), errLeaseLost) {
		r.cfg.Logger.Warn(r.cfg.Name+" lost its lease: its end is not saved, another runner may run it", "job", id)
		return
	}
	if saved.Status != StatusRunning {
		r.dropLease(saveCtx, id, token)
	}
	r.cfg.Logger.Info(r.cfg.Name+" ended", "job", id, "status", saved.Status, r.cfg.SentName, saved.Sent,
		"skipped", saved.Skipped, "already_"+r.cfg.SentName, saved.AlreadySent, "err", saved.Error)
}

// update changes a running job under the lock, stamps it, and returns a
// copy to save.
func (r *Runner[Req, Rec]) update(id string, change func(j *Job[Req], now time.Time)) Job[Req] {
	now := r.cfg.Now().UTC()
	r.mu.Lock()
	defer r.mu.Unlock()
	j := r.running[id]
	change(j, now)
	j.UpdatedAt = now
	return *j
}

func (r *Runner[Req, Rec]) snapshot(id string) (Job[Req], bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	j, ok := r.running[id]
	if !ok {
		return Job[Req]{}, false
	}
	return *j, true
}

// forget drops a job that stopped here, and wakes the watchers: its
// progress is read from Redis from now on.
func (r *Runner[Req, Rec]) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, id)
	r.wake()
}

// saved wakes the watchers after a save.
func (r *Runner[Req, Rec]) saved() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wake()
}

// wake closes the channel Watch gave out, under r.mu.
func (r *Runner[Req, Rec]) wake() {
	close(r.changed)
	r.changed = make(chan struct{})
}

// sameRequest compares two normalised requests by their JSON, the form in
// which a job keeps its request.
func sameRequest[Req any](a, b Req) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
