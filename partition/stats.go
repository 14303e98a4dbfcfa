package partition

import (
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/ops/health"
)

// Outcome kinds counted per endpoint for its health.
const (
	kindDelivered = iota
	kindFailed
	kindDead
	kindSuperseded
	kinds
)

// windowBuckets × bucketSeconds is the span of an endpoint's per-minute
// counts; five-second buckets keep an endpoint's stats under 500 bytes.
const (
	windowBuckets = 12
	bucketSeconds = 5
)

// outcomeWindow counts outcomes over the last minute in five-second buckets.
type outcomeWindow struct {
	counts [windowBuckets][kinds]int64
	slot   [windowBuckets]int64 // which five-second slot each bucket holds
}

func (w *outcomeWindow) add(kind int, now time.Time) {
	slot := now.Unix() / bucketSeconds
	i := slot % windowBuckets
	if w.slot[i] != slot {
		w.slot[i], w.counts[i] = slot, [kinds]int64{}
	}
	w.counts[i][kind]++
}

func (w *outcomeWindow) perMinute(now time.Time) (pm health.PerMinute, any bool) {
	current := now.Unix() / bucketSeconds
	var sum [kinds]int64
	for i := range windowBuckets {
		if current-w.slot[i] >= windowBuckets {
			continue // older than a minute
		}
		for k := range kinds {
			sum[k] += w.counts[i][k]
			any = any || w.counts[i][k] > 0
		}
	}
	return health.PerMinute{Delivered: sum[kindDelivered], Failed: sum[kindFailed], Dead: sum[kindDead],
		Superseded: sum[kindSuperseded]}, any
}

// endpointStats is what an endpoint's health needs beyond its lane.
type endpointStats struct {
	window        outcomeWindow
	lastError     string
	lastErrorAt   time.Time
	lastSuccessAt time.Time
	parkedReason  string
}

// statsOf returns the endpoint's stats, creating them (and asking for the
// previous owner's last success and error) on first use.
func (o *Owner) statsOf(id string) *endpointStats {
	st, ok := o.stats[id]
	if !ok {
		st = &endpointStats{}
		o.stats[id] = st
		o.cfg.Effects.LoadHealth(id)
	}
	return st
}

// HealthLoaded carries an endpoint's last success and last error over from
// its last published snapshot, so a rebalance does not blank them.
func (o *Owner) HealthLoaded(id string, snap health.Snapshot) {
	st, ok := o.stats[id]
	if !ok {
		return
	}
	if st.lastSuccessAt.IsZero() && snap.LastSuccessAt != nil {
		st.lastSuccessAt = *snap.LastSuccessAt
	}
	if st.lastErrorAt.IsZero() && snap.LastErrorAt != nil {
		st.lastError, st.lastErrorAt = snap.LastError, *snap.LastErrorAt
	}
}

// noteOutcome counts a finished attempt or delivery for the endpoint's
// health (attempt errors are noted by recordAttempt).
func (o *Owner) noteOutcome(id string, kind int, now time.Time) {
	st := o.statsOf(id)
	st.window.add(kind, now)
	if kind == kindDelivered {
		st.lastSuccessAt = now
	}
}

// Snapshots appends the health of every endpoint the owner holds or has
// seen lately. Stats of endpoints that went idle are dropped after this last
// report; Redis keeps it.
func (o *Owner) Snapshots(now time.Time, out []health.Snapshot) []health.Snapshot {
	for id := range o.lanes {
		o.statsOf(id)
	}
	for id := range o.parked {
		o.statsOf(id)
	}
	for id, st := range o.stats {
		snap, active := o.snapshot(id, st, now)
		out = append(out, snap)
		if !active {
			delete(o.stats, id)
		}
	}
	return out
}

