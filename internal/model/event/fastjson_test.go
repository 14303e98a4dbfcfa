package event

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

var fastSeeds = []string{
	`{"event_id":"e1","endpoint_id":"ep_1","tenant":"acme","type":"order.updated","entity":"order:1","revision":3,"coalesce":true,"occurred_at":"2026-11-30T10:00:00Z","data":{"a":[1,2,{"b":"c\"d"}]},"created_at":"2026-11-30T10:00:00.123456789Z"}`,
	`{"event_id":"e1","endpoint_id":"ep_1","tenant":"a","type":"t","entity":"e","revision":0,"occurred_at":"2026-11-30T10:00:00+01:00","created_at":"2026-11-30T10:00:00Z","attempts":4,"sequence":12,"not_before":"2026-11-30T10:00:05Z","last_error":"deliver: HTTP 503"}`,
	` { "event_id" : "e" , "endpoint_id":"p", "entity":"x" , "data" : null } `,
	`{"event_id":"e\u0031","endpoint_id":"p","entity":"x"}`,
	`{"Event_ID":"e","endpoint_id":"p","entity":"x"}`,
	`{"event_id":"e","endpoint_id":"p","entity":"x","revision":1e3}`,
	`{"event_id":"e","endpoint_id":"p","entity":"x","revision":-0,"attempts":01}`,
	`{"event_id":"e","endpoint_id":"p","entity":"x","revision":9223372036854775808}`,
	`{"event_id":"e","endpoint_id":"p","entity":"x","data":{"a":}}`,
	`{"event_id":"e","endpoint_id":"p","entity":"x","occurred_at":"yesterday"}`,
	`{"event_id":"e","event_id":"f","endpoint_id":"p","entity":"x","coalesce":true,"coalesce":false}`,
	`{"event_id":"e","endpoint_id":"p","entity":"x"} x`,
	`{"event_id":"é","endpoint_id":"p","entity":"x"}`,
	`{"id":"e1","type":"order.updated","tenant":"acme","entity":"order:1","revision":3,"coalesce":true,"occurred_at":"2026-11-30T10:00:00Z","data":{"a":1}}`,
	`{"type":"t","tenant":"a","entity":"e","unknown":1}`,
	`{}`, `[]`, `{"a"}`, `{"event_id":"e",}`, `{"data":[}`, `{"data":"x\\"}`, ``,
}

// FuzzFastDeliveryMatchesUnmarshal: whatever the fast path reads, it reads
// as json.Unmarshal does (which must then succeed too).
//
//	go test -run '^$' -fuzz FuzzFastDeliveryMatchesUnmarshal -fuzztime 60s ./internal/model/event/
func FuzzFastDeliveryMatchesUnmarshal(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast Delivery
		if !fastDelivery(raw, &fast) {
			return
		}
		var slow Delivery
		if err := json.Unmarshal(raw, &slow); err != nil {
			t.Fatalf("fast path read %q, json.Unmarshal refused it: %v", raw, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", raw, fast, slow)
		}
	})
}

// FuzzFastEnvelopeMatchesDecoder: whatever the fast path reads, the strict
// decoder reads the same.
//
//	go test -run '^$' -fuzz FuzzFastEnvelopeMatchesDecoder -fuzztime 60s ./internal/model/event/
func FuzzFastEnvelopeMatchesDecoder(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast Envelope
		if !fastEnvelope(raw, &fast) {
			return
		}
		var slow Envelope
		if err := decodeEnvelopeStrictly(raw, &slow); err != nil {
			t.Fatalf("fast path read %q, the strict decoder refused it: %v", raw, err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", raw, fast, slow)
		}
	})
}

