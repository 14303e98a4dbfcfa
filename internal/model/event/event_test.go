package event

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/receiver"
)

func TestParseEnvelope(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ok := `{"id":"e1","type":"order.updated","tenant":"acme","entity":"order:1","revision":3,"coalesce":true,"occurred_at":"2026-11-30T10:00:00Z","data":{"a":1}}`
	env, err := ParseEnvelope([]byte(ok), now)
	if err != nil {
		t.Fatal(err)
	}
	if env.ID != "e1" || env.Revision != 3 || !env.Coalesce || env.OccurredAt.Hour() != 10 || string(env.Data) != `{"a":1}` {
		t.Errorf("parsed %+v", env)
	}

	env, err = ParseEnvelope([]byte(`{"type":"t","tenant":"a","entity":"e"}`), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(env.ID) != 36 || !env.OccurredAt.Equal(now) {
		t.Errorf("defaults not filled: id %q occurred_at %v", env.ID, env.OccurredAt)
	}

	bad := map[string]string{
		"malformed":        `{"type":`,
		"not utf-8":        "{\"type\":\"t\xff\",\"tenant\":\"a\",\"entity\":\"e\"}",
		"missing entity":   `{"type":"t","tenant":"a"}`,
		"missing tenant":   `{"type":"t","entity":"e"}`,
		"missing type":     `{"tenant":"a","entity":"e"}`,
		"negative rev":     `{"type":"t","tenant":"a","entity":"e","revision":-1}`,
		"unknown field":    `{"type":"t","tenant":"a","entity":"e","revison":2}`,
		"trailing data":    `{"type":"t","tenant":"a","entity":"e"} {}`,
		"long entity":      `{"type":"t","tenant":"a","entity":"` + strings.Repeat("x", MaxFieldLen+1) + `"}`,
		"oversized":        `{"type":"t","tenant":"a","entity":"e","data":"` + strings.Repeat("x", MaxEnvelopeBytes) + `"}`,
		"array not object": `[1,2]`,
	}
	for name, raw := range bad {
		if _, err := ParseEnvelope([]byte(raw), now); !IsInvalid(err) {
			t.Errorf("%s: err = %v, want an InvalidError", name, err)
		}
	}
}

func TestDeliveryBodyCarriesEntityAndRevision(t *testing.T) {
	env := Envelope{ID: "e1", Type: "order.updated", Tenant: "acme", Entity: "order:1", Revision: 7,
		OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Data: json.RawMessage(`{"status":"paid"}`)}
	d := NewDelivery(env, "ep_1", time.Now())
	body, err := d.Body()
	if err != nil {
		t.Fatal(err)
	}
	var p receiver.Delivery
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	if p.ID != "e1" || p.Type != "order.updated" || p.Entity.ID != "order:1" || p.Entity.Revision != 7 ||
		!p.Timestamp.Equal(env.OccurredAt) || string(p.Data) != `{"status":"paid"}` {
		t.Errorf("payload %+v from %s", p, body)
	}
	raw, _ := json.Marshal(&d)
	back, err := ParseDelivery(raw)
	if err != nil || back.EndpointID != "ep_1" || back.Revision != 7 {
		t.Errorf("round trip: %+v %v", back, err)
	}
	if _, err := ParseDelivery([]byte(`{"event_id":"x"}`)); !IsInvalid(err) {
		t.Errorf("incomplete delivery accepted: %v", err)
	}
}

func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`{"id":"e1","type":"t","tenant":"a","entity":"e","revision":1,"data":{}}`))
	f.Add([]byte(`{"type":"t"}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, err := ParseEnvelope(raw, time.Unix(0, 0))
		if err != nil {
			return
		}
		// Anything accepted must re-encode and parse again unchanged.
		again, _ := json.Marshal(env)
		if _, err := ParseEnvelope(again, time.Unix(0, 0)); err != nil {
			t.Fatalf("accepted %q but not its re-encoding %s: %v", raw, again, err)
		}
	})
}

func TestDeliveryEncoderMatchesAFullEncode(t *testing.T) {
	env := Envelope{ID: "e1 \x01endpoint\x01", Type: "t", Tenant: "a", Entity: "order:1", Revision: 3, Coalesce: true,
		OccurredAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Data: json.RawMessage(`{"x":"ep_1 \u0001"}`)}
	now := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	enc, err := NewDeliveryEncoder(env, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ep_1", "ep_\"quoted\"", ""} {
		d := NewDelivery(env, id, now)
		want, _ := json.Marshal(&d)
		if got := enc.Encode(id); string(got) != string(want) {
			t.Errorf("id %q:\n got %s\nwant %s", id, got, want)
		}
	}
}

func TestDeadLetterKeepsABoundedRaw(t *testing.T) {
	var small, big DeadLetter
	small.SetRaw([]byte("abc"))
	big.SetRaw(make([]byte, MaxDeadRawBytes+10))
	if string(small.Raw) != "abc" || small.RawSize != 0 {
		t.Fatalf("small raw %+v", small)
	}
	if len(big.Raw) != MaxDeadRawBytes || big.RawSize != MaxDeadRawBytes+10 {
		t.Fatalf("big raw kept %d bytes, size %d", len(big.Raw), big.RawSize)
	}
}
