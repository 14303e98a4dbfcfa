package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/model/event"
)

func TestReadEvents(t *testing.T) {
	type got struct {
		line int
		ev   string
		bad  bool
	}
	read := func(in string, single bool) ([]got, error) {
		var out []got
		err := readEvents(strings.NewReader(in), single, func(line int, ev []byte, perr error) error {
			out = append(out, got{line, string(ev), perr != nil})
			return nil
		})
		return out, err
	}
	for name, tc := range map[string]struct {
		in     string
		single bool
		want   []got
	}{
		"ndjson":          {in: "{\"a\":1}\n\n{\"a\":2}\r\nnope\n{\"a\":3}", want: []got{{1, `{"a":1}`, false}, {3, `{"a":2}`, false}, {4, "nope", true}, {5, `{"a":3}`, false}}},
		"indented":        {in: "\n{\n  \"a\": 1\n}\n", want: []got{{2, "{\n  \"a\": 1\n}", false}}},
		"single line":     {in: `{"a":1}`, single: true, want: []got{{1, `{"a":1}`, false}}},
		"blank":           {in: "\n \n", want: nil},
		"neither":         {in: "{\n\"a\":\n", want: []got{{1, "", true}}},
		"number split ok": {in: "{\"a\":1\n2}", want: []got{{1, "", true}}}, // 1 and 2 stay apart: not "12"
	} {
		res, err := read(tc.in, tc.single)
		if err != nil || !slices.Equal(res, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", name, res, err, tc.want)
		}
	}
	if _, err := read("{\"a\":1}\n{\"a\":2}\n", true); err == nil || !strings.Contains(err.Error(), "exactly one") {
		t.Errorf("two events with a key: %v", err)
	}
}

func TestFlagsAfterArguments(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := fs.String("o", "table", "")
	n := fs.Int("n", 0, "")
	pos, err := parseInterspersed(fs, []string{"a", "-o", "json", "b", "--n=3", "--", "-c"})
	if err != nil || *o != "json" || *n != 3 || !slices.Equal(pos, []string{"a", "b", "-c"}) {
		t.Fatalf("pos %q o %q n %d err %v", pos, *o, *n, err)
	}
}

func TestTimeFlag(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := timeFlag{now: func() time.Time { return now }}
	if err := f.Set("90m"); err != nil || !f.t.Equal(now.Add(-90*time.Minute)) {
		t.Errorf("90m: %v %v", f.t, err)
	}
	if err := f.Set("2026-01-02T03:04:05+01:00"); err != nil || !f.t.Equal(time.Date(2026, 1, 2, 2, 4, 5, 0, time.UTC)) {
		t.Errorf("rfc3339: %v %v", f.t, err)
	}
	if err := f.Set("yesterday"); err == nil {
		t.Error("yesterday accepted")
	}
}

func TestClientFlagsFromEnvironment(t *testing.T) {
	env := map[string]string{"LANEWAY_API": "http://api:1", "LANEWAY_ADMIN_TOKEN": "tok", "LANEWAY_OUTPUT": "json", "LANEWAY_URL": "http://nope"}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	cf := &clientFlags{}
	cf.bind(fs, false)
	url := fs.String("url", "", "")
	if err := fs.Parse([]string{"--token", "flag-wins"}); err != nil {
		t.Fatal(err)
	}
	if err := applyCLIEnv(fs, func(k string) string { return env[k] }, clientEnv); err != nil {
		t.Fatal(err)
	}
	if cf.api != "http://api:1" || cf.token != "flag-wins" || cf.output != "json" || *url != "" {
		t.Errorf("api %q token %q output %q url %q", cf.api, cf.token, cf.output, *url)
	}
}

func TestDemoFlagsFromEnvironment(t *testing.T) {
	env := map[string]string{"LANEWAY_API": "http://laneway-1:8080", "LANEWAY_ADMIN_TOKEN": "tok", "LANEWAY_FLEET_LISTEN": "0.0.0.0:9100", "LANEWAY_RATE": "50"}
	cfg, err := parseDemo([]string{"--fleet-host", "demo-fleet"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.api != "http://laneway-1:8080" || cfg.token != "tok" || cfg.fleetListen != "0.0.0.0:9100" || cfg.fleetHost != "demo-fleet" || cfg.rate != 50 {
		t.Errorf("cfg = %+v", cfg)
	}
	if _, err := parseDemo([]string{"--coalesce-share", "2"}, noEnv, io.Discard); err == nil {
		t.Error("--coalesce-share 2 accepted")
	}
}

// A batch endpoint's dead letter shows its sequence (a redrive sends it
// under the same one); other letters show a dash there.
func TestDeadRowShowsABatchSequence(t *testing.T) {
	var batch client.DeadLetter
	batch.ID, batch.Reason = "ev_1:ep_b", "payload_too_large"
	batch.Delivery = &event.Delivery{Type: "order.updated", Entity: "order:1", Revision: 3, Sequence: 42, Attempts: 1}
	cols := []string{"ID", "ENDPOINT", "REASON", "DEAD_AT", "TYPE", "ENTITY", "REV", "SEQ", "ATTEMPTS", "DETAIL"}
	seqAt := slices.Index(cols, "SEQ")
	if row := deadRow(batch); len(row) != len(cols) || row[seqAt] != "42" || row[seqAt-1] != "3" {
		t.Fatalf("batch letter row %q, want %d columns with SEQ 42 after REV 3", row, len(cols))
	}
	push := batch
	push.Delivery = &event.Delivery{Type: "order.updated", Entity: "order:2", Revision: 1, Attempts: 5}
	if row := deadRow(push); row[seqAt] != "-" {
		t.Fatalf("push letter row %q, want SEQ -", row)
	}
}
