package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

func TestCursorRoundTrip(t *testing.T) {
	for _, off := range []int64{0, 1, 127, 128, 1 << 40} {
		got, err := ParseCursor(Cursor(off))
		if err != nil || got != off {
			t.Fatalf("ParseCursor(Cursor(%d)) = %d, %v", off, got, err)
		}
	}
	for _, bad := range []string{"", "fc1_", "fc1_!!", "fc2_AA", "12", Cursor(5) + "A"} {
		if _, err := ParseCursor(bad); !errors.Is(err, ErrBadCursor) {
			t.Errorf("ParseCursor(%q) = %v, want ErrBadCursor", bad, err)
		}
	}
}

type rig struct {
	topics    topics.Config
	adm       *kadm.Client
	writer    *Writer
	reader    *Reader
	positions *Positions
	watcher   *Watcher
	group     string
	redisURL  string
}

func newRig(t *testing.T, b testenv.Backend) *rig {
	t.Helper()
	cl := func() *kgo.Client {
		c, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	r := &rig{topics: topics.Config{}.WithPrefix(testenv.Unique("feedtest")), redisURL: b.RedisURL}
	r.adm = kadm.NewClient(cl())
	r.watcher = NewWatcher(WatcherConfig{Admin: r.adm, PollInterval: 20 * time.Millisecond})
	testenv.Start(t, r.watcher.Start, r.watcher.Stop)
	var err error
	if r.writer, err = NewWriter(WriterConfig{Client: cl()}); err != nil {
		t.Fatal(err)
	}
	if r.reader, err = NewReader(ReaderConfig{Client: cl(), Watcher: r.watcher, Topics: r.topics}); err != nil {
		t.Fatal(err)
	}
	r.group = testenv.Unique("feedgroup")
	r.positions, err = NewPositions(PositionsConfig{Admin: r.adm, Group: r.group, Reader: r.reader, Topics: r.topics,
		Redis: testenv.RedisClient(t, b)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) append(ctx context.Context, t *testing.T, ep string, n int) {
	t.Helper()
	for i := range n {
		body := fmt.Sprintf(`{"id":"e%d","type":"t","timestamp":"2026-12-02T00:00:00Z","entity":{"id":"x","revision":%d}}`, i, i)
		if err := r.writer.Append(ctx, r.topics.Feed(ep), fmt.Sprintf("e%d", i), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
}

type item struct {
	Sequence int64  `json:"sequence"`
	ID       string `json:"id"`
}

func items(t *testing.T, p Page) []item {
	t.Helper()
	out := make([]item, len(p.Events))
	for i, e := range p.Events {
		if err := json.Unmarshal(e, &out[i]); err != nil {
			t.Fatalf("event %d %s: %v", i, e, err)
		}
	}
	return out
}

// TestPagesFollowSequencesWithoutGaps appends to two feeds and reads one in
// pages: sequences run 0,1,2,… with no gap and no event of the other feed.
func TestPagesFollowSequencesWithoutGaps(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := newRig(t, b)
			for _, ep := range []string{"ep_a", "ep_b"} {
				if err := topics.EnsureFeed(ctx, r.adm, r.topics, r.topics.Feed(ep)); err != nil {
					t.Fatal(err)
				}
			}
			r.append(ctx, t, "ep_b", 5)
			r.append(ctx, t, "ep_a", 23)
			var seen []item
			from := int64(0)
			for len(seen) < 23 {
				p, err := r.reader.Read(ctx, "ep_a", from, 10, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(p.Events) == 0 {
					t.Fatalf("empty page at %d after %d events", from, len(seen))
				}
				seen = append(seen, items(t, p)...)
				from = p.Next
			}
			for i, it := range seen {
				if it.Sequence != int64(i) || it.ID != fmt.Sprintf("e%d", i) {
					t.Fatalf("event %d is %+v", i, it)
				}
			}
			if p, err := r.reader.Read(ctx, "ep_a", from, 10, 0); err != nil || len(p.Events) != 0 || p.Next != from {
				t.Fatalf("read at the end: %d events, next %d, %v", len(p.Events), p.Next, err)
			}
			var ahead *AheadError
			if _, err := r.reader.Read(ctx, "ep_a", from+5, 10, 0); !errors.As(err, &ahead) {
				t.Fatalf("read past the end: %v, want an AheadError", err)
			}
		})
	}
}

// TestLongPollWakesOnAppend waits on an empty feed: an append elsewhere
// (seen by the watcher's poll) ends the wait with the event.
func TestLongPollWakesOnAppend(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := newRig(t, b)
			if err := topics.EnsureFeed(ctx, r.adm, r.topics, r.topics.Feed("ep_a")); err != nil {
				t.Fatal(err)
			}
			got := make(chan Page, 1)
			errs := make(chan error, 1)
			go func() {
				p, err := r.reader.Read(ctx, "ep_a", 0, 10, 20*time.Second)
				errs <- err
				got <- p
			}()
			// The append is made once the wait is registered, so the test
			// cannot pass by reading an event that was already there.
			deadline := time.After(10 * time.Second)
			for !r.waiting("ep_a") {
				select {
				case <-deadline:
					t.Fatal("the read never waited")
				case err := <-errs:
					t.Fatalf("the read ended before anything was appended: %v, %+v", err, <-got)
				case <-time.After(5 * time.Millisecond):
				}
			}
			r.append(ctx, t, "ep_a", 1)
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
			if p := <-got; len(p.Events) != 1 || p.Next != 1 {
				t.Fatalf("the long poll returned %d events, next %d", len(p.Events), p.Next)
			}
		})
	}
}

