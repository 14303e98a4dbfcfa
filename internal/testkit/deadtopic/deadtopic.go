// Package deadtopic reads a dead-letter topic in tests. A Reader follows
// the topic from its start, committed records only (the fan-out writes
// its dead letters in transactions), and decodes each as an
// event.DeadLetter. Written reads up to the end the topic has when it is
// called, so a test can tell that nothing was dead-lettered; Until reads
// on as letters are written until a test's condition holds. Describe
// prints letters for a failure message.
package deadtopic

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
)

// Reader follows one dead-letter topic. It is not safe for concurrent use.
type Reader struct {
	cl      *kgo.Client
	topic   string
	next    map[int32]int64 // per partition, the offset after the last record read (markers included)
	letters []event.DeadLetter
}

// Follow starts reading topic from its start; the client closes when the
// test ends.
func Follow(t testing.TB, brokers []string, topic string) *Reader {
	t.Helper()
	r := open(t, brokers, topic)
	t.Cleanup(r.cl.Close)
	return r
}

// Read returns every dead letter committed to topic so far.
func Read(t testing.TB, brokers []string, topic string) []event.DeadLetter {
	t.Helper()
	r := open(t, brokers, topic)
	defer r.cl.Close()
	return r.Written(t)
}

func open(t testing.TB, brokers []string, topic string) *Reader {
	t.Helper()
	// Transaction markers are kept so that a partition's read position is
	// known: Written reads until it reaches the stable end.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return &Reader{cl: cl, topic: topic, next: map[int32]int64{}}
}

// Letters is every letter read so far: each partition's in offset order,
// partitions interleaved as they were fetched.
func (r *Reader) Letters() []event.DeadLetter { return slices.Clone(r.letters) }

// Written reads up to the end the topic has now (its last stable offset)
// and returns every letter read.
func (r *Reader) Written(t testing.TB) []event.DeadLetter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.readToEnd(ctx, t); err != nil {
		t.Fatalf("reading %s to its end: %v; %s", r.topic, err, Describe(r.letters))
	}
	return r.Letters()
}

// Until reads up to the topic's end, then on as letters are written,
// until done holds for every letter read, and returns them. It fails the
// test, naming what it waited for, if within passes first.
func (r *Reader) Until(t testing.TB, within time.Duration, what string, done func([]event.DeadLetter) bool) []event.DeadLetter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	err := r.readToEnd(ctx, t)
	for err == nil && !done(r.letters) {
		if err = r.poll(ctx, t); err == nil {
			err = r.readToEnd(ctx, t) // check what was written by then, as a whole
		}
	}
	if err != nil {
		t.Fatalf("waiting %v for %s: %v; so far %s", within, what, err, Describe(r.letters))
	}
	return r.Letters()
}

// readToEnd reads until every partition is read up to the last stable
// offset it has now.
func (r *Reader) readToEnd(ctx context.Context, t testing.TB) error {
	ends, err := kadm.NewClient(r.cl).ListCommittedOffsets(ctx, r.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("end offsets: %w", err)
	}
	for !r.reached(ends) {
		if err := r.poll(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reader) reached(ends kadm.ListedOffsets) bool {
	reached := true
	ends.Each(func(o kadm.ListedOffset) { reached = reached && r.next[o.Partition] >= o.Offset })
	return reached
}

// poll waits for the next fetch and decodes its letters; it returns only
// ctx's error (a fetch error is retried by the client).
func (r *Reader) poll(ctx context.Context, t testing.TB) error {
	t.Helper()
	fetches := r.cl.PollFetches(ctx)
	if err := ctx.Err(); err != nil {
		return err
	}
	fetches.EachRecord(func(rec *kgo.Record) {
		r.next[rec.Partition] = max(r.next[rec.Partition], rec.Offset+1)
		if rec.Attrs.IsControl() {
			return
		}
		var l event.DeadLetter
		if err := json.Unmarshal(rec.Value, &l); err != nil {
			t.Errorf("undecodable dead letter at %s/%d@%d: %v", r.topic, rec.Partition, rec.Offset, err)
			return
		}
		r.letters = append(r.letters, l)
	})
	return nil
}

// Describe prints letters for a failure message: the count, then each
// letter's id, reason, entity, attempts and detail.
func Describe(letters []event.DeadLetter) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d dead letters:", len(letters))
	for _, l := range letters {
		entity, attempts := "", 0
		if l.Delivery != nil {
			entity, attempts = l.Delivery.Entity, l.Delivery.Attempts
		}
		fmt.Fprintf(&b, " {%s %s %s attempts=%d %q}", l.ID, l.Reason, entity, attempts, l.Detail)
	}
	return b.String()
}
