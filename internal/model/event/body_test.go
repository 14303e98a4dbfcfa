package event

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/laneway/laneway/receiver"
)

// payloadJSON is the body as json.Marshal renders the receivers' type
// (receiver.Delivery): the reference the hand-written renderer must match.
func payloadJSON(d *Delivery) ([]byte, error) {
	data := d.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	return json.Marshal(receiver.Delivery{ID: d.EventID, Type: d.Type, Timestamp: d.OccurredAt, Data: data,
		Entity: receiver.Entity{ID: d.Entity, Revision: d.Revision}})
}

func TestBodyMatchesJSONMarshal(t *testing.T) {
	ts := time.Date(2026, 11, 30, 10, 0, 0, 123456789, time.FixedZone("x", 3600))
	for _, d := range []Delivery{
		{EventID: "ev_1", Type: "order.updated", Entity: "order:1", Revision: 17, OccurredAt: ts, Data: json.RawMessage(`{"a":1}`)},
		{EventID: `q"uote\back`, Type: "<html>&amp;", Entity: "tab\there\nnl\r\x01\x1f", Revision: -3, OccurredAt: ts.UTC()},
		{EventID: "bad utf8 \xff\xfe end", Type: "line\u2028sep\u2029", Entity: "ünïcödé 日本", OccurredAt: time.Unix(0, 0).UTC(), Data: json.RawMessage(`"s"`)},
		{EventID: "e", Type: "t", Entity: "x", Data: json.RawMessage(`[1,2,{"k":null}]`)},
	} {
		want, err := payloadJSON(&d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Body()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Body() = %s, %v\nwant      %s", got, err, want)
		}
	}
}

func FuzzBodyMatchesJSONMarshal(f *testing.F) {
	f.Add("ev", "type", "entity", int64(1), `{"a":1}`, int64(0))
	f.Add("<\xff\u2028>", "\x00", "&", int64(-1), `null`, int64(1700000000123456789))
	f.Fuzz(func(t *testing.T, id, typ, entity string, rev int64, data string, nanos int64) {
		var compact bytes.Buffer
		if json.Compact(&compact, []byte(data)) != nil {
			return // not JSON: Body refuses it (TestBodyRefusesInvalidData)
		}
		var escaped bytes.Buffer
		json.HTMLEscape(&escaped, compact.Bytes()) // as stored: deliveries are written by json.Marshal
		d := Delivery{EventID: id, Type: typ, Entity: entity, Revision: rev, OccurredAt: time.Unix(0, nanos).UTC(), Data: escaped.Bytes()}
		want, err := payloadJSON(&d)
		if err != nil {
			return
		}
		got, err := d.Body()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Body() = %s, %v\nwant      %s", got, err, want)
		}
	})
}

func TestBodyRefusesInvalidData(t *testing.T) {
	for _, d := range []Delivery{
		{EventID: "e", Data: json.RawMessage(`{"a":`)},
		{EventID: "e", Data: json.RawMessage(`{}`), OccurredAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if b, err := d.Body(); err == nil {
			t.Errorf("Body() of %+v = %s, want an error", d, b)
		}
	}
}

func BenchmarkBody(b *testing.B) {
	d := Delivery{EventID: "0f8fad5b-d9cb-469f-a165-70867728950e", Type: "order.updated", Entity: "order:123",
		Revision: 17, OccurredAt: time.Now(), Data: json.RawMessage(`{"status":"paid","amount":1200,"currency":"EUR"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Body(); err != nil {
			b.Fatal(err)
		}
	}
}

// A thin body is the full one without data: id, type, timestamp and
// entity only, whatever the data (even data that is not JSON: it is never
// sent).
func TestThinBodyLeavesTheDataOut(t *testing.T) {
	d := Delivery{EventID: "ev_1", Type: "order.updated", Entity: "order:1", Revision: 17,
		OccurredAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Data: json.RawMessage(`{"secret":"s3cr3t"}`)}
	got, err := d.Render(true)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"ev_1","type":"order.updated","timestamp":"2026-11-30T10:00:00Z","entity":{"id":"order:1","revision":17}}`
	if string(got) != want {
		t.Fatalf("thin body %s, want %s", got, want)
	}
	d.Data = json.RawMessage(`{not json`)
	if _, err := d.Render(true); err != nil {
		t.Fatalf("a thin body refused data it never sends: %v", err)
	}
	if _, err := d.Render(false); err == nil {
		t.Fatal("a full body accepted data that is not JSON")
	}
}