func (r *rig) waiting(ep string) bool {
	r.watcher.mu.Lock()
	defer r.watcher.mu.Unlock()
	return len(r.watcher.waiters[r.topics.Feed(ep)]) > 0
}

// TestAcksAreMonotonicAndExpiredCursorsAreRefused acknowledges forward and
// backward, then moves the feed's start past a cursor.
func TestAcksAreMonotonicAndExpiredCursorsAreRefused(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := newRig(t, b)
			if err := topics.EnsureFeed(ctx, r.adm, r.topics, r.topics.Feed("ep_a")); err != nil {
				t.Fatal(err)
			}
			r.append(ctx, t, "ep_a", 6)
			pos, err := r.positions.Position(ctx, "ep_a")
			if err != nil || pos.HasAcked || pos.Lag() != 6 || pos.OldestUnacked.IsZero() {
				t.Fatalf("before any ack: %+v, %v", pos, err)
			}
			for _, c := range []struct{ ack, want int64 }{{4, 4}, {2, 4}, {6, 6}} {
				if got, err := r.positions.Ack(ctx, "ep_a", c.ack); err != nil || got != c.want {
					t.Fatalf("Ack(%d) = %d, %v; want %d", c.ack, got, err, c.want)
				}
			}
			var ahead *AheadError
			if _, err := r.positions.Ack(ctx, "ep_a", 7); !errors.As(err, &ahead) {
				t.Fatalf("Ack past the end: %v", err)
			}
			pos, err = r.positions.Position(ctx, "ep_a")
			if err != nil || !pos.HasAcked || pos.Acked != 6 || pos.Lag() != 0 || !pos.OldestUnacked.IsZero() {
				t.Fatalf("after acks: %+v, %v", pos, err)
			}

			offs := kadm.Offsets{}
			offs.AddOffset(r.topics.Feed("ep_a"), 0, 3, -1)
			if _, err := r.adm.DeleteRecords(ctx, offs); err != nil {
				t.Fatal(err)
			}
			var expired *ExpiredError
			if _, err := r.reader.Read(ctx, "ep_a", 1, 10, 0); !errors.As(err, &expired) || expired.Oldest != 3 {
				t.Fatalf("read below the start: %v, want ExpiredError{3}", err)
			}
		})
	}
}

// TestCollectorReportsPositions reads the metrics of a feed whose consumer
// acknowledged 4 of 6 events.
func TestCollectorReportsPositions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRig(t, testenv.Kfake(t))
	if err := topics.EnsureFeed(ctx, r.adm, r.topics, r.topics.Feed("ep_a")); err != nil {
		t.Fatal(err)
	}
	r.append(ctx, t, "ep_a", 6)
	if _, err := r.positions.Ack(ctx, "ep_a", 4); err != nil {
		t.Fatal(err)
	}
	svc := &Service{positions: r.positions}
	now := time.Now().Add(time.Minute)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(svc, func() []string { return []string{"ep_a"} }, func() time.Time { return now }))
	want := map[string]float64{"laneway_feed_end_sequence": 6, "laneway_feed_lag_events": 2, "laneway_feed_acknowledged": 1}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		got[f.GetName()] = f.GetMetric()[0].GetGauge().GetValue()
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
	if age := got["laneway_feed_oldest_unacked_age_seconds"]; age < 59 || age > 120 {
		t.Errorf("oldest unacknowledged age %v s, want about a minute", age)
	}
}
