package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/timing"
)

// watchEntry is one line of watch.ndjson: what the broker said about the
// run's fan-out transactions and its deliveries partitions, logged when it
// changes. It is there to diagnose stalls: an open transaction holds back
// the last stable offset of every partition it wrote to, and read-committed
// consumers (the delivery stage) see nothing beyond it.
type watchEntry struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"` // "txn" or "lso"
	// txn
	TxnID      string   `json:"txn_id,omitempty"`
	State      string   `json:"state,omitempty"`
	Started    string   `json:"started,omitempty"`
	ProducerID int64    `json:"producer_id,omitempty"`
	Epoch      int16    `json:"epoch,omitempty"`
	Partitions []string `json:"partitions,omitempty"`
	// lso: deliveries partitions whose last stable offset is behind the
	// high watermark and has not moved for 3 s or more (a transaction holds
	// them), with the time it last moved and the offset it is stuck at
	Stuck map[int32]string `json:"stuck,omitempty"`
	Err   string           `json:"err,omitempty"`
}

// watch logs the fan-out transactions and the deliveries partitions'
// stable-offset lag every interval until ctx ends.
func (h *Harness) watch(ctx context.Context, interval time.Duration) {
	f, err := os.Create(h.dir + "/watch.ndjson")
	if err != nil {
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	adm := kadm.NewClient(h.admin)
	var txnIDs []string
	for _, in := range h.instanceList() {
		txnIDs = append(txnIDs, topics.GroupsFor(h.name).Fanout+"-"+in.ID)
	}
	last := map[string]string{}
	type lsoSeen struct {
		offset int64
		since  time.Time
	}
	lso := map[int32]lsoSeen{}
	// the __consumer_offsets partitions the fan-out transactions commit
	// to: where a pending transactional offset commit lives
	offsetsParts := kadm.TopicsSet{}
	emit := func(key string, e watchEntry) {
		b, _ := json.Marshal(e) // without the time: log changes only
		if last[key] == string(b) {
			return
		}
		last[key] = string(b)
		e.At = time.Now()
		_ = enc.Encode(e)
	}
	timing.Every(ctx.Done(), interval, func() {
		reqCtx, cancel := context.WithTimeout(ctx, interval)
		described, err := adm.DescribeTransactions(reqCtx, txnIDs...)
		if err != nil {
			emit("txn-err", watchEntry{Kind: "txn", Err: err.Error()})
		}
		for _, d := range described.Sorted() {
			e := watchEntry{Kind: "txn", TxnID: d.TxnID, State: d.State, ProducerID: d.ProducerID, Epoch: d.ProducerEpoch}
			if d.StartTimestamp > 0 && d.State == "Ongoing" {
				e.Started = time.UnixMilli(d.StartTimestamp).UTC().Format("15:04:05.000")
			}
			for topic, ps := range d.Topics {
				for p := range ps {
					e.Partitions = append(e.Partitions, fmt.Sprintf("%s/%d", strings.TrimPrefix(topic, h.name+"."), p))
					if topic == offsetsTopic {
						offsetsParts.Add(topic, p)
					}
				}
			}
			slices.Sort(e.Partitions)
			if d.Err != nil {
				e.Err = d.Err.Error()
			}
			emit("txn-"+d.TxnID, e)
		}
		ends, err1 := adm.ListEndOffsets(reqCtx, h.name+".deliveries")
		stable, err2 := adm.ListCommittedOffsets(reqCtx, h.name+".deliveries")
		cancel()
		if err1 != nil || err2 != nil {
			emit("lso-err", watchEntry{Kind: "lso", Err: fmt.Sprint(err1, err2)})
			return
		}
		now := time.Now()
		stuck := map[int32]string{}
		ends.Each(func(o kadm.ListedOffset) {
			st, ok := stable.Lookup(o.Topic, o.Partition)
			if !ok || o.Err != nil || st.Err != nil {
				return
			}
			prev, seen := lso[o.Partition]
			if !seen || prev.offset != st.Offset {
				lso[o.Partition] = lsoSeen{st.Offset, now}
				return
			}
			if o.Offset > st.Offset && now.Sub(prev.since) >= 3*time.Second {
				stuck[o.Partition] = fmt.Sprintf("since %s at %d", prev.since.UTC().Format("15:04:05.000"), st.Offset)
			}
		})
		emit("lso", watchEntry{Kind: "lso", Stuck: stuck})
		if len(stuck) > 0 {
			h.watchStuck(ctx, adm, stuck, emit)
		}
		if h.watchGroupOffsets(ctx, emit) && len(offsetsParts) > 0 {
			h.watchOffsetsPartitions(ctx, adm, offsetsParts, emit)
		}
	})
}

const offsetsTopic = "__consumer_offsets"

// watchOffsetsPartitions logs, while some fan-out offsets are unstable, the
// open transactions the __consumer_offsets partitions' own logs hold and
// their last stable offset: a transaction open there (no marker written)
// differs from the group coordinator merely not having applied a marker.
func (h *Harness) watchOffsetsPartitions(ctx context.Context, adm *kadm.Client, parts kadm.TopicsSet, emit func(string, watchEntry)) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	described, err := adm.DescribeProducers(ctx, parts)
	if err != nil {
		emit("offsets-producers-err", watchEntry{Kind: "offsets-producers", Err: err.Error()})
	}
	for _, t := range described {
		for _, d := range t.Partitions.Sorted() {
			var open []string
			for _, pr := range d.ActiveProducers.Sorted() {
				if pr.CurrentTxnStartOffset >= 0 {
					open = append(open, fmt.Sprintf("producer %d epoch %d open from offset %d, last write %s", pr.ProducerID, pr.ProducerEpoch,
						pr.CurrentTxnStartOffset, time.UnixMilli(pr.LastTimestamp).UTC().Format("15:04:05.000")))
				}
			}
			emit(fmt.Sprintf("offsets-producers-%d", d.Partition), watchEntry{Kind: "offsets-open-txn",
				Partitions: append([]string{fmt.Sprintf("%s/%d", offsetsTopic, d.Partition)}, open...)})
		}
	}
	ends, err1 := adm.ListEndOffsets(ctx, offsetsTopic)
	stable, err2 := adm.ListCommittedOffsets(ctx, offsetsTopic)
	if err1 != nil || err2 != nil {
		emit("offsets-lso-err", watchEntry{Kind: "offsets-lso", Err: fmt.Sprint(err1, err2)})
		return
	}
	var lines []string
	for t, ps := range parts {
		for p := range ps {
			end, ok1 := ends.Lookup(t, p)
			st, ok2 := stable.Lookup(t, p)
			if ok1 && ok2 {
				lines = append(lines, fmt.Sprintf("%s/%d end %d stable %d", t, p, end.Offset, st.Offset))
			}
		}
	}
	slices.Sort(lines)
	emit("offsets-lso", watchEntry{Kind: "offsets-lso", Partitions: lines})
}

