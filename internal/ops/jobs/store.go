package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// A job's record is its kind's Rec as JSON, the format existing
// deployments wrote and still read while a fleet upgrades.

func (r *Runner[Req, Rec]) load(ctx context.Context, id string) (Job[Req], bool, error) {
	raw, err := r.cfg.Redis.Get(ctx, r.cfg.JobKeyPrefix+id).Bytes()
	if errors.Is(err, redis.Nil) {
		return Job[Req]{}, false, nil
	}
	if err != nil {
		return Job[Req]{}, false, fmt.Errorf("load %s %s: %w", r.cfg.Name, id, err)
	}
	var rec Rec
	if err := json.Unmarshal(raw, &rec); err != nil {
		return Job[Req]{}, false, fmt.Errorf("load %s %s: %w", r.cfg.Name, id, err)
	}
	return r.cfg.Kind.FromRecord(rec), true, nil
}

// create writes a new job's record unless one exists: false means another
// submit won the race.
func (r *Runner[Req, Rec]) create(ctx context.Context, j Job[Req]) (bool, error) {
	ok, err := r.cfg.Redis.SetNX(ctx, r.cfg.JobKeyPrefix+j.ID, r.encode(j), r.cfg.JobTTL).Result()
	if err != nil {
		return false, fmt.Errorf("create %s: %w", r.cfg.Name, err)
	}
	return ok, nil
}

// save stores progress. A failure is logged, not fatal: the job runs on,
// and this process still answers for it from memory.
func (r *Runner[Req, Rec]) save(ctx context.Context, j Job[Req]) {
	if err := r.cfg.Redis.Set(ctx, r.cfg.JobKeyPrefix+j.ID, r.encode(j), r.cfg.JobTTL).Err(); err != nil {
		r.cfg.Logger.Warn("could not save "+r.cfg.Name+" progress", "job", j.ID, "err", err)
	}
	r.saved()
}

func (r *Runner[Req, Rec]) encode(j Job[Req]) []byte {
	raw, _ := json.Marshal(r.cfg.Kind.Record(j)) // records are plain structs: they always encode
	return raw
}

// takeLease claims the job for this process; false means another runs it.
func (r *Runner[Req, Rec]) takeLease(ctx context.Context, id string) (bool, error) {
	ok, err := r.cfg.Redis.SetNX(ctx, r.cfg.LeaseKeyPrefix+id, "1", r.cfg.Lease).Result()
	if err != nil {
		return false, fmt.Errorf("%s lease: %w", r.cfg.Name, err)
	}
	return ok, nil
}

// renewLease keeps the job ours while it makes progress. If Redis lost
// the lease (flushed), it is simply taken again.
func (r *Runner[Req, Rec]) renewLease(ctx context.Context, id string) {
	if err := r.cfg.Redis.Set(ctx, r.cfg.LeaseKeyPrefix+id, "1", r.cfg.Lease).Err(); err != nil {
		r.cfg.Logger.Warn("could not renew "+r.cfg.Name+" lease", "job", id, "err", err)
	}
}

// dropLease frees a job no one runs any more, so a repeated request need
// not wait out the lease. A failure only delays that.
func (r *Runner[Req, Rec]) dropLease(ctx context.Context, id string) {
	r.cfg.Redis.Del(ctx, r.cfg.LeaseKeyPrefix+id)
}