// The fast paths take what Laneway itself writes and what a producer
// usually publishes; otherwise they would be dead weight.
func TestFastPathsReadTheUsualRecords(t *testing.T) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.UTC)
	env := Envelope{ID: "evt_1", Type: "order.updated", Tenant: "acme", Entity: "order:42", Revision: 7,
		Coalesce: true, OccurredAt: now, Data: json.RawMessage(`{"total":42,"items":[{"sku":"a-1","note":"say \"hi\""}]}`)}
	enc, err := NewDeliveryEncoder(env, now)
	if err != nil {
		t.Fatal(err)
	}
	var d Delivery
	if !fastDelivery(enc.Encode("ep_1"), &d) {
		t.Fatalf("the fast path declined the fan-out's own delivery record %s", enc.Encode("ep_1"))
	}
	if want := NewDelivery(env, "ep_1", now); !reflect.DeepEqual(d, want) {
		t.Errorf("got %+v, want %+v", d, want)
	}
	d.Attempts, d.NotBefore, d.LastError = 3, now.Add(time.Second), "deliver: HTTP 503: busy"
	parked, _ := json.Marshal(&d)
	if !fastDelivery(parked, new(Delivery)) {
		t.Errorf("the fast path declined a parked copy %s", parked)
	}
	published, _ := json.Marshal(&env)
	if !fastEnvelope(published, new(Envelope)) {
		t.Errorf("the fast path declined a published envelope %s", published)
	}
}

// marshalledDelivery is the delivery record as json.Marshal writes it: what
// the hand-written encoder must match byte for byte.
func marshalledDelivery(env Envelope, endpointID string, now time.Time) ([]byte, error) {
	d := NewDelivery(env, endpointID, now)
	return json.Marshal(&d)
}

func FuzzDeliveryEncoderMatchesJSONMarshal(f *testing.F) {
	f.Add("evt_1", "order.updated", "acme", "order:1", int64(3), true, int64(1764496800123456789), []byte(`{"a":1}`), "ep_1")
	f.Add("e<>&", "t\u2028", "\x01ten", "é", int64(-1), false, int64(0), []byte(` { "h" : "<a>&amp;\u2028" } `), "ep")
	f.Add("e", "t", "a", "x", int64(0), false, int64(-62135596800000000000/1000), []byte(nil), "")
	var reused DeliveryEncoder // Reset from one input to the next, as the fan-out does
	f.Fuzz(func(t *testing.T, id, typ, tenant, entity string, revision int64, coalesce bool, unixNano int64, data []byte, endpointID string) {
		occurred := time.Unix(0, unixNano).In(time.FixedZone("", int(unixNano%86400)))
		env := Envelope{ID: id, Type: typ, Tenant: tenant, Entity: entity, Revision: revision, Coalesce: coalesce, OccurredAt: occurred, Data: data}
		now := time.Unix(1764496800, unixNano%1e9)
		want, wantErr := marshalledDelivery(env, endpointID, now)
		enc, err := NewDeliveryEncoder(env, now)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("encoder error %v, json.Marshal error %v", err, wantErr)
		}
		if err == nil {
			if got := enc.Encode(endpointID); string(got) != string(want) {
				t.Fatalf("\ngot  %s\nwant %s", got, want)
			}
			if err := reused.Reset(env, now); err != nil || string(reused.Encode(endpointID)) != string(want) {
				t.Fatalf("a reused encoder gave %s (%v), want %s", reused.Encode(endpointID), err, want)
			}
		}
	})
}

func FuzzMarshalDeliveryMatchesJSONMarshal(f *testing.F) {
	f.Add("evt_1", "ep_1", "acme", "order.updated", "order:1", int64(3), true, int64(1764496800123456789), []byte(`{"a":1}`), 0, int64(0), int64(0), "")
	f.Add("e<", "ep", "t&", "\u2028", "é\xff", int64(-1), false, int64(0), []byte(` [ "<a>" ] `), 7, int64(12), int64(1764496805000000000), "deliver: HTTP 503: <busy>")
	f.Fuzz(func(t *testing.T, id, ep, tenant, typ, entity string, revision int64, coalesce bool, unixNano int64, data []byte,
		attempts int, sequence, notBefore int64, lastError string) {
		d := Delivery{EventID: id, EndpointID: ep, Tenant: tenant, Type: typ, Entity: entity, Revision: revision, Coalesce: coalesce,
			OccurredAt: time.Unix(0, unixNano).In(time.FixedZone("", int(unixNano%86400))), Data: data,
			CreatedAt: time.Unix(0, unixNano/2).UTC(), Attempts: attempts, Sequence: sequence, LastError: lastError}
		if notBefore != 0 {
			d.NotBefore = time.Unix(0, notBefore)
		}
		want, wantErr := json.Marshal(&d)
		got, err := MarshalDelivery(&d)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("MarshalDelivery error %v, json.Marshal error %v", err, wantErr)
		}
		if err == nil && string(got) != string(want) {
			t.Fatalf("\ngot  %s\nwant %s", got, want)
		}
	})
}
