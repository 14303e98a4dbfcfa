package deliver_test

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/deliver"
)

// FuzzParseRetryAfter feeds arbitrary Retry-After values. The seed corpus is
// in testdata/fuzz/FuzzParseRetryAfter; run the fuzzer with
//
//	go test -run '^$' -fuzz FuzzParseRetryAfter -fuzztime 60s ./deliver/
//
// ParseRetryAfter must never panic, never return a negative delay, return
// 0 with ok=false for anything that is neither delta-seconds nor an HTTP
// date, agree with its definition when it accepts a value, and give the
// same delay for n seconds as for the HTTP date n seconds from now in each
// of the three date formats.
func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []struct {
		v string
		n uint32
	}{
		{"120", 120},
		{"0", 0},
		{"-1", 1},
		{"Wed, 21 Oct 2015 07:28:00 GMT", 3600},
		{"Wednesday, 21-Oct-15 07:28:00 GMT", 59},
		{"Wed Oct 21 07:28:00 2015", 86400},
		{"99999999999999999999", math.MaxUint32},
		{" 5 ", 5},
		{"\x00", 0},
		{"1e3", 1000},
		{"0x10", 16},
		{"Wed, 21 Oct 2015 07:28:00 PST", 7},
	} {
		f.Add(seed.v, seed.n)
	}
	now := time.Date(2015, 10, 21, 7, 0, 0, 0, time.UTC) // whole seconds: dates have no fraction
	f.Fuzz(func(t *testing.T, v string, n uint32) {
		d, ok := deliver.ParseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v: negative", v, d)
		}
		if !ok && d != 0 {
			t.Fatalf("ParseRetryAfter(%q) = %v, false: a refused value must be 0", v, d)
		}
		checkDefinition(t, v, now, d, ok)
		var p deliver.RetryPolicy
		if delay := p.Delay(1, d, constant(0.5)); delay <= 0 || delay > deliver.DefaultRetryMax {
			t.Fatalf("Delay with Retry-After %v = %v: outside (0, max]", d, delay)
		}

		// n seconds, as delta-seconds and as each HTTP-date format. Within
		// 30 years so that RFC 850's two-digit year stays unambiguous.
		secs := time.Duration(n%(30*365*86400)) * time.Second
		want, ok := deliver.ParseRetryAfter(strconv.FormatInt(int64(secs/time.Second), 10), now)
		if !ok || want != secs {
			t.Fatalf("ParseRetryAfter(%d seconds) = %v, %v", secs/time.Second, want, ok)
		}
		at := now.Add(secs)
		for _, layout := range []string{http.TimeFormat, time.RFC850, time.ANSIC} {
			date := at.Format(layout)
			if layout == time.RFC850 {
				date = strings.Replace(date, "UTC", "GMT", 1)
			}
			if got, ok := deliver.ParseRetryAfter(date, now); !ok || got != want {
				t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, true like %d seconds", date, got, ok, want, secs/time.Second)
			}
		}
	})
}

// checkDefinition checks an answer of ParseRetryAfter against the header's
// definition: trimmed delta-seconds (saturating) or an HTTP date not in the
// past, relative to now.
func checkDefinition(t *testing.T, v string, now time.Time, d time.Duration, ok bool) {
	t.Helper()
	s := strings.TrimSpace(v)
	if s != "" && strings.Trim(s, "0123456789") == "" {
		secs, err := strconv.ParseUint(s, 10, 64)
		want := time.Duration(math.MaxInt64)
		if err == nil && secs <= uint64(math.MaxInt64/int64(time.Second)) {
			want = time.Duration(secs) * time.Second
		}
		if !ok || d != want {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, true", v, d, ok, want)
		}
		return
	}
	at, err := http.ParseTime(s)
	switch {
	case err != nil || at.Before(now):
		if ok {
			t.Fatalf("ParseRetryAfter(%q) = %v, true; want refused: neither seconds nor a future HTTP date", v, d)
		}
	case !ok || d != at.Sub(now):
		t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %v, true (the date %v)", v, d, ok, at.Sub(now), at)
	}
}
