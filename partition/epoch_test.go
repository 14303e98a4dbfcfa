package partition

import (
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func stamped(offset, epoch int64) *kgo.Record {
	return &kgo.Record{Offset: offset, Headers: []kgo.RecordHeader{{Key: EpochHeader, Value: []byte(strconv.FormatInt(epoch, 10))}}}
}

// A record is stale only when a record of a higher epoch lies before it;
// records without an epoch (older versions) never are.
func TestStaleRecords(t *testing.T) {
	e := epochs{base: 3}
	for _, r := range []*kgo.Record{stamped(10, 3), stamped(11, 5), stamped(12, 4), stamped(13, 5), stamped(20, 8)} {
		if !e.stale(r) {
			e.noteEpoch(r)
		}
	}
	if want := []epochRise{{11, 5}, {20, 8}}; len(e.rises) != len(want) || e.rises[0] != want[0] || e.rises[1] != want[1] {
		t.Fatalf("rises = %v, want %v", e.rises, want)
	}
	cases := []struct {
		rec   *kgo.Record
		stale bool
	}{
		{stamped(5, 2), true},            // below every rise: the base from the commit
		{stamped(5, 3), false},           // the base's own epoch
		{stamped(11, 5), false},          // the rise itself: only what lies before counts
		{stamped(12, 4), true},           // after epoch 5 took over
		{stamped(15, 5), false},          // epoch 5's own
		{stamped(21, 7), true},           // after epoch 8 took over
		{stamped(21, 9), false},          // a later owner
		{&kgo.Record{Offset: 30}, false}, // no epoch: never stale
	}
	for _, c := range cases {
		if got := e.stale(c.rec); got != c.stale {
			t.Errorf("offset %d epoch %s: stale = %v, want %v", c.rec.Offset, c.rec.Headers, got, c.stale)
		}
	}
}
