package deadletter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/admin/wire"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/ops/jobs/jobrecord"
	"github.com/laneway/laneway/internal/plumbing/redisconn"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// MaxRequestIDs bounds the ids of one redrive request (a time range has no
// such bound).
const MaxRequestIDs = 10_000

// Request says which dead letters to redrive: the listed ids, or every
// letter of one endpoint in a time range (optionally of one reason).
type Request = wire.RedriveRequest

// Validate checks the request's shape; a *jobs.RequestError says what is
// wrong.
func Validate(r Request) error {
	switch {
	case len(r.IDs) == 0 && r.EndpointID == "":
		return refused("give ids, or endpoint_id with an optional since/until")
	case len(r.IDs) > 0 && (r.EndpointID != "" || r.Since != nil || r.Until != nil || r.Reason != ""):
		return refused("ids cannot be combined with endpoint_id, reason, since or until")
	case len(r.IDs) > MaxRequestIDs:
		return refused(fmt.Sprintf("at most %d ids per request; use a time range for more", MaxRequestIDs))
	case r.Since != nil && r.Until != nil && r.Until.Before(*r.Since):
		return refused("until is before since")
	}
	for _, id := range r.IDs {
		if id == "" || len(id) > 1024 {
			return refused("ids must be non-empty and at most 1024 bytes")
		}
	}
	return nil
}

func refused(reason string) error { return &jobs.RequestError{Kind: "redrive", Reason: reason} }

// selection is where a request names its letters, for jobs.Prepare.
func selection(r *Request) jobs.Selection {
	return jobs.Selection{IDs: &r.IDs, Since: &r.Since, Until: &r.Until}
}

// Job is a redrive's progress, as the API shows it and Redis stores it.
type Job = wire.RedriveJob

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
	// KeyPrefix prefixes every Redis key. Default redisconn.DefaultKeyPrefix
	// ("laneway:").
	KeyPrefix string
	// PageSize is the number of letters read and written per step. Default
	// jobs.DefaultPageSize (500).
	PageSize int
	// JobTTL is how long a job's progress stays readable. Default
	// jobs.DefaultJobTTL (7 days).
	JobTTL time.Duration
	// MarkerTTL is how long a redriven letter is remembered, so that a
	// second redrive over the same range does not send it again. It
	// should match the dead topic's retention. Default 30 days.
	MarkerTTL time.Duration
	// Lease is how long a job's runner may go silent before a repeated
	// request resumes the job elsewhere. Default jobs.DefaultLease (30s).
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
	c.KeyPrefix = cmp.Or(c.KeyPrefix, redisconn.DefaultKeyPrefix)
	c.PageSize = valutil.PositiveOr(c.PageSize, jobs.DefaultPageSize)
	c.MarkerTTL = valutil.PositiveOr(c.MarkerTTL, 30*24*time.Hour)
	// JobTTL and Lease take their defaults in the job runner (jobs.Config).
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Now = timing.Clock(c.Now)
	return nil
}

// Redriver runs redrive jobs in the background (on a jobs.Runner). Jobs
// survive the process: a repeated request for a job whose runner went away
// resumes it from its last saved cursor.
type Redriver struct {
	// Runner serves Submit (which starts the redrive of a request, or
	// returns the job already started for the same request or idempotency
	// key), Start, Stop (which cancels running jobs, their progress staying
	// in Redis for a repeated request to resume) and Get.
	*jobs.Runner[Request, Job]
	kind *redrive
}