// watchStuck logs the producers with an open transaction on the stuck
// partitions: who holds their last stable offset.
func (h *Harness) watchStuck(ctx context.Context, adm *kadm.Client, stuck map[int32]string, emit func(string, watchEntry)) {
	set := kadm.TopicsSet{}
	for p := range stuck {
		set.Add(h.name+".deliveries", p)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		emit("producers-err", watchEntry{Kind: "producers", Err: err.Error()})
		return
	}
	for _, t := range described {
		for _, d := range t.Partitions.Sorted() {
			for _, pr := range d.ActiveProducers.Sorted() {
				if pr.CurrentTxnStartOffset < 0 {
					continue
				}
				emit(fmt.Sprintf("producer-%d-%d", d.Partition, pr.ProducerID), watchEntry{Kind: "open-txn",
					Partitions: []string{fmt.Sprintf("deliveries/%d from offset %d, last write %s", d.Partition, pr.CurrentTxnStartOffset,
						time.UnixMilli(pr.LastTimestamp).UTC().Format("15:04:05.000"))},
					ProducerID: pr.ProducerID, Epoch: pr.ProducerEpoch})
			}
		}
	}
}

// watchGroupOffsets asks for the fan-out group's committed offsets as a
// read-committed consumer does (require_stable): a partition whose offset
// is held by a pending transactional commit answers UNSTABLE_OFFSET_COMMIT.
// It reports whether some were unstable.
func (h *Harness) watchGroupOffsets(ctx context.Context, emit func(string, watchEntry)) bool {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = topics.GroupsFor(h.name).Fanout
	req.RequireStable = true
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = req.Group
	req.Groups = append(req.Groups, rg)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, h.admin)
	e := watchEntry{Kind: "fanout-offsets"}
	if err != nil {
		e.Err = err.Error()
		emit("fanout-offsets", e)
		return false
	}
	var unstable []string
	note := func(code int16, where string) {
		if err := kerr.ErrorForCode(code); err != nil {
			unstable = append(unstable, where+": "+err.Error())
		}
	}
	note(resp.ErrorCode, "group")
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			note(p.ErrorCode, fmt.Sprintf("%s/%d", strings.TrimPrefix(t.Topic, h.name+"."), p.Partition))
		}
	}
	for _, g := range resp.Groups {
		note(g.ErrorCode, "group")
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				note(p.ErrorCode, fmt.Sprintf("%s/%d", strings.TrimPrefix(t.Topic, h.name+"."), p.Partition))
			}
		}
	}
	slices.Sort(unstable)
	e.Partitions = unstable
	emit("fanout-offsets", e)
	return len(unstable) > 0
}
