package table

import (
	"errors"
	"strings"
	"testing"

	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// A record that does not decode (not JSON, or another id's) is skipped and
// logged, and the value it replaced is gone: it is the latest record.
func TestUndecodableRecordSkippedAndLogged(t *testing.T) {
	b := testenv.Kfake(t)
	topic := newTopic(t, b)
	produce(t, b, topic,
		"a", `{"id":"a","n":1}`,
		"a", `not json`,
		"b", `{"id":"other"}`,
		"c", `{"id":"c"}`)
	var log logBuffer
	tb := started(t, b, topic, opts{logger: log.logger()})
	if got := ids(tb.List()); len(got) != 1 || got[0] != "c" {
		t.Fatalf("List = %v, want only c", got)
	}
	if n := strings.Count(log.String(), "skipping unreadable item config record"); n != 2 {
		t.Fatalf("%d records logged as unreadable, want 2:\n%s", n, log.String())
	}
}

// A record whose secrets do not open here is held: Get shows the codec's
// stand-in, the census and the log name it, Put, Update and Rekey leave it
// alone, Delete removes it.
func TestHeldRecord(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		ctx := testCtx(t)
		topic := newTopic(t, b)
		writer := started(t, b, topic, opts{ring: testenv.Ring(t, secretbox.NewKey("k1"))})
		if err := writer.Put(ctx, item{ID: "a", Secret: "s"}); err != nil {
			t.Fatal(err)
		}
		var log logBuffer
		ring := testenv.Ring(t, secretbox.NewKey("k2"))
		other := started(t, b, topic, opts{ring: ring, logger: log.logger()})
		if v, ok := other.Get("a"); !ok || !v.Held || v.Secret != "" {
			t.Fatalf("without k1 a reads %+v, %v; want held, without its secret", v, ok)
		}
		if !strings.Contains(log.String(), "item secrets cannot be decrypted") || !strings.Contains(log.String(), "key_id=k1") {
			t.Fatalf("the held record is not logged with its key:\n%s", log.String())
		}
		n := records(t, b, topic)
		if err := other.Put(ctx, item{ID: "a"}); !errors.Is(err, errHeld) {
			t.Fatalf("Put of a held record = %v, want ErrHeld", err)
		}
		if _, _, err := other.Update(ctx, "a", add(1)); !errors.Is(err, errHeld) {
			t.Fatalf("Update of a held record = %v, want ErrHeld", err)
		}
		c, err := other.Rekey(ctx, ring)
		if err != nil || c.Rewritten != 0 || !strings.Contains(c.Unreadable["a"], "k1") {
			t.Fatalf("Rekey = %+v, %v; want a listed unreadable, nothing rewritten", c, err)
		}
		if m := records(t, b, topic); m != n {
			t.Fatalf("%d records written over a held one", m-n)
		}
		if err := other.Delete(ctx, "a"); err != nil {
			t.Fatalf("Delete of a held record: %v", err)
		}
		waitFor(t, writer, func(tb *Table[item]) bool { _, ok := tb.Get("a"); return !ok })
	})
}

// Another writer seals the record under a key this table lacks between
// Update's read and its write: Update cannot rewrite that value, so it
// writes it back as it was and reports the record held.
func TestUpdateRestoresARacingHeldRecord(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		ctx := testCtx(t)
		topic := newTopic(t, b)
		k1, k2 := secretbox.NewKey("k1"), secretbox.NewKey("k2")
		mine := started(t, b, topic, opts{ring: testenv.Ring(t, k1)})
		newer := started(t, b, topic, opts{ring: testenv.Ring(t, k1, k2)})
		if err := mine.Put(ctx, item{ID: "a", Secret: "s-old"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, newer, func(tb *Table[item]) bool { _, ok := tb.Get("a"); return ok })
		writes := 0
		mine.SetBeforeWrite(func() {
			if writes++; writes == 1 {
				if err := newer.Put(ctx, item{ID: "a", N: 5, Secret: "s-new"}); err != nil {
					t.Error(err)
				}
			}
		})
		if _, _, err := mine.Update(ctx, "a", add(1)); !errors.Is(err, errHeld) {
			t.Fatalf("Update over a record it cannot open = %v, want ErrHeld", err)
		}
		if keys := testenv.SealedKeyIDs(ctx, t, b.Brokers, topic, "s-old", "s-new"); keys["a"] != "k2" {
			t.Fatalf("the latest record of a is sealed under %q, want the other writer's k2", keys["a"])
		}
		waitFor(t, newer, func(tb *Table[item]) bool { v, _ := tb.Get("a"); return v.N == 5 && v.Secret == "s-new" })
	})
}

