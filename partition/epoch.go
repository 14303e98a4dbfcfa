package partition

import (
	"slices"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Late appends of an earlier owner. An owner that gives its partition up
// (revoked, lost, or stopped while Kafka is unreachable) cannot take back
// the appends it handed to the producer: the producer retries them until
// they land, which may be after the next owner has scanned the parked
// partition and appended records of its own. Read back as live, such a
// record would deliver, under a webhook-id the receiver has not seen, a
// revision after the newer ones the next owner delivered from its replay
// (the chaos "broker" scenario found it; seed 4101 of the simulator).
//
// So an owner takes the partition over before it appends anything: once
// its assignment scan has read the parked partition to its end, it appends
// a takeover record naming the latest valid takeover record it found, and
// reads on up to its own. Its takeover is valid when no other valid one
// came between: then its offset is the owner's epoch, which every record
// it appends carries. A takeover naming an older one (an earlier owner's
// that landed late) is not valid; an owner whose own is overtaken so
// appends another. A record is stale when its epoch is not the latest
// valid takeover before it: an earlier owner's append that landed after a
// later owner took over. Every owner skips stale records alike, so what
// one reads back the next reads back too; the delivery a stale record
// carried is not lost, since its writer never finished its deliveries
// offset, and the next owner replays it from the deliveries partition.
//
// Epochs are offsets of the parked partition, not group generations: they
// grow with the log whatever happens to the consumer group (deleted and
// made again). Records without an epoch (written by an older version,
// during a rolling upgrade) are never stale.
//
// An owner that lost the partition without knowing it yet must not take it
// over from the owner the group gave it to. So a takeover record also
// carries its owner's group generation, and an owner does not take over
// (or again) from a takeover of a higher generation: it waits until it
// learns of the loss. It does when the commit named no takeover: the group
// may then be new, its generations counting from 1 again.

const (
	// EpochHeader carries the epoch of the owner that appended a record:
	// the offset of its takeover record.
	EpochHeader = "laneway-epoch"
	// TakeoverHeader marks a takeover record; its value is the offset of
	// the latest valid takeover record its owner had found (-1: none).
	TakeoverHeader = "laneway-takeover"
	// GenerationHeader carries, on a takeover record, its owner's
	// consumer-group generation.
	GenerationHeader = "laneway-generation"
)

// epochs is what an owner knows of the takeover records of its parked
// partition.
type epochs struct {
	// base is the latest valid takeover record below the scan's start
	// (from the commit's metadata), -1 when unknown; valid are those the
	// scan found at or above it, ascending.
	base  int64
	valid []int64
	// gens are the generations of the valid takeovers the scan read (by
	// offset); generation is this owner's.
	gens       map[int64]int64
	generation int64
	yielded    bool // a later owner's takeover was found: this one waits to be stopped
	// epoch is this owner's: its valid takeover record's offset, -1 until
	// the scan has read it. Nothing else is appended before.
	epoch int64
	// takeoverOut: a takeover record of this owner is queued or out, or in
	// Kafka at takeoverAt (-1 until acknowledged) and not yet read.
	takeoverOut  bool
	takeoverAt   int64
	staleSkipped int // stale records the scan skipped
}

func (e *epochs) init(base, generation int64) {
	e.base, e.valid, e.epoch, e.takeoverOut, e.takeoverAt = base, nil, -1, false, -1
	e.gens, e.generation = map[int64]int64{}, generation
}

// latestValid returns the latest valid takeover record before offset, -1
// when unknown.
func (e *epochs) latestValid(offset int64) int64 {
	i := sort.Search(len(e.valid), func(i int) bool { return e.valid[i] >= offset })
	if i == 0 {
		return e.base
	}
	return e.valid[i-1]
}

// stale reports whether r is an earlier owner's append that landed after a
// later owner took over.
func (e *epochs) stale(r *kgo.Record) bool {
	epoch, ok := headerInt(r, EpochHeader)
	if !ok {
		return false
	}
	latest := e.latestValid(r.Offset)
	return latest >= 0 && epoch != latest && !mutated("stale-parked-accepted")
}

// noteTakeover takes a takeover record the scan read, in order: it is valid
// when it names the latest valid one before it (or when none is known).
func (e *epochs) noteTakeover(r *kgo.Record) {
	prev, _ := headerInt(r, TakeoverHeader)
	if latest := e.latestValid(r.Offset); latest < 0 || prev == latest {
		e.valid = append(e.valid, r.Offset)
		if gen, ok := headerInt(r, GenerationHeader); ok {
			e.gens[r.Offset] = gen
		}
	}
}

// newerOwner returns the generation of the latest valid takeover the scan
// read, when it is above this owner's and the commit named a takeover (so
// the group is the one that gave this owner the partition): a later owner
// took over, and this one must not.
func (e *epochs) newerOwner() (int64, bool) {
	if e.base < 0 || len(e.valid) == 0 {
		return 0, false
	}
	gen, ok := e.gens[e.valid[len(e.valid)-1]]
	return gen, ok && gen > e.generation
}

// skipStale reports whether r is stale, and logs and counts it when it
// is. Each reader of the record counts it again (the scan, then the
// lane's read-back; every later owner), so the count is of skips.
func (o *Owner) skipStale(r *kgo.Record) bool {
	if !o.stale(r) {
		return false
	}
	o.cfg.Metrics.StaleSkipped()
	o.log.Warn("stale parked record skipped: an earlier owner's append landed after a later owner took over",
		"endpoint", string(r.Key), "offset", r.Offset, "src", SrcOffset(r))
	return true
}

// headerInt returns the integer value of r's header key, and whether it has
// one that parses.
func headerInt(r *kgo.Record, key string) (int64, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			v, err := strconv.ParseInt(string(h.Value), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

func isTakeover(r *kgo.Record) bool {
	_, ok := headerInt(r, TakeoverHeader)
	return ok
}

// stampEpoch sets r's epoch header to epoch.
func stampEpoch(r *kgo.Record, epoch int64) {
	v := []byte(strconv.FormatInt(epoch, 10))
	for i := range r.Headers {
		if r.Headers[i].Key == EpochHeader {
			r.Headers[i].Value = v
			return
		}
	}
	r.Headers = append(r.Headers, kgo.RecordHeader{Key: EpochHeader, Value: v})
}

// issueAppend hands an append to the driver, stamped with this owner's
// epoch (a takeover record carries none).
func (o *Owner) issueAppend(a *Append) {
	if !a.takeover {
		stampEpoch(a.Record, o.epoch)
	}
	o.cfg.Effects.Append(a)
}

// takeOver queues a takeover record, naming the latest valid one the scan
// found, ahead of every other append; unless a later owner took over.
func (o *Owner) takeOver() {
	if gen, newer := o.newerOwner(); newer {
		if !o.yielded {
			o.yielded = true
			o.log.Warn("a later owner took the parked partition over; not taking it over (this member lost the partition)",
				"generation", o.generation, "later_generation", gen)
		}
		return
	}
	o.takeoverOut, o.takeoverAt = true, -1
	prev := o.latestValid(o.scanCursor)
	rec := &kgo.Record{
		Topic: o.cfg.ParkedTopic, Partition: o.cfg.Partition,
		Headers: []kgo.RecordHeader{
			{Key: TakeoverHeader, Value: []byte(strconv.FormatInt(prev, 10))},
			{Key: GenerationHeader, Value: []byte(strconv.FormatInt(o.generation, 10))},
		},
	}
	o.appendSeq++
	o.appends.queued = slices.Insert(o.appends.queued, 0, &Append{Record: rec, src: -1, seq: o.appendSeq, takeover: true})
	o.flushOutboxes(o.now())
}

// tookOver records this owner's takeover record in Kafka at offset; the
// scan reads on up to it.
func (o *Owner) tookOver(offset int64) {
	o.takeoverAt = offset
	o.parkedEnd = max(o.parkedEnd, offset+1)
	if !o.stopped {
		o.scanRead()
	}
}

// checkOwnTakeover settles this owner's takeover record once the scan has
// read it: valid, its offset is the epoch; overtaken by another owner's, a
// new one is appended once the scan reaches the end again.
func (o *Owner) checkOwnTakeover() {
	if o.epoch >= 0 || o.takeoverAt < 0 || o.scanCursor <= o.takeoverAt {
		return
	}
	if slices.Contains(o.valid, o.takeoverAt) {
		o.epoch = o.takeoverAt
		o.log.Info("took the parked partition over", "epoch", o.epoch)
		return
	}
	o.log.Warn("takeover record overtaken by another owner's; taking over again", "at", o.takeoverAt)
	o.takeoverOut, o.takeoverAt = false, -1
}
