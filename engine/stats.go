package engine

import (
	"context"
	"time"

	"github.com/laneway/laneway/health"
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

// statsLocked returns the endpoint's stats, creating them (and loading the
// previous owner's last success and error in the background) on first use.
func (op *ownedPartition) statsLocked(id string) *endpointStats {
	st, ok := op.stats[id]
	if !ok {
		st = &endpointStats{}
		op.stats[id] = st
		op.seedStats(id, st)
	}
	return st
}

// seedStats carries an endpoint's last success and last error over from
// its last published snapshot, so a rebalance does not blank them.
func (op *ownedPartition) seedStats(id string, st *endpointStats) {
	load := op.s.cfg.LoadHealth
	if load == nil {
		return
	}
	op.s.background.Add(1)
	go func() {
		defer op.s.background.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		snap, ok, err := load(ctx, id)
		if err != nil || !ok {
			return
		}
		op.mu.Lock()
		defer op.mu.Unlock()
		if st.lastSuccessAt.IsZero() && snap.LastSuccessAt != nil {
			st.lastSuccessAt = *snap.LastSuccessAt
		}
		if st.lastErrorAt.IsZero() && snap.LastErrorAt != nil {
			st.lastError, st.lastErrorAt = snap.LastError, *snap.LastErrorAt
		}
	}()
}

// noteOutcomeLocked counts a finished attempt or delivery for the
// endpoint's health (attempt errors are noted by recordAttempt).
func (op *ownedPartition) noteOutcomeLocked(id string, kind int, now time.Time) {
	st := op.statsLocked(id)
	st.window.add(kind, now)
	if kind == kindDelivered {
		st.lastSuccessAt = now
	}
}

// Snapshots returns the health of every endpoint this instance owns and
// has seen lately. Stats of endpoints that went idle are dropped after
// this last report; Redis keeps it.
func (s *DeliveryStage) Snapshots(now time.Time) []health.Snapshot {
	var out []health.Snapshot
	for _, op := range s.ownedPartitions() {
		out = op.snapshots(now, out)
	}
	return out
}

func (op *ownedPartition) snapshots(now time.Time, out []health.Snapshot) []health.Snapshot {
	op.mu.Lock()
	defer op.mu.Unlock()
	for id := range op.lanes {
		op.statsLocked(id)
	}
	for id := range op.parked {
		op.statsLocked(id)
	}
	for id, st := range op.stats {
		snap, active := op.snapshotLocked(id, st, now)
		out = append(out, snap)
		if !active {
			delete(op.stats, id)
		}
	}
	return out
}

// snapshotLocked builds one endpoint's snapshot and reports whether the
// endpoint still has work or recent outcomes.
func (op *ownedPartition) snapshotLocked(id string, st *endpointStats, now time.Time) (health.Snapshot, bool) {
	snap := health.Snapshot{EndpointID: id, Owner: op.s.cfg.InstanceID, UpdatedAt: now.UTC(), LastError: st.lastError}
	ls, laned := op.lanes[id]
	pl := op.parked[id]
	if laned {
		snap.Pending, snap.InFlight = ls.lane.Pending(), ls.lane.InFlight()
		if age := oldestAge(ls, pl, now); age > 0 {
			since := now.Add(-time.Duration(age * float64(time.Second))).UTC()
			snap.OldestPendingSince = &since
		}
	}
	if pl != nil {
		snap.Parked, snap.ParkedReason = pl.backlog, st.parkedReason
		if snap.ParkedReason == "" {
			snap.ParkedReason = "parked"
		}
	}
	if b := op.s.cfg.Breakers; b != nil {
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
