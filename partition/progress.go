package partition

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Parked progress is kept per endpoint and committed with the deliveries
// watermark, as the metadata of the same offset commit:
//
//   - per endpoint, because one paused endpoint holds the lowest parked
//     offset still needed for days; a new owner that read every other
//     endpoint's records from there would deliver their finished parked
//     history again;
//   - in the deliveries commit, because the consumer group fences that
//     commit: a member that lost the partition has it refused, so a zombie
//     can never move the next owner's parked progress.

// DefaultMaxProgressBytes bounds the encoded progress, below Kafka's
// default offset.metadata.max.bytes (4096), which refuses the whole commit
// when passed.
const DefaultMaxProgressBytes = 3072

// ParkedProgress is how far the parked partition is finished.
type ParkedProgress struct {
	// Commit is the parked offset below which nothing is needed. The
	// assignment scan starts here.
	Commit int64
	// Endpoints are, per endpoint, the parked offset below which that
	// endpoint needs nothing (at or above Commit).
	Endpoints map[string]int64
	// Rest is that offset for an endpoint not in Endpoints: it had no
	// unfinished parked record below Rest. At least Commit.
	Rest int64
	// Takeover is one past the offset of the latest valid takeover record
	// below Commit (epoch.go), 0 when unknown.
	Takeover int64
}

// NeedsFrom returns the parked offset from which endpoint's records are
// still needed; a record below it was finished.
func (p ParkedProgress) NeedsFrom(endpoint string) int64 {
	if at, ok := p.Endpoints[endpoint]; ok {
		return max(at, p.Commit)
	}
	return max(p.Rest, p.Commit)
}

// from returns the progress with its commit raised to at least start (the
// log start, when retention removed what the commit named): every endpoint
// then needs nothing below it either, so no entry stays below the commit,
// which DecodeProgress would refuse.
func (p ParkedProgress) from(start int64) ParkedProgress {
	out := ParkedProgress{Commit: max(p.Commit, start), Endpoints: make(map[string]int64, len(p.Endpoints)), Takeover: p.Takeover}
	out.Rest = max(p.Rest, out.Commit)
	for id, at := range p.Endpoints {
		out.Endpoints[id] = max(at, out.Commit)
	}
	return out
}

// progressJSON is the encoded form; short names, since it shares Kafka's
// metadata limit.
type progressJSON struct {
	V int              `json:"v"`
	C int64            `json:"c"`
	R int64            `json:"r"`
	T int64            `json:"t,omitempty"`
	E map[string]int64 `json:"e,omitempty"`
}

// Encode returns the progress as commit metadata of at most maxBytes.
// When every endpoint does not fit, Rest falls to Commit and only the
// endpoints furthest ahead of it are kept: an endpoint left out is read
// from Commit again, which may repeat its finished deliveries but never
// skips an unfinished one.
func (p ParkedProgress) Encode(maxBytes int) string {
	if s := p.encode(); len(s) <= maxBytes {
		return s
	}
	ahead := make([]string, 0, len(p.Endpoints))
	for id, at := range p.Endpoints {
		if at > p.Commit {
			ahead = append(ahead, id)
		}
	}
	slices.SortFunc(ahead, func(a, b string) int {
		return cmp.Or(cmp.Compare(p.Endpoints[b], p.Endpoints[a]), cmp.Compare(a, b))
	})
	// Sized entry by entry in one pass (an entry is "id":offset and a
	// comma), then encoded; the estimate is exact, the loop only a guard.
	kept := ParkedProgress{Commit: p.Commit, Rest: p.Commit, Endpoints: map[string]int64{}, Takeover: p.Takeover}
	size := len(kept.encode()) + len(`,"e":{}`)
	for _, id := range ahead {
		quoted, _ := json.Marshal(id) // strings always encode
		size += len(quoted) + len(":,") + len(strconv.FormatInt(p.Endpoints[id], 10))
		if size-1 > maxBytes { // the last entry has no comma
			break
		}
		kept.Endpoints[id] = p.Endpoints[id]
	}
	for {
		if s := kept.encode(); len(s) <= maxBytes || len(kept.Endpoints) == 0 {
			return s
		}
		delete(kept.Endpoints, ahead[len(kept.Endpoints)-1]) // kept is a prefix of ahead
	}
}

func (p ParkedProgress) encode() string {
	b, err := json.Marshal(progressJSON{V: 1, C: p.Commit, R: max(p.Rest, p.Commit), T: p.Takeover, E: p.Endpoints})
	if err != nil {
		panic(err) // a struct of ints and a string map always encodes
	}
	return string(b)
}

// ErrNoProgress means the commit metadata holds no parked progress (a
// commit by an older version, or none yet).
var ErrNoProgress = errors.New("no parked progress in the commit metadata")

// DecodeProgress parses commit metadata written by Encode.
func DecodeProgress(s string) (ParkedProgress, error) {
	if s == "" {
		return ParkedProgress{}, ErrNoProgress
	}
	var j progressJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return ParkedProgress{}, fmt.Errorf("parked progress: %w", err)
	}
	if j.V != 1 {
		return ParkedProgress{}, fmt.Errorf("parked progress: unknown version %d", j.V)
	}
	if j.C < 0 || j.R < j.C {
		return ParkedProgress{}, fmt.Errorf("parked progress: commit %d, rest %d", j.C, j.R)
	}
	// An entry below the commit means the commit (NeedsFrom reads it so);
	// owners before 2026-12 could write one when retention had passed the
	// commit they were assigned.
	return ParkedProgress{Commit: j.C, Rest: j.R, Endpoints: j.E, Takeover: j.T}.from(j.C), nil
}

// Commit is what the driver commits for the partition, in one offset
// commit of the consumer group: the deliveries watermark, with the parked
// progress as its metadata.
type Commit struct {
	Deliveries int64
	Parked     ParkedProgress
	// Metadata is Parked encoded for the commit.
	Metadata string
}

// PendingCommit returns the commit to make, and false when nothing moved
// since the last one.
func (o *Owner) PendingCommit() (Commit, bool) {
	c := Commit{Deliveries: o.DeliveriesWatermark(), Parked: o.parkedProgress()}
	c.Metadata = c.Parked.Encode(o.cfg.MaxProgressBytes)
	return c, c.Deliveries != o.lastCommitted || c.Metadata != o.lastMetadata
}

// Committed records a commit that Kafka accepted.
func (o *Owner) Committed(c Commit) {
	o.lastCommitted, o.lastMetadata = c.Deliveries, c.Metadata
}

// parkedProgress is the progress to commit: until the assignment scan
// has read the parked partition, the one assigned (moved up to the log
// start if retention removed what it named).
func (o *Owner) parkedProgress() ParkedProgress {
	if !o.discovered {
		return o.assigned.from(o.scanStart)
	}
	p := ParkedProgress{Commit: o.parkedCommitOffset(), Rest: o.parkedEnd, Endpoints: make(map[string]int64, len(o.parked))}
	p.Takeover = o.latestValid(p.Commit) + 1
	for id, pl := range o.parked {
		p.Endpoints[id] = max(pl.lowestUnfinished()+int64(btoi(mutated("parked-progress-one-too-high"))), p.Commit)
	}
	p.Rest = max(p.Rest, p.Commit)
	return p
}
