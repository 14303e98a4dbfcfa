package event_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
)

// FuzzParseEnvelopeRoundTrip feeds arbitrary bytes to ParseEnvelope, as a
// producer could through Kafka or POST /v1/events. The seed corpus is in
// testdata/fuzz/FuzzParseEnvelopeRoundTrip; run the fuzzer with
//
//	go test -run '^$' -fuzz FuzzParseEnvelopeRoundTrip -fuzztime 60s ./internal/model/event/
//
// ParseEnvelope must never panic; every refusal is an *InvalidError with a
// reason; every envelope it accepts is valid and complete, and survives
// what Laneway does with it: json.Marshal (the API's publisher) and
// ParseEnvelope again (the fan-out) give back an equal envelope, and a
// second round trip changes nothing. It skips the two known gaps described
// at TestAcceptedEnvelopeReencodesWithinTheLimit.
func FuzzParseEnvelopeRoundTrip(f *testing.F) {
	for _, seed := range []string{
		`{"id":"e1","type":"order.updated","tenant":"acme","entity":"order:1","revision":3,"coalesce":true,"occurred_at":"2026-11-30T10:00:00Z","data":{"a":1}}`,
		`{"type":"t","tenant":"a","entity":"e"}`,
		`{"type":"t","tenant":"a","entity":"e","data":null}`,
		`{"type":"t","tenant":"a","entity":"e","data": { "html" : "<a href='x'>&amp;</a>", "ls": "\u2028" } }`,
		`{"type":"t","tenant":"a","entity":"\ud800","revision":9223372036854775807}`,
		`{"TYPE":"t","Tenant":"a","ENTITY":"e","type":"u"}`,
		`{"type":"t","tenant":"a","entity":"e","occurred_at":"0000-01-01T00:30:00+01:00"}`,
		`{"type":"t","tenant":"a","entity":"e","occurred_at":"2026-01-01T00:00:00.1234567891+23:59"}`,
		`{"type":"t","tenant":"a","entity":"e","revision":-1}`,
		`{"type":"t","tenant":"a","entity":"e","revision":1e3}`,
		`{"type":"t","tenant":"a","entity":"e"} {}`,
		"\xef\xbb\xbf{\"type\":\"t\",\"tenant\":\"a\",\"entity\":\"e\"}",
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`,
		"",
		"null",
	} {
		f.Add([]byte(seed))
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, err := event.ParseEnvelope(raw, now)
		if err != nil {
			var ie *event.InvalidError
			if !errors.As(err, &ie) || ie.Reason == "" || !event.IsInvalid(err) {
				t.Fatalf("ParseEnvelope(%q) = %v (%T), want an *InvalidError with a reason", raw, err, err)
			}
			return
		}
		if err := env.Validate(); err != nil {
			t.Fatalf("accepted %q, but the result does not validate: %v", raw, err)
		}
		if env.ID == "" || env.OccurredAt.IsZero() {
			t.Fatalf("accepted %q without filling id or occurred_at: %+v", raw, env)
		}

		enc, err := json.Marshal(env)
		if _, offset := env.OccurredAt.Zone(); err != nil && (offset >= 24*3600 || offset <= -24*3600) {
			// Known gap: time.Time parses offsets it cannot marshal; see
			// TestAcceptedEnvelopeReencodesWithinTheLimit.
			t.Skipf("occurred_at offset %ds does not encode: the known gap", offset)
		}
		if err != nil {
			t.Fatalf("accepted %q, but it does not encode: %v", raw, err)
		}
		if len(enc) > event.MaxEnvelopeBytes {
			// Known gap: the re-encoding can outgrow the limit (escaping,
			// filled defaults); see TestAcceptedEnvelopeReencodesWithinTheLimit.
			t.Skipf("re-encoding is %d bytes, over the limit: the known gap", len(enc))
		}
		back, err := event.ParseEnvelope(enc, now.Add(time.Hour))
		if err != nil {
			t.Fatalf("accepted %q but not its re-encoding %s: %v", raw, enc, err)
		}
		if !equalEnvelopes(env, back) {
			t.Fatalf("round trip of %q changed the envelope:\n got %+v\nwant %+v", raw, back, env)
		}
		again, err := json.Marshal(back)
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("second round trip differs:\n%s\n%s (%v)", again, enc, err)
		}
	})
}

// equalEnvelopes compares field by field: instants with Equal, data by its
// compact encoding (json.Marshal compacts and escapes a RawMessage).
func equalEnvelopes(a, b event.Envelope) bool {
	da, errA := json.Marshal(a.Data)
	db, errB := json.Marshal(b.Data)
	return a.ID == b.ID && a.Type == b.Type && a.Tenant == b.Tenant && a.Entity == b.Entity &&
		a.Revision == b.Revision && a.Coalesce == b.Coalesce && a.OccurredAt.Equal(b.OccurredAt) &&
		(a.Data == nil) == (b.Data == nil) && errA == nil && errB == nil && bytes.Equal(da, db)
}
