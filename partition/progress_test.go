package partition

import (
	"fmt"
	"strings"
	"testing"
)

func TestProgressRoundTrip(t *testing.T) {
	p := ParkedProgress{Commit: 10, Rest: 500, Endpoints: map[string]int64{"ep_a": 10, "ep_b": 120}, Takeover: 7}
	got, err := DecodeProgress(p.Encode(DefaultMaxProgressBytes))
	if err != nil {
		t.Fatal(err)
	}
	if got.Takeover != 7 {
		t.Errorf("Takeover = %d, want 7", got.Takeover)
	}
	for id, want := range map[string]int64{"ep_a": 10, "ep_b": 120, "ep_other": 500} {
		if at := got.NeedsFrom(id); at != want {
			t.Errorf("NeedsFrom(%s) = %d, want %d", id, at, want)
		}
	}
}

// Too many endpoints for the metadata limit: the ones left out, and every
// endpoint not listed, fall back to the commit; none is ever read from
// above its own progress.
func TestProgressTruncatesSafely(t *testing.T) {
	p := ParkedProgress{Commit: 100, Rest: 10_000, Endpoints: map[string]int64{}, Takeover: 42}
	for i := range 300 {
		p.Endpoints[fmt.Sprintf("ep_%03d", i)] = 100 + int64(i)
	}
	s := p.Encode(512)
	if len(s) > 512 {
		t.Fatalf("encoded %d bytes, above the limit 512", len(s))
	}
	got, err := DecodeProgress(s)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for id, at := range p.Endpoints {
		n := got.NeedsFrom(id)
		if n > at {
			t.Fatalf("%s: NeedsFrom %d, above its progress %d", id, n, at)
		}
		if n > p.Commit {
			kept++
		}
	}
	if kept == 0 {
		t.Fatal("no endpoint kept its progress")
	}
	if got.NeedsFrom("ep_unlisted") != p.Commit {
		t.Fatalf("an unlisted endpoint reads from %d, want the commit %d", got.NeedsFrom("ep_unlisted"), p.Commit)
	}
	if _, ok := got.Endpoints["ep_299"]; !ok {
		t.Fatal("the endpoint furthest ahead was left out")
	}
	if got.Takeover != p.Takeover {
		t.Fatalf("the truncated progress lost its takeover: %d, want %d", got.Takeover, p.Takeover)
	}
}

func TestDecodeProgressRefusesBadInput(t *testing.T) {
	for _, s := range []string{`{"v":2,"c":1,"r":1}`, `{"v":1,"c":5,"r":4}`, `not json`} {
		if _, err := DecodeProgress(s); err == nil {
			t.Errorf("DecodeProgress(%q) accepted it", s)
		}
	}
	if _, err := DecodeProgress(""); err != ErrNoProgress || !strings.Contains(err.Error(), "no parked progress") {
		t.Errorf("empty metadata: %v, want ErrNoProgress", err)
	}
}

// An owner assigned a parked commit that retention has passed commits from
// the log start before its scan ends; an endpoint's entry below it must
// rise with it, or the next owner cannot read the progress (seeds of the
// simulator with a retention below max_age found it).
func TestProgressFromTheLogStartRaisesEveryEndpoint(t *testing.T) {
	p := ParkedProgress{Commit: 5, Rest: 9, Endpoints: map[string]int64{"ep_a": 7, "ep_b": 60}}
	got, err := DecodeProgress(p.from(46).Encode(DefaultMaxProgressBytes))
	if err != nil {
		t.Fatalf("the progress from the log start does not decode: %v", err)
	}
	if got.Commit != 46 || got.NeedsFrom("ep_a") != 46 || got.NeedsFrom("ep_b") != 60 || got.NeedsFrom("ep_c") != 46 {
		t.Fatalf("got %+v, want commit 46, ep_a 46, ep_b 60, others 46", got)
	}
	if p.Endpoints["ep_a"] != 7 {
		t.Fatal("from changed the progress it was given")
	}
}

// Metadata with an entry below its commit, as older owners wrote it, reads
// as that entry at the commit rather than as no progress at all (which
// would send the next owner back to the parked group's offset).
func TestDecodeProgressReadsAnEntryBelowTheCommitAsTheCommit(t *testing.T) {
	got, err := DecodeProgress(`{"v":1,"c":5,"r":9,"e":{"x":3,"y":8}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got.Endpoints["x"] != 5 || got.Endpoints["y"] != 8 || got.Rest != 9 {
		t.Fatalf("got %+v, want x at the commit 5, y 8, rest 9", got)
	}
}
