package jobs

import (
	"context"
	"crypto/rand"
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

// Scripts that act only while the caller's token holds the lease, so
// that a runner that lost its job cannot touch it (KEYS[1] is the lease).
// The job's record and lease share one Redis (not a cluster: the scripts
// take two keys).
var (
	// saveHeld writes the record (KEYS[2], ARGV[2], ARGV[3] ms) and
	// extends the lease (ARGV[4] ms); 0 when the lease is not ARGV[1]'s.
	saveHeld = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)
	// renewHeld extends the lease (ARGV[2] ms); 0 when it is not ARGV[1]'s.
	renewHeld = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('PEXPIRE', KEYS[1], ARGV[2])
`)
	// dropHeld deletes the lease if it is ARGV[1]'s.
	dropHeld = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
`)
)

// errLeaseLost ends a job on a runner whose lease lapsed or was taken by
// another runner, which now runs the job.
var errLeaseLost = errors.New("jobs: the lease is gone or another runner's")

// save stores progress while token holds the job's lease, and extends the
// lease: errLeaseLost when it does not. A Redis failure is logged, not
// fatal: the job runs on, and this process still answers for it from
// memory; the next renewal tells whether the lease is still ours.
func (r *Runner[Req, Rec]) save(ctx context.Context, j Job[Req], token string) error {
	defer r.saved()
	held, err := saveHeld.Run(ctx, r.cfg.Redis, []string{r.cfg.LeaseKeyPrefix + j.ID, r.cfg.JobKeyPrefix + j.ID},
		token, r.encode(j), r.cfg.JobTTL.Milliseconds(), r.cfg.Lease.Milliseconds()).Int()
	if err != nil {
		r.cfg.Logger.Warn("could not save "+r.cfg.Name+" progress", "job", j.ID, "err", err)
		return nil
	}
	if held == 0 {
		return errLeaseLost
	}
	return nil
}

func (r *Runner[Req, Rec]) encode(j Job[Req]) []byte {
	raw, _ := json.Marshal(r.cfg.Kind.Record(j)) // records are plain structs: they always encode
	return raw
}

// takeLease claims the job for this process under a new random token, the
// lease's owner; "" means another runs it.
func (r *Runner[Req, Rec]) takeLease(ctx context.Context, id string) (string, error) {
	token := rand.Text()
	ok, err := r.cfg.Redis.SetNX(ctx, r.cfg.LeaseKeyPrefix+id, token, r.cfg.Lease).Result()
	if err != nil {
		return "", fmt.Errorf("%s lease: %w", r.cfg.Name, err)
	}
	if !ok {
		return "", nil
	}
	return token, nil
}

// renewLease keeps the job ours while it runs: errLeaseLost when the lease
// lapsed or another runner holds it. A lapsed lease is not taken again:
// another runner may have run the job, even to its end, since.
func (r *Runner[Req, Rec]) renewLease(ctx context.Context, id, token string) error {
	held, err := renewHeld.Run(ctx, r.cfg.Redis, []string{r.cfg.LeaseKeyPrefix + id}, token, r.cfg.Lease.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("renew %s lease: %w", r.cfg.Name, err)
	}
	if held == 0 {
		return errLeaseLost
	}
	return nil
}

// dropLease frees a job no one runs any more, so a repeated request need
// not wait out the lease, unless another runner holds it by now. A
// failure only delays that.
func (r *Runner[Req, Rec]) dropLease(ctx context.Context, id, token string) {
	dropHeld.Run(ctx, r.cfg.Redis, []string{r.cfg.LeaseKeyPrefix + id}, token)
}