// NewRedriver checks cfg and returns a Redriver; Start lets it run jobs.
func NewRedriver(cfg Config) (*Redriver, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	kind := &redrive{cfg: cfg, markers: jobs.Markers{Redis: cfg.Redis, TTL: cfg.MarkerTTL, Name: "redrive", Logger: cfg.Logger}}
	// The topic is part of every key: Laneways with other topic prefixes
	// may share the Redis.
	runner, err := jobs.New(jobs.Config[Request, Job]{
		Kind:    jobs.Paged(kind, jobs.Format[Request, Job]{Fields: redriveFields}),
		Prepare: jobs.Prepare(Validate, selection), Redis: cfg.Redis, Name: "redrive", IDPrefix: "rd_", SentName: "redriven",
		JobKeyPrefix:   cfg.KeyPrefix + "redrive:" + cfg.Finder.topic + ":",
		LeaseKeyPrefix: cfg.KeyPrefix + "redrive-lease:" + cfg.Finder.topic + ":",
		Describe:       func(req Request) []any { return []any{"endpoint", req.EndpointID, "ids", len(req.IDs)} },
		JobTTL:         cfg.JobTTL, Lease: cfg.Lease, Logger: cfg.Logger, Now: cfg.Now,
	})
	if err != nil {
		return nil, err
	}
	return &Redriver{Runner: runner, kind: kind}, nil
}

// redrive is the redrive job's pager: each step writes one page of the
// matching letters back to the deliveries topic.
type redrive struct {
	cfg     Config
	markers jobs.Markers
}

// redriveFields are where a redrive's record keeps a job's parts.
func redriveFields(j *Job) (*jobrecord.Head[Request], *int64, *int64, *int64, *jobrecord.Tail) {
	return &j.Head, &j.Redriven, &j.Skipped, &j.AlreadyRedriven, &j.Tail
}

// Page reads the letters at job's cursor.
func (k *redrive) Page(ctx context.Context, job jobs.Job[Request]) ([]Letter, int, string, error) {
	page, err := k.cfg.Finder.Find(ctx, filterOf(job), job.Cursor, k.cfg.PageSize)
	return page.Items, page.Scanned, page.Next, err
}

func filterOf(j jobs.Job[Request]) Filter {
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

// Send writes the redrivable letters, in order, to the deliveries topic,
// skipping those an earlier redrive already sent.
func (k *redrive) Send(ctx context.Context, _ jobs.Job[Request], letters []Letter) (jobs.Progress, error) {
	var p jobs.Progress
	var candidates []Letter
	for _, l := range letters {
		if !k.redrivable(l) {
			p.Skipped++
			continue
		}
		candidates = append(candidates, l)
	}
	sent := k.markers.Sent(ctx, k.markerKeys(candidates))
	now := k.cfg.Now().UTC()
	var recs []*kgo.Record
	var fresh []Letter
	for i, l := range candidates {
		if sent[i] {
			p.AlreadySent++
			continue
		}
		rec, err := k.record(l, now)
		if err != nil {
			return p, err
		}
		recs, fresh = append(recs, rec), append(fresh, l)
	}
	if err := k.markers.Write(ctx, k.cfg.Producer, recs, k.markerKeys(fresh)); err != nil {
		return p, fmt.Errorf("write redriven deliveries: %w", err)
	}
	p.Sent = int64(len(fresh))
	return p, nil
}

// record is the letter's delivery as a fresh one: no attempts, due now.
func (k *redrive) record(l Letter, now time.Time) (*kgo.Record, error) {
	d := *l.Delivery
	d.Attempts, d.NotBefore, d.LastError, d.CreatedAt = 0, time.Time{}, "", now
	value, err := json.Marshal(&d)
	if err != nil {
		return nil, err
	}
	return &kgo.Record{Topic: k.cfg.DeliveriesTopic, Key: []byte(d.EndpointID), Value: value}, nil
}

// redrivable reports whether the letter holds a delivery whose endpoint
// exists and is active (a disabled endpoint would dead-letter it again).
func (k *redrive) redrivable(l Letter) bool {
	if l.Delivery == nil {
		return false
	}
	ep, ok := k.cfg.Endpoints.Get(l.Delivery.EndpointID)
	return ok && ep.Status == endpoint.StatusActive
}

// markerKeys name the letters by their place on the dead topic, so that any
// redrive over them (not only this job's) knows they were sent.
func (k *redrive) markerKeys(letters []Letter) []string {
	keys := make([]string, len(letters))
	for i, l := range letters {
		keys[i] = k.cfg.KeyPrefix + "redriven:" + k.cfg.Finder.topic + ":" + strconv.Itoa(int(l.Partition)) + ":" + strconv.FormatInt(l.Offset, 10)
	}
	return keys
}
