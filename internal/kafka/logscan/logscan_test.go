package logscan

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// seed writes n records per partition; record i of partition p is stamped
// base + i minutes and its value is "p/i".
func seed(t *testing.T, b testenv.Backend, partitions, n int) (*Scanner, string) {
	t.Helper()
	topic := testenv.Unique("scan")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, int32(partitions), -1, testenv.KeepForever(), topic); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := range partitions {
		for i := range n {
			recs = append(recs, &kgo.Record{
				Partition: int32(p), Value: []byte(fmt.Sprintf("%d/%d", p, i)),
				Timestamp: base.Add(time.Duration(i) * time.Minute),
			})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return New(kread.NewReader(cl, topic), adm), topic
}

// scanAll follows cursors to the end and returns every value.
func scanAll(t *testing.T, s *Scanner, q Query) (values []string, pages int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		page, err := s.Scan(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range page.Records {
			values = append(values, string(r.Value))
		}
		if page.Next == "" {
			return values, pages
		}
		if pages > 10_000 {
			t.Fatal("cursor never ends")
		}
		q = Query{Cursor: page.Next, Limit: q.Limit, MaxScan: q.MaxScan, Match: q.Match}
	}
}

func TestScanTimeRangeReadsOnlyTheRange(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			s, _ := seed(t, b, 3, 400)
			q := Query{Since: base.Add(100 * time.Minute), Until: base.Add(109 * time.Minute), Limit: 7}
			got, pages := scanAll(t, s, q)
			var want []string
			for p := range 3 {
				for i := 100; i <= 109; i++ {
					want = append(want, fmt.Sprintf("%d/%d", p, i))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
			if pages != 5 { // 30 matches, 7 per page
				t.Errorf("%d pages, want 5", pages)
			}
			// Offsets by time: only the range (plus at most one fetch's
			// overshoot per partition, which is not counted) is examined.
			if n := s.Scanned(); n != 30 {
				t.Errorf("examined %d records of 1200, want exactly the 30 in range", n)
			}
		})
	}
}

func TestScanPartitionsMatchAndOpenRange(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			s, _ := seed(t, b, 3, 50)
			even := func(r *kgo.Record) bool {
				_, i, _ := cutInt(string(r.Value))
				return i%2 == 0
			}
			got, _ := scanAll(t, s, Query{Partitions: []int32{1}, Match: even, Limit: 4})
			if len(got) != 25 || got[0] != "1/0" || got[24] != "1/48" {
				t.Fatalf("got %d values %v", len(got), got)
			}
		})
	}
}

func TestScanMaxScanBoundsOnePage(t *testing.T) {
	s, _ := seed(t, testenv.Kfake(t), 1, 300)
	none := func(*kgo.Record) bool { return false }
	ctx := context.Background()
	page, err := s.Scan(ctx, Query{Match: none, MaxScan: 100})
	if err != nil {
		t.Fatal(err)
	}
	if page.Scanned != 100 || page.Next == "" || len(page.Records) != 0 {
		t.Fatalf("page scanned %d, next %q, %d records; want 100 scanned and a cursor", page.Scanned, page.Next, len(page.Records))
	}
	got, pages := scanAll(t, s, Query{Cursor: page.Next, MaxScan: 100})
	if len(got) != 200 || got[0] != "0/100" {
		t.Fatalf("resumed scan returned %d values starting %v", len(got), got[:min(1, len(got))])
	}
	if pages < 2 {
		t.Errorf("%d pages for 200 records at 100 per page", pages)
	}
}

func TestScanCursorIsStableWhileTheTopicGrows(t *testing.T) {
	b := testenv.Kfake(t)
	s, topic := seed(t, b, 1, 20)
	ctx := context.Background()
	page, err := s.Scan(ctx, Query{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got, _ := scanAll(t, s, Query{Cursor: page.Next, Limit: 10})
	if len(got) != 10 || got[9] != "0/19" {
		t.Fatalf("second page %v: want the 10 records that existed when the scan began", got)
	}
}

func TestScanRejectsForeignCursor(t *testing.T) {
	s, _ := seed(t, testenv.Kfake(t), 1, 1)
	for _, c := range []string{"%%%", "bm90IGpzb24", encodeCursor(cursor{Topic: "other"}),
		encodeCursor(cursor{Topic: s.reader.Topic(), Spans: []span{{Next: 5, End: 2}}})} {
		if _, err := s.Scan(context.Background(), Query{Cursor: c}); !errors.Is(err, ErrBadCursor) {
			t.Errorf("cursor %q: err %v, want ErrBadCursor", c, err)
		}
	}
}

func cutInt(v string) (int, int, bool) {
	for i := range v {
		if v[i] == '/' {
			p, err1 := strconv.Atoi(v[:i])
			n, err2 := strconv.Atoi(v[i+1:])
			return p, n, err1 == nil && err2 == nil
		}
	}
	return 0, 0, false
}
