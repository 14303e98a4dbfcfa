package partition

import (
	"slices"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func record(offset int64, key string, value int64) *kgo.Record {
	return &kgo.Record{Offset: offset, Headers: []kgo.RecordHeader{{Key: key, Value: []byte(strconv.FormatInt(value, 10))}}}
}

// The log, from a commit whose metadata names the valid takeover at 3:
// owner 3's records; owner 10 takes over (naming 3); a late record of
// owner 3; a late takeover of an owner that had seen only 3 (overtaken);
// its record; owner 10's; owner 20 takes over (naming 10).
func TestTakeoverChain(t *testing.T) {
	var e epochs
	e.init(3, 1)
	log := []*kgo.Record{
		record(5, EpochHeader, 3),
		record(10, TakeoverHeader, 3),
		record(11, EpochHeader, 3),
		record(12, TakeoverHeader, 3),
		record(13, EpochHeader, 12),
		record(14, EpochHeader, 10),
		record(20, TakeoverHeader, 10),
		record(21, EpochHeader, 20),
		record(22, EpochHeader, 10),
		{Offset: 23}, // no epoch: an older version's
	}
	var stale []int64
	for _, r := range log {
		switch {
		case isTakeover(r):
			e.noteTakeover(r)
		case e.stale(r):
			stale = append(stale, r.Offset)
		}
	}
	if want := []int64{10, 20}; !slices.Equal(e.valid, want) {
		t.Errorf("valid takeovers %v, want %v", e.valid, want)
	}
	if want := []int64{11, 13, 22}; !slices.Equal(stale, want) {
		t.Errorf("stale records %v, want %v", stale, want)
	}
}

// With nothing known below the scan (no metadata), records before the
// first takeover are taken as they are, and the first takeover is valid.
func TestTakeoverChainFromNothing(t *testing.T) {
	var e epochs
	e.init(-1, 1)
	if e.stale(record(0, EpochHeader, 7)) {
		t.Fatal("a record before any known takeover was found stale")
	}
	e.noteTakeover(record(1, TakeoverHeader, 99))
	if !slices.Equal(e.valid, []int64{1}) {
		t.Fatalf("valid takeovers %v, want [1]", e.valid)
	}
	if !e.stale(record(2, EpochHeader, 7)) || e.stale(record(3, EpochHeader, 1)) {
		t.Fatal("after the takeover at 1, only its own records are live")
	}
}

// An owner does not take over from a later generation's takeover, unless
// the commit named none (the group may be new, its generations from 1).
func TestNewerOwner(t *testing.T) {
	takeover := func(offset, prev, gen int64) *kgo.Record {
		r := record(offset, TakeoverHeader, prev)
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: GenerationHeader, Value: []byte(strconv.FormatInt(gen, 10))})
		return r
	}
	var e epochs
	e.init(3, 5)
	e.noteTakeover(takeover(10, 3, 4))
	if _, newer := e.newerOwner(); newer {
		t.Fatal("generation 4's takeover stopped generation 5")
	}
	e.noteTakeover(takeover(12, 10, 7))
	if gen, newer := e.newerOwner(); !newer || gen != 7 {
		t.Fatalf("newerOwner = %d, %v; want 7, true", gen, newer)
	}
	e.init(-1, 1) // no takeover in the commit: a new group
	e.noteTakeover(takeover(20, 12, 500))
	if _, newer := e.newerOwner(); newer {
		t.Fatal("a new group's owner was stopped by the old group's generations")
	}
}
