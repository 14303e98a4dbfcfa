package table

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// item is the record type of these tests: a counter with a secret, sealed
// like an endpoint's.
type item struct {
	ID     string `json:"id"`
	Group  string `json:"group,omitempty"`
	N      int    `json:"n"`
	Secret string `json:"-"`
	Held   bool   `json:"-"` // set by the codec when Secret did not open
}

type itemRecord struct {
	item
	Secret string            `json:"secret,omitempty"`
	Sealed *secretbox.Sealed `json:"secrets_sealed,omitempty"`
}

// itemCodec seals with ring, or writes plaintext when ring is nil.
type itemCodec struct{ ring *secretbox.Ring }

func (itemCodec) ID(v item) string { return v.ID }

func (c itemCodec) Encode(v item) ([]byte, error) {
	rec := itemRecord{item: v}
	if c.ring == nil {
		rec.Secret = v.Secret
		return json.Marshal(rec)
	}
	sealed, err := c.ring.SealJSON("test/"+v.ID, v.Secret)
	if err != nil {
		return nil, err
	}
	rec.Sealed = sealed
	return json.Marshal(rec)
}

func (c itemCodec) Decode(id string, value []byte) (item, Seal, error) {
	var rec itemRecord
	if err := json.Unmarshal(value, &rec); err != nil {
		return item{}, Seal{}, err
	}
	if rec.ID != id {
		return item{}, Seal{}, fmt.Errorf("record of key %q holds item %q", id, rec.ID)
	}
	v := rec.item
	if rec.Sealed == nil {
		v.Secret = rec.Secret
		return v, Seal{}, nil
	}
	seal := Seal{KeyID: rec.Sealed.KeyID}
	if seal.Err = c.ring.OpenJSON("test/"+id, rec.Sealed, &v.Secret); seal.Err != nil {
		v.Secret, v.Held = "", true
	}
	return v, seal, nil
}

var (
	errNotFound = errors.New("item not found")
	errHeld     = errors.New("item held")
)

func eachBackend(t *testing.T, fn func(t *testing.T, b testenv.Backend)) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newTopic creates a compacted single-partition topic on b.
func newTopic(t *testing.T, b testenv.Backend) string {
	t.Helper()
	topic := testenv.Unique("table")
	adm := admin(t, b)
	compact := "compact"
	resp, err := adm.CreateTopic(testCtx(t), 1, -1, map[string]*string{"cleanup.policy": &compact}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	waitListed(t, adm, topic)
	return topic
}

// waitListed waits until the brokers list an end offset for the new topic:
// a real broker's metadata lags its creation, and Start needs the offset.
// The broker has no notification for it, so this polls.
func waitListed(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	ctx := testCtx(t)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if o, ok := ends.Lookup(topic, 0); err == nil && ok && o.Err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never listed: %v", topic, err)
		case <-tick.C:
		}
	}
}

func admin(t *testing.T, b testenv.Backend) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// opts configures the tables a test opens.
type opts struct {
	ring   *secretbox.Ring
	logger *slog.Logger
}

// open returns a table of items on topic, not started, stopped at cleanup.
func open(t *testing.T, b testenv.Backend, topic string, o opts) *Table[item] {
	t.Helper()
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	tb, err := New(Config[item]{
		Brokers: b.Brokers, Topic: topic, Codec: itemCodec{ring: o.ring},
		Group: func(v item) string { return v.Group },
		Name:  "item", ErrNotFound: errNotFound, ErrHeld: errHeld, Logger: o.logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tb.Stop(context.Background()) })
	return tb
}

// started is open, then Start.
func started(t *testing.T, b testenv.Backend, topic string, o opts) *Table[item] {
	t.Helper()
	tb := open(t, b, topic, o)
	if err := tb.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	return tb
}

// waitFor waits, through Changed, until cond holds for tb.
func waitFor(t *testing.T, tb *Table[item], cond func(*Table[item]) bool) {
	t.Helper()
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for {
		changed := tb.Changed()
		if cond(tb) {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatal("condition not reached")
		}
	}
}

// produce writes raw records to topic as another writer would.
func produce(t *testing.T, b testenv.Backend, topic string, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		var value []byte
		if kv[i+1] != "" {
			value = []byte(kv[i+1])
		}
		testenv.ProduceRaw(testCtx(t), t, b.Brokers, topic, kv[i], value)
	}
}

// logBuffer is a logger's output, safe to read while the follower writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// records returns how many records topic has had (its end offset).
func records(t *testing.T, b testenv.Backend, topic string) int64 {
	t.Helper()
	ends, err := admin(t, b).ListEndOffsets(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s: %v", topic, o.Err)
	}
	return o.Offset
}

func add(d int) func(item) (item, bool, error) {
	return func(v item) (item, bool, error) {
		v.N += d
		return v, true, nil
	}
}
