package table

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

func ids(vs []item) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.ID
	}
	return out
}

// What another writer put on the topic before Start is all there when
// Start returns (overwrites and tombstones applied); what it writes after
// arrives in the background.
func TestStartLoadsToTheEndThenFollows(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		topic := newTopic(t, b)
		produce(t, b, topic,
			"c", `{"id":"c","group":"g1","n":1}`,
			"a", `{"id":"a","group":"g1","n":1}`,
			"b", `{"id":"b","group":"g2","n":1}`,
			"a", `{"id":"a","group":"g2","n":2}`,
			"c", "") // tombstone
		tb := started(t, b, topic, opts{})
		if got := tb.List(); !slices.Equal(ids(got), []string{"a", "b"}) || got[0].N != 2 {
			t.Fatalf("after Start: %+v, want a (n 2) and b, sorted", got)
		}
		if g := maps.Collect(tb.Group("g2")); len(g) != 2 || g["a"].N != 2 {
			t.Fatalf("group g2 = %+v, want a and b", g)
		}
		if g := maps.Collect(tb.Group("g1")); len(g) != 0 {
			t.Fatalf("group g1 = %+v, want empty: a moved, c deleted", g)
		}
		produce(t, b, topic, "d", `{"id":"d","n":7}`, "b", "")
		waitFor(t, tb, func(tb *Table[item]) bool { _, ok := tb.Get("b"); return !ok })
		if d, ok := tb.Get("d"); !ok || d.N != 7 {
			t.Fatalf("d = %+v, %v: a record written before b's tombstone is missing", d, ok)
		}
	})
}

// A writer reads its own Put and Delete as soon as they return; another
// table follows.
func TestPutAndDeleteVisibleOnReturn(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		ctx := testCtx(t)
		topic := newTopic(t, b)
		writer, follower := started(t, b, topic, opts{}), started(t, b, topic, opts{})
		if err := writer.Put(ctx, item{ID: "a", N: 1, Secret: "s"}); err != nil {
			t.Fatal(err)
		}
		if got, ok := writer.Get("a"); !ok || got.N != 1 || got.Secret != "s" {
			t.Fatalf("writer reads %+v, %v after Put", got, ok)
		}
		waitFor(t, follower, func(tb *Table[item]) bool { _, ok := tb.Get("a"); return ok })
		if err := writer.Delete(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		if _, ok := writer.Get("a"); ok {
			t.Fatal("writer still reads a after Delete")
		}
		if err := writer.Delete(ctx, "a"); err != errNotFound {
			t.Fatalf("second Delete = %v, want the configured ErrNotFound", err)
		}
		if err := writer.Put(ctx, item{N: 1}); err == nil {
			t.Fatal("Put without an id succeeded")
		}
		waitFor(t, follower, func(tb *Table[item]) bool { _, ok := tb.Get("a"); return !ok })
	})
}

// Stop returns only once the follower has: nothing of the table runs
// after it, and a write then fails instead of waiting for a read-back that
// cannot come.
func TestStopDrainsTheFollower(t *testing.T) {
	b := testenv.Kfake(t)
	topic := newTopic(t, b)
	tb := started(t, b, topic, opts{})
	_ = tb.Stop(context.Background())
	select {
	case <-tb.done:
	default:
		t.Fatal("Stop returned before the follower")
	}
	_ = tb.Stop(context.Background()) // again: no panic, no wait
	if err := tb.Put(context.Background(), item{ID: "a"}); err == nil {
		t.Fatal("Put after Stop succeeded")
	}
	if err := tb.Start(testCtx(t)); err == nil {
		t.Fatal("a second Start succeeded")
	}
	_ = open(t, b, topic, opts{}).Stop(context.Background()) // never started: closes the client
}

// A Start that cannot finish loading (the broker answers no fetch) stops
// its follower before it returns.
func TestFailedStartStopsTheFollower(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := testenv.Backend{Name: "kfake", Brokers: c.ListenAddrs()}
	topic := newTopic(t, b)
	produce(t, b, topic, "a", `{"id":"a"}`)
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return nil, errors.New("no fetch in this test"), true
	})
	tb := open(t, b, topic, opts{})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := tb.Start(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v, want the deadline exceeded while loading", err)
	}
	select {
	case <-tb.done:
	default:
		t.Fatal("the follower still runs after a failed Start")
	}
}