// snapshot builds one endpoint's snapshot and reports whether the endpoint
// still has work or recent outcomes.
func (o *Owner) snapshot(id string, st *endpointStats, now time.Time) (health.Snapshot, bool) {
	snap := health.Snapshot{EndpointID: id, UpdatedAt: now.UTC()}
	snap.Owner, snap.LastError = o.cfg.InstanceID, st.lastError
	ls, laned := o.lanes[id]
	pl := o.parked[id]
	if laned {
		snap.Pending, snap.InFlight = ls.lane.Pending(), ls.lane.InFlight()
	}
	if age := oldestAge(ls, pl, now); age > 0 {
		since := now.Add(-time.Duration(age * float64(time.Second))).UTC()
		snap.OldestPendingSince = &since
	}
	if pl != nil {
		snap.Parked, snap.ParkedReason = pl.backlog, st.parkedReason
		if snap.ParkedReason == "" {
			snap.ParkedReason = "parked"
		}
	}
	if b := o.cfg.Breakers; b != nil {
		br := b.Get(id)
		snap.Breaker = health.Breaker{State: br.State.String(), ConsecutiveFailures: br.ConsecutiveFailures}
		if !br.PausedUntil.IsZero() {
			at := br.PausedUntil.UTC()
			snap.Breaker.PausedUntil = &at
		}
	} else {
		snap.Breaker.State = "closed"
	}
	snap.LastErrorAt = timePtr(st.lastErrorAt)
	snap.LastSuccessAt = timePtr(st.lastSuccessAt)
	var recent bool
	snap.PerMinute, recent = st.window.perMinute(now)
	return snap, laned || pl != nil || recent
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// EndpointGauge is one endpoint's live state, for metrics.
type EndpointGauge struct {
	ID          string
	Pending     int
	InFlight    int
	OldestAge   float64 // seconds, parked backlog included
	Parked      int
	BreakerOpen bool
	// Healthy: the endpoint is keeping up (active, not paused, not parked,
	// breaker closed), so its lag is the platform's; the gauge
	// laneway_healthy_oldest_pending_age_seconds is over these.
	Healthy bool
	// ParkedAge is the age of the oldest parked record not yet read back,
	// in seconds (0 without one): compared with the parked topic's
	// retention, it warns before retention deletes what is not delivered.
	ParkedAge float64
}

// PartitionGauge is the partition's live state, for metrics.
type PartitionGauge struct {
	Partition int32
	// Tracked is false until the first record arrived.
	Tracked bool
	// WatermarkLag is offsets between the high watermark and the watermark.
	WatermarkLag int64
	// WatermarkAge is how long the lowest unfinished offset has waited.
	WatermarkAge float64
}

// Gauges reports the live state of the owner's endpoints and partition:
// every endpoint with a lane, a parked backlog, or outcomes in the last
// minute (so a breaker that just closed is seen at 0 before the series
// goes).
func (o *Owner) Gauges(now time.Time, each func(EndpointGauge)) PartitionGauge {
	for id := range o.stats {
		each(o.endpointGauge(id, o.lanes[id], now))
	}
	for id, ls := range o.lanes {
		if _, ok := o.stats[id]; !ok {
			each(o.endpointGauge(id, ls, now))
		}
	}
	for id := range o.parked {
		if _, laned := o.lanes[id]; !laned {
			if _, ok := o.stats[id]; !ok {
				each(o.endpointGauge(id, nil, now))
			}
		}
	}
	pg := PartitionGauge{Partition: o.cfg.Partition}
	if o.tracker == nil {
		return pg
	}
	pg.Tracked = true
	lag := max(0, o.highWatermark-o.tracker.Watermark())
	if o.tracker.Outstanding() == 0 && lag <= 1 {
		lag = 0 // the last offset of a transactional topic is a commit marker
	}
	pg.WatermarkLag = lag
	if since, ok := o.tracker.OldestPendingSince(); ok {
		pg.WatermarkAge = now.Sub(since).Seconds()
	}
	return pg
}

func (o *Owner) endpointGauge(id string, ls *laneState, now time.Time) EndpointGauge {
	pl := o.parked[id]
	g := EndpointGauge{ID: id, OldestAge: oldestAge(ls, pl, now)}
	if ls != nil {
		g.Pending, g.InFlight = ls.lane.Pending(), ls.lane.InFlight()
	}
	if pl != nil {
		g.Parked = pl.backlog
		if pl.backlog > 0 {
			g.ParkedAge = now.Sub(pl.oldestBacklog).Seconds()
		}
	}
	if b := o.cfg.Breakers; b != nil {
		st := b.Get(id).State
		g.BreakerOpen = st != breaker.Closed && st != ""
	}
	ep, ok := o.cfg.Endpoints.Get(id)
	g.Healthy = pl == nil && ok && !ep.Paused && ep.Status == endpoint.StatusActive && !g.BreakerOpen
	return g
}

// oldestAge is the age of the endpoint's oldest unfinished delivery,
// counting those still waiting in the parked topic.
func oldestAge(ls *laneState, pl *parkedLane, now time.Time) float64 {
	var oldest time.Time
	if ls != nil {
		if at, ok := ls.lane.OldestEnqueuedAt(); ok {
			oldest = at
		}
	}
	if pl != nil && pl.backlog > 0 && (oldest.IsZero() || pl.oldestBacklog.Before(oldest)) {
		oldest = pl.oldestBacklog
	}
	if oldest.IsZero() {
		return 0
	}
	return now.Sub(oldest).Seconds()
}
