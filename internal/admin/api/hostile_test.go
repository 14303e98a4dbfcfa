package api

// Hostile input at POST /v1/events: every event that cannot be published
// gets a 400 whose body says why (the InvalidError's reason), nothing is
// published and no idempotency key is left behind; what is valid but
// unusual (a revision going backwards, a great many entities) is accepted
// as it is.

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/laneway/laneway/internal/model/event"
)

func TestHostileIngestRefusesBadEvents(t *testing.T) {
	valid := `{"type":"t","tenant":"acme","entity":"order:1","revision":1,"data":{"k":"v"}}`
	sized := func(n int) string { // a valid, complete event of exactly n bytes (nothing left to fill in)
		head, tail := `{"id":"e1","type":"t","tenant":"acme","entity":"e","occurred_at":"2026-01-01T00:00:00Z","data":"`, `"}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	cases := []struct{ name, body, reason string }{
		// Malformed JSON.
		{"empty body", "", "malformed JSON"},
		{"truncated", `{"type":"t","tenant":"acme"`, "malformed JSON"},
		{"array", `[` + valid + `]`, "malformed JSON"},
		{"single quotes", `{'type':'t'}`, "malformed JSON"},
		{"trailing comma", `{"type":"t","tenant":"acme","entity":"e",}`, "malformed JSON"},
		{"two objects", valid + valid, "trailing data"},
		{"byte order mark", "\xef\xbb\xbf" + valid, "malformed JSON"},
		{"too deeply nested data", `{"type":"t","tenant":"acme","entity":"e","data":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, "malformed JSON"},
		{"null", `null`, "type is required"},
		// Oversized: one byte over the envelope limit is read whole (the
		// body limit leaves slack) and refused with the precise reason.
		{"one byte over the limit", sized(event.MaxEnvelopeBytes + 1), "is " + strconv.Itoa(event.MaxEnvelopeBytes+1) + " bytes, the limit is " + strconv.Itoa(event.MaxEnvelopeBytes)},
		{"entity too long", `{"type":"t","tenant":"acme","entity":"` + strings.Repeat("e", event.MaxFieldLen+1) + `"}`, "entity is longer than"},
		{"tenant too long", `{"type":"t","tenant":"` + strings.Repeat("a", event.MaxFieldLen+1) + `","entity":"e"}`, "tenant is longer than"},
		// Invalid UTF-8, wherever it is.
		{"invalid UTF-8 in entity", strings.Replace(valid, "order:1", "order:\xff1", 1), "not valid UTF-8"},
		{"invalid UTF-8 in data", strings.Replace(valid, `"v"`, "\"\xc0\xaf\"", 1), "not valid UTF-8"},
		{"invalid UTF-8 in a data key", strings.Replace(valid, `"k"`, "\"\xed\xa0\x80\"", 1), "not valid UTF-8"},
		{"Latin-1 body", strings.Replace(valid, `"v"`, "\"caf\xe9\"", 1), "not valid UTF-8"},
		// A missing entity, in every spelling.
		{"entity absent", `{"type":"t","tenant":"acme"}`, "entity is required"},
		{"entity empty", `{"type":"t","tenant":"acme","entity":""}`, "entity is required"},
		{"entity blank", `{"type":"t","tenant":"acme","entity":"  \t"}`, "entity is required"},
		{"entity null", `{"type":"t","tenant":"acme","entity":null}`, "entity is required"},
		{"entity a number", `{"type":"t","tenant":"acme","entity":42}`, "malformed JSON"},
		{"entity misspelt", `{"type":"t","tenant":"acme","entitiy":"e"}`, "unknown field"},
		// Revisions that are not a non-negative int64.
		{"negative revision", `{"type":"t","tenant":"acme","entity":"e","revision":-5}`, "revision must not be negative"},
		{"revision overflows", `{"type":"t","tenant":"acme","entity":"e","revision":9223372036854775808}`, "malformed JSON"},
		{"fractional revision", `{"type":"t","tenant":"acme","entity":"e","revision":1.5}`, "malformed JSON"},
		{"revision as a string", `{"type":"t","tenant":"acme","entity":"e","revision":"17"}`, "malformed JSON"},
	}
	h := newHarness(t, nil)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/v1/events", tc.body, "Idempotency-Key", "hostile-"+strconv.Itoa(i))
			wantStatus(t, r, http.StatusBadRequest)
			wantJSONContent(t, r)
			got := r.json(t)
			reason, _ := got["reason"].(string)
			if !strings.Contains(reason, tc.reason) {
				t.Fatalf("reason %q does not contain %q", reason, tc.reason)
			}
			if got["error"] != "invalid event: "+reason {
				t.Fatalf("error = %v, want invalid event: %s", got["error"], reason)
			}
		})
	}
	if n := len(h.pub.published()); n != 0 {
		t.Fatalf("refused events were published: %d", n)
	}
	if keys := h.mr.Keys(); len(keys) != 0 {
		t.Fatalf("refused events left idempotency keys: %v", keys)
	}

	// At the limit is fine; past the body limit the body is not even read
	// whole: 413.
	wantStatus(t, h.do("POST", "/v1/events", sized(event.MaxEnvelopeBytes)), http.StatusAccepted)
	r := h.do("POST", "/v1/events", sized(DefaultMaxBodyBytes+1))
	wantStatus(t, r, http.StatusRequestEntityTooLarge)
	wantJSONContent(t, r)
	if n := len(h.pub.published()); n != 1 {
		t.Fatalf("published %d, want only the event at the limit", n)
	}
}

// A revision that goes backwards is accepted and published as given, in
// the order received: Laneway keeps no per-entity revision at ingest, and
// Kafka order is delivery order. Every delivery carries entity and
// revision, so receivers drop the stale one; a lane drops it itself only
// while a newer coalescing revision is still waiting (package coalesce).
func TestHostileIngestRevisionGoesBackwards(t *testing.T) {
	h := newHarness(t, nil)
	for _, rev := range []int{17, 5, 5, 0} {
		body := `{"type":"order.updated","tenant":"acme","entity":"order:1","revision":` + strconv.Itoa(rev) + `,"coalesce":true}`
		wantStatus(t, h.do("POST", "/v1/events", body), http.StatusAccepted)
	}
	var got []int64
	for _, env := range h.pub.published() {
		if env.Entity != "order:1" {
			t.Fatalf("published entity %q", env.Entity)
		}
		got = append(got, env.Revision)
	}
	if want := []int64{17, 5, 5, 0}; !equalInt64s(got, want) {
		t.Fatalf("published revisions %v, want %v: as given, in the order received", got, want)
	}
}

func equalInt64s(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A great many distinct entities are just as many ordinary events: each is
// accepted and published, and the API keeps nothing per entity (without an
// idempotency key, not even a Redis key).
func TestHostileIngestManyDistinctEntities(t *testing.T) {
	const n = 1000
	h := newHarness(t, nil)
	for i := range n {
		body := `{"type":"t","tenant":"acme","entity":"order:` + strconv.Itoa(i) + `","revision":1}`
		wantStatus(t, h.do("POST", "/v1/events", body), http.StatusAccepted)
	}
	pub := h.pub.published()
	seen := make(map[string]bool, n)
	for _, env := range pub {
		seen[env.Entity] = true
	}
	if len(pub) != n || len(seen) != n {
		t.Fatalf("published %d events for %d distinct entities, want %d of each", len(pub), len(seen), n)
	}
	if keys := h.mr.Keys(); len(keys) != 0 {
		t.Fatalf("%d Redis keys for events without idempotency keys", len(keys))
	}
}