// Rekey rewrites plaintext records and those under an older key, and
// leaves held ones.
func TestRekeyMovesEveryReadableRecordToTheNewestKey(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		ctx := testCtx(t)
		topic := newTopic(t, b)
		k1, k2, k3 := secretbox.NewKey("k1"), secretbox.NewKey("k2"), secretbox.NewKey("k3")
		if err := started(t, b, topic, opts{}).Put(ctx, item{ID: "plain", Secret: "s-plain"}); err != nil {
			t.Fatal(err)
		}
		if err := started(t, b, topic, opts{ring: testenv.Ring(t, k1)}).Put(ctx, item{ID: "old", Secret: "s-old"}); err != nil {
			t.Fatal(err)
		}
		if err := started(t, b, topic, opts{ring: testenv.Ring(t, k3)}).Put(ctx, item{ID: "lost", Secret: "s-lost"}); err != nil {
			t.Fatal(err)
		}
		ring := testenv.Ring(t, k1, k2)
		c, err := started(t, b, topic, opts{ring: ring}).Rekey(ctx, ring)
		if err != nil || c.Rewritten != 2 || c.ByKey["k2"] != 2 || len(c.ByKey) != 1 || c.Unreadable["lost"] == "" {
			t.Fatalf("Rekey = %+v, %v; want plain and old under k2, lost unreadable", c, err)
		}
		keys := testenv.SealedKeyIDs(ctx, t, b.Brokers, topic, "s-old", "s-lost") // not s-plain: its first record is plaintext
		if keys["plain"] != "k2" || keys["old"] != "k2" || keys["lost"] != "k3" {
			t.Fatalf("after Rekey the topic holds %v", keys)
		}
		if v, _ := started(t, b, topic, opts{ring: testenv.Ring(t, k2)}).Get("plain"); v.Secret != "s-plain" {
			t.Fatalf("with k2 alone plain reads %+v", v)
		}
		if _, err := started(t, b, topic, opts{}).Rekey(ctx, nil); !errors.Is(err, secretbox.ErrNoRing) {
			t.Fatalf("Rekey without a ring = %v, want ErrNoRing", err)
		}
	})
}

// Only an id's latest record counts: one superseded by a record this
// table opens is neither held nor logged, while a latest record under a
// missing key is logged once, at load or when it arrives.
func TestSupersededRecordUnderAMissingKeyIsNotHeld(t *testing.T) {
	ctx := testCtx(t)
	b := testenv.Kfake(t)
	topic := newTopic(t, b)
	k1, k2 := secretbox.NewKey("k1"), secretbox.NewKey("k2")
	old := started(t, b, topic, opts{ring: testenv.Ring(t, k1)})
	for _, id := range []string{"a", "b"} {
		if err := old.Put(ctx, item{ID: id, Secret: "s-old"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := started(t, b, topic, opts{ring: testenv.Ring(t, k1, k2)}).Put(ctx, item{ID: "a", Secret: "s-new"}); err != nil {
		t.Fatal(err)
	}
	var log logBuffer
	tb := started(t, b, topic, opts{ring: testenv.Ring(t, k2), logger: log.logger()})
	if v, _ := tb.Get("a"); v.Held || v.Secret != "s-new" {
		t.Fatalf("a reads %+v; want its latest record, under k2", v)
	}
	if got := strings.Count(log.String(), "secrets cannot be decrypted"); got != 1 || !strings.Contains(log.String(), "item_id=b") {
		t.Fatalf("%d held records logged, want b's alone:\n%s", got, log.String())
	}
	if err := old.Put(ctx, item{ID: "c", Secret: "s-old"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tb, func(tb *Table[item]) bool { _, ok := tb.Get("c"); return ok })
	if got := strings.Count(log.String(), "secrets cannot be decrypted"); got != 2 || !strings.Contains(log.String(), "item_id=c") {
		t.Fatalf("after c arrived under k1, %d held records logged, want b's and c's:\n%s", got, log.String())
	}
}
