package partition

import (
	"fmt"
	"strings"
	"testing"
)

func TestProgressRoundTrip(t *testing.T) {
	p := ParkedProgress{Commit: 10, Rest: 500, Endpoints: map[string]int64{"ep_a": 10, "ep_b": 120}}
	got, err := DecodeProgress(p.Encode(DefaultMaxProgressBytes))
	if err != nil {
		t.Fatal(err)
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
	p := ParkedProgress{Commit: 100, Rest: 10_000, Endpoints: map[string]int64{}}
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
}

func TestDecodeProgressRefusesBadInput(t *testing.T) {
	for _, s := range []string{`{"v":2,"c":1,"r":1}`, `{"v":1,"c":5,"r":4}`, `{"v":1,"c":5,"r":9,"e":{"x":3}}`, `not json`} {
		if _, err := DecodeProgress(s); err == nil {
			t.Errorf("DecodeProgress(%q) accepted it", s)
		}
	}
	if _, err := DecodeProgress(""); err != ErrNoProgress || !strings.Contains(err.Error(), "no parked progress") {
		t.Errorf("empty metadata: %v, want ErrNoProgress", err)
	}
}
