package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun checks the command on a scenario directory: a clean one passes,
// one with a lost event and a revision delivered late fails.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("endpoints.json", `[{"id":"A","name":"a","tenant":"t0"}]`)
	write("accepted.ndjson", `{"id":"e1","tenant":"t0","type":"x","entity":"o1","rev":1,"p":0,"o":1}
{"id":"e2","tenant":"t0","type":"x","entity":"o1","rev":2,"p":0,"o":2}
{"id":"e3","tenant":"t0","type":"x","entity":"o1","rev":3,"p":0,"o":3}
`)
	write("dead.ndjson", `{"id":"d1","reason":"max_attempts","endpoint_id":"A","delivery":{"event_id":"e3","endpoint_id":"A","entity":"o1","revision":3}}
`)
	write("receipts.ndjson", `{"ep":"A","id":"e1","entity":"o1","rev":1,"seq":1}
{"ep":"A","id":"e2","entity":"o1","rev":2,"seq":2}
{"ep":"A","id":"e2","entity":"o1","rev":2,"seq":3}
`)
	var out, errOut bytes.Buffer
	if code := run([]string{"-dir", dir, "-dead-file", filepath.Join(dir, "dead.ndjson")}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "PASS") || !strings.Contains(out.String(), "1 duplicates") {
		t.Errorf("output: %s", out.String())
	}

	write("receipts.ndjson", `{"ep":"A","id":"e2","entity":"o1","rev":2,"seq":1}
{"ep":"A","id":"e1","entity":"o1","rev":1,"seq":2}
`)
	write("dead.ndjson", "")
	out.Reset()
	if code := run([]string{"-dir", dir, "-dead-file", filepath.Join(dir, "dead.ndjson")}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "1 lost") || !strings.Contains(out.String(), "1 order violations") {
		t.Errorf("output: %s", out.String())
	}
	if code := run([]string{"-dir", dir}, &out, &errOut); code != 2 {
		t.Errorf("without dead letters: exit %d, want 2", code)
	}

	// A request log in the directory adds the overlap check: e2 arrived
	// while e1 was still in flight.
	write("receipts.ndjson", `{"ep":"A","id":"e1","entity":"o1","rev":1,"seq":1}
{"ep":"A","id":"e2","entity":"o1","rev":2,"seq":2}
{"ep":"A","id":"e3","entity":"o1","rev":3,"seq":3}
`)
	write("requests.ndjson", `{"ep":"A","id":"e1","entity":"o1","rev":1,"seq":1,"at":"2025-01-01T00:00:00Z","done":"2025-01-01T00:00:20Z","status":204}
{"ep":"A","id":"e2","entity":"o1","rev":2,"seq":2,"at":"2025-01-01T00:00:10Z","done":"2025-01-01T00:00:11Z","status":204}
{"ep":"A","id":"e3","entity":"o1","rev":3,"seq":3,"at":"2025-01-01T00:00:30Z","done":"2025-01-01T00:00:31Z","status":204}
`)
	out.Reset()
	if code := run([]string{"-dir", dir, "-dead-file", filepath.Join(dir, "dead.ndjson")}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "1 overlaps (of 3 requests)") || !strings.Contains(out.String(), "overlap: endpoint A entity o1") {
		t.Errorf("output: %s", out.String())
	}
}
