package partition

import (
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
// So each owner stamps its appends with its epoch, the consumer-group
// generation it was assigned the partition in (a later owner's is higher),
// and begins by appending a takeover record with its epoch, then scans the
// parked partition up to that record. A record is stale when a record of a
// higher epoch lies before it: an earlier owner's append that landed after
// a later owner took over. Every owner skips stale records alike, so what
// one owner read back the next reads back too; the delivery a stale record
// carried is not lost, since its deliveries offset was never finished by
// its writer, and the next owner replays it from the deliveries partition.
//
// Records without an epoch (written before epochs) are never stale: a
// rolling upgrade may hand a partition to an owner that does not stamp.

const (
	// EpochHeader carries the epoch of the owner that appended a record.
	EpochHeader = "laneway-epoch"
	// TakeoverHeader marks an owner's takeover record, which carries no
	// delivery.
	TakeoverHeader = "laneway-takeover"
)

// epochs is what an owner knows of the epochs in its parked partition.
type epochs struct {
	epoch int64 // this owner's
	// base is the highest epoch below the assigned parked commit (from the
	// commit's metadata); rises are the offsets at or above it where the
	// highest epoch so far rises, ascending (the scan finds them; the last
	// is this owner's takeover record).
	base  int64
	rises []epochRise
	// takeoverAt is the offset of this owner's takeover record, -1 until it
	// is acknowledged; the scan ends only past it.
	takeoverAt int64
	// takingOver is set from Assign until the takeover record is in
	// Kafka: nothing else is appended before it.
	takingOver   bool
	staleSkipped int // stale records the scan skipped
}

type epochRise struct{ at, epoch int64 }

// floorAt returns the highest epoch of the records before offset.
func (e *epochs) floorAt(offset int64) int64 {
	i := sort.Search(len(e.rises), func(i int) bool { return e.rises[i].at >= offset })
	if i == 0 {
		return e.base
	}
	return e.rises[i-1].epoch
}

// stale reports whether r is an earlier owner's append that landed after a
// later owner took over.
func (e *epochs) stale(r *kgo.Record) bool {
	epoch, ok := epochOf(r)
	return ok && epoch < e.floorAt(r.Offset)
}

// noteEpoch takes a record the scan read in order and did not find stale.
func (e *epochs) noteEpoch(r *kgo.Record) {
	if epoch, ok := epochOf(r); ok && epoch > e.floorAt(r.Offset) {
		e.rises = append(e.rises, epochRise{at: r.Offset, epoch: epoch})
	}
}

// epochOf returns the epoch r was stamped with, and whether it was.
func epochOf(r *kgo.Record) (int64, bool) {
	for _, h := range r.Headers {
		if h.Key == EpochHeader {
			v, err := strconv.ParseInt(string(h.Value), 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}

func isTakeover(r *kgo.Record) bool {
	for _, h := range r.Headers {
		if h.Key == TakeoverHeader {
			return true
		}
	}
	return false
}

// epochHeader stamps a record this owner appends.
func (o *Owner) epochHeader() kgo.RecordHeader {
	return kgo.RecordHeader{Key: EpochHeader, Value: []byte(strconv.FormatInt(o.epoch, 10))}
}

// queueTakeover queues the takeover record ahead of every other append.
func (o *Owner) queueTakeover() {
	o.takingOver, o.takeoverAt = true, -1
	rec := &kgo.Record{
		Topic: o.cfg.ParkedTopic, Partition: o.cfg.Partition,
		Headers: []kgo.RecordHeader{o.epochHeader(), {Key: TakeoverHeader, Value: []byte("1")}},
	}
	o.appendSeq++
	o.appends.push(&Append{Record: rec, src: -1, seq: o.appendSeq, takeover: true})
}

// tookOver records the takeover record in Kafka at offset: the scan reads
// on up to it, and the appends queued behind it may go.
func (o *Owner) tookOver(offset int64) {
	o.takingOver, o.takeoverAt = false, offset
	o.parkedEnd = max(o.parkedEnd, offset+1)
	o.log.Info("took the parked partition over", "epoch", o.epoch, "at", offset)
	if !o.stopped {
		o.scanRead()
	}
}

// scanPastTakeover reports whether the scan has read this owner's takeover
// record (so it knows every record an earlier owner's append may have put
// before it).
func (o *Owner) scanPastTakeover() bool {
	return !o.takingOver && o.takeoverAt >= 0 && o.scanCursor > o.takeoverAt
}
