package inbound

import (
	"net/http"
	"slices"
)

// What a refused request keeps: a refusal is metadata, so its record
// stays a few KiB however large the request was (a 413's body, 60 KiB of
// headers, a long path).
const (
	maxKeptBytes       = 1 << 10 // body prefix kept for a refused request
	maxKeptHeaderBytes = 4 << 10 // all header names and values together
	maxKeptHeaderValue = 512     // one header value
	maxKeptPath        = 512
	maxKeptHost        = 256
)

// refusedCapture is the capped copy of c that keepRefused stores.
func refusedCapture(c *Capture, reason, detail string, body []byte) *Capture {
	k := *c
	k.Reject, k.Detail = reason, detail
	k.Path, k.Host = truncate(c.Path, maxKeptPath), truncate(c.Host, maxKeptHost)
	var capped bool
	k.Header, capped = capHeaders(c.Header)
	if capped {
		k.Detail += " (headers capped at 4 KiB)"
	}
	// Truncated only when bytes were left out: a short forged body is kept
	// whole, and a too_large one was not even read to its end.
	k.Body, k.Truncated = nil, reason == ReasonTooLarge
	if len(body) > 0 {
		k.Body = body[:min(len(body), maxKeptBytes)]
		k.Truncated = k.Truncated || len(body) > maxKeptBytes
	}
	return &k
}

// capHeaders keeps headers in name order until maxKeptHeaderBytes, each
// value cut at maxKeptHeaderValue; capped reports that something was left
// out or cut.
func capHeaders(h http.Header) (kept http.Header, capped bool) {
	kept = http.Header{}
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	total := 0
	for _, name := range names {
		for _, v := range h[name] {
			cut := truncate(v, maxKeptHeaderValue)
			if total+len(name)+len(cut) > maxKeptHeaderBytes {
				return kept, true
			}
			capped = capped || len(cut) < len(v)
			total += len(name) + len(cut)
			kept[name] = append(kept[name], cut)
		}
	}
	return kept, capped
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
