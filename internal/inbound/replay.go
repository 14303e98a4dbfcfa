package inbound

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/ops/jobs/jobrecord"
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

// Validate checks the request's shape; a *jobs.RequestError says what is
// wrong.
func (r ReplayRequest) Validate() error {
	switch {
	case r.Action != ActionReverify && r.Action != ActionRepublish:
		return refused("action must be reverify or republish")
	case len(r.IDs) == 0 && r.Since == nil:
		return refused("give ids, or since with an optional until, source and status")
	case len(r.IDs) > 0 && (r.Source != "" || r.Status != "" || r.Since != nil || r.Until != nil):
		return refused("ids cannot be combined with source, status, since or until")
	case len(r.IDs) > MaxReplayIDs:
		return refused(fmt.Sprintf("at most %d ids per request; use a time range for more", MaxReplayIDs))
	case r.Status != "" && r.Status != StatusVerified && r.Status != StatusRejected && r.Status != StatusDuplicate:
		return refused("status must be verified, rejected or duplicate (pending requests are verified anyway)")
	case r.Since != nil && r.Until != nil && r.Until.Before(*r.Since):
		return refused("until is before since")
	}
	for _, id := range r.IDs {
		if _, _, ok := ParseRequestID(id); !ok {
			return refused(fmt.Sprintf("%q is not a request id (in_<partition>_<offset>)", id))
		}
	}
	return nil
}

func refused(reason string) error { return &jobs.RequestError{Kind: "replay", Reason: reason} }

// selection is where a request names its captures, for jobs.Prepare.
func selection(r *ReplayRequest) jobs.Selection {
	return jobs.Selection{IDs: &r.IDs, Since: &r.Since, Until: &r.Until}
}

// ReplayJob is a replay's progress. Replayed requests are copied to the
// end of the inbound topic and verified there by the verify stage; their
// outcomes are listed with job = the job's id. Scanned counts records
// examined (ids for an id list); Replayed the requests copied; Skipped
// those that cannot be replayed (expired, not a capture, refused at the
// door); AlreadyReplayed those this job copied before it was resumed.
type ReplayJob struct {
	jobrecord.Head[ReplayRequest]
	Replayed        int64 `json:"replayed"`
	Skipped         int64 `json:"skipped"`
	AlreadyReplayed int64 `json:"already_replayed"`
	jobrecord.Tail
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

// replayer runs replay jobs in the background on a jobs.Runner (as
// deadletter.Redriver does): a repeated request for a job whose runner
// went away resumes it from its last saved cursor.
type replayer struct {
	// Runner serves Submit (which starts the replay of a request, or
	// returns the job already started for the same request or idempotency
	// key), Start, Stop (which cancels running jobs, their progress staying
	// in Redis for a repeated request to resume), Get and Watch.
	*jobs.Runner[ReplayRequest, ReplayJob]
}

// newReplayer returns a replayer; Start lets it run jobs.
func newReplayer(cfg replayConfig) *replayer {
	kind := &replay{cfg: cfg, markers: jobs.Markers{Redis: cfg.redis, TTL: cfg.jobTTL, Name: "inbound replay", Logger: cfg.logger}}
	runner, err := jobs.New(jobs.Config[ReplayRequest, ReplayJob]{
		Kind:    jobs.Paged(kind, jobs.Format[ReplayRequest, ReplayJob]{Fields: replayFields}),
		Prepare: jobs.Prepare(ReplayRequest.Validate, selection), Redis: cfg.redis, Name: "inbound replay", IDPrefix: "rp_", SentName: "replayed",
		JobKeyPrefix: cfg.prefix + "inbound:replay:", LeaseKeyPrefix: cfg.prefix + "inbound:replay-lease:",
		Describe: func(req ReplayRequest) []any {
			return []any{"action", req.Action, "source", req.Source, "ids", len(req.IDs)}
		},
		JobTTL: cfg.jobTTL, Lease: cfg.lease, Logger: cfg.logger, Now: cfg.now,
	})
	if err != nil {
		// Only a field missing from the literal above fails: a bug here.
		panic("inbound: " + err.Error())
	}
	return &replayer{Runner: runner}
}

// replay is the replay job's pager: each step copies one page of captures
// to the end of the inbound topic.
type replay struct {
	cfg     replayConfig
	markers jobs.Markers
}

// replayFields are where a replay's record keeps a job's parts.
func replayFields(j *ReplayJob) (*jobrecord.Head[ReplayRequest], *int64, *int64, *int64, *jobrecord.Tail) {
	return &j.Head, &j.Replayed, &j.Skipped, &j.AlreadyReplayed, &j.Tail
}

// Page returns the ids of the step's requests: the next slice of the
// request's list (the cursor is an index into it), or the next page of
// the finder's search.
func (k *replay) Page(ctx context.Context, job jobs.Job[ReplayRequest]) (ids []string, scanned int, next string, err error) {
	if all := job.Request.IDs; len(all) > 0 {
		from, _ := strconv.Atoi(job.Cursor) // "" is 0
		to := min(from+k.cfg.pageSize, len(all))
		if to < len(all) {
			next = strconv.Itoa(to)
		}
		return all[from:to], to - from, next, nil
	}
	found, err := k.cfg.finder.Find(ctx, filterOf(job), job.Cursor, k.cfg.pageSize)
	if err != nil {
		return nil, 0, "", err
	}
	for _, it := range found.Items {
		ids = append(ids, it.ID)
	}
	return ids, found.Scanned, found.Next, nil
}

func filterOf(j jobs.Job[ReplayRequest]) Filter {
	f := Filter{Source: j.Request.Source, Status: j.Request.Status, Until: j.Until, decided: true}
	if j.Request.Since != nil {
		f.Since = *j.Request.Since
	}
	return f
}

// Send copies the captures named by ids to the end of the inbound topic,
// marked with the action and job, skipping those this job copied before.
func (k *replay) Send(ctx context.Context, job jobs.Job[ReplayRequest], ids []string) (jobs.Progress, error) {
	var p jobs.Progress
	sent := k.markers.Sent(ctx, k.markerKeys(job.ID, ids))
	var fresh []string
	var recs []*kgo.Record
	now := k.cfg.now().UTC()
	for i, id := range ids {
		if sent[i] {
			p.AlreadySent++
			continue
		}
		capt, ok, err := k.cfg.finder.Get(ctx, id)
		if err != nil {
			return p, err
		}
		if !ok || capt.Reject != "" {
			p.Skipped++
			continue
		}
		if capt.ReplayOf == "" {
			capt.ReplayOf = capt.ID
		}
		capt.Action, capt.Job = job.Request.Action, job.ID
		recs, fresh = append(recs, capt.record(k.cfg.topic, now)), append(fresh, id)
	}
	if err := k.markers.Write(ctx, k.cfg.producer, recs, k.markerKeys(job.ID, fresh)); err != nil {
		return p, fmt.Errorf("write replayed requests: %w", err)
	}
	if len(recs) > 0 {
		k.cfg.metrics.replayed.WithLabelValues(job.Request.Action).Add(float64(len(recs)))
	}
	p.Sent = int64(len(fresh))
	return p, nil
}

// markerKeys are per job: a capture may be replayed again by a later job
// (that is what replays are for), never twice by one.
func (k *replay) markerKeys(job string, ids []string) []string {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = k.cfg.prefix + "inbound:replayed:" + job + ":" + id
	}
	return keys
}
