// Package table keeps every instance's copy of one kind of config record
// (endpoints, inbound sources) that lives on a compacted, single-partition
// Kafka topic: it loads the topic to its end, follows it, and writes to it
// so that a writer reads its own write.
package table

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/plumbing/valutil"
	"github.com/laneway/laneway/internal/security/secretbox"
)

// Codec turns one kind of record into its value on the topic and back.
type Codec[T any] interface {
	// ID is the id v is stored under: its record key.
	ID(v T) string
	// Encode is v as a record value, its secrets sealed (the id as
	// associated data) or in plaintext, as the codec is configured.
	Encode(v T) ([]byte, error)
	// Decode reads the record value of key id. An error says the value is
	// not a record of this id: the table logs it and holds nothing for id.
	// Secrets that do not open are no error: Decode returns what the table
	// is to hold instead (without secrets, and marked so that nothing is
	// signed or checked with them) and says why in Seal.Err; the record is
	// then held (see Table).
	Decode(id string, value []byte) (T, Seal, error)
}

// Seal is how a record's secrets were sealed.
type Seal struct {
	// KeyID is the key they are sealed under, "" for plaintext.
	KeyID string
	// Err says why they did not open here; nil when they did.
	Err error
}

// Config configures a Table.
type Config[T any] struct {
	// Brokers to connect to. Required.
	Brokers []string
	// Topic is the compacted topic, one partition. Required.
	Topic string
	// Codec reads and writes record values. Required.
	Codec Codec[T]
	// Group, if set, indexes the records by what it returns (a tenant), for
	// Group lookups that do not scan the table. Default nil: no index.
	Group func(T) string
	// Name is what a record is, in errors and logs. Default "record".
	Name string
	// HeldNote says, in the log line of a held record, what holding it
	// means to its users. Default "held until the key is back in the key
	// file".
	HeldNote string
	// ErrNotFound is returned by Delete and Update for an id the table
	// does not hold. Default ErrNotFound.
	ErrNotFound error
	// ErrHeld is wrapped by Put and Update for a held id. Default ErrHeld.
	ErrHeld error
	// WriteTimeout bounds one write and its read-back. Default 30s.
	WriteTimeout time.Duration
	// ClientOpts are extra franz-go options (metrics hooks, TLS, SASL).
	ClientOpts []kgo.Opt
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// ErrNotFound is the default Config.ErrNotFound.
var ErrNotFound = errors.New("not found")

// ErrHeld is the default Config.ErrHeld.
var ErrHeld = errors.New("the record's secrets cannot be decrypted with this instance's key file")

func (c *Config[T]) setDefaults() {
	c.Name = cmp.Or(c.Name, "record")
	c.HeldNote = cmp.Or(c.HeldNote, "held until the key is back in the key file")
	if c.ErrNotFound == nil {
		c.ErrNotFound = ErrNotFound
	}
	if c.ErrHeld == nil {
		c.ErrHeld = ErrHeld
	}
	c.WriteTimeout = valutil.PositiveOr(c.WriteTimeout, 30*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.Default())
}

// Table is every instance's view of a compacted topic: it follows the
// topic from the beginning and keeps the latest value per id in memory.
// Writes go to the topic and return once this instance has read them back,
// so a client that writes and then reads sees its write.
//
// Put and Delete are blind writes: the last one wins. Update changes the
// latest value of a record instead of one read earlier; see Update for how
// far that goes on a topic without compare-and-set.
//
// A record whose secrets do not open here is held: Get shows what the
// codec decoded in its place, and Put and Update refuse to write it
// (Config.ErrHeld), so that its sealed secrets are never overwritten.
// Delete still works.
type Table[T any] struct {
	cfg    Config[T]
	client *kgo.Client

	mu       sync.RWMutex
	rows     map[string]row[T]
	groups   map[string][]string // Config.Group -> ids, in the order applied
	versions map[string]int64    // id -> offset of its latest record, tombstones included
	watch    *watch[T]           // the id an Update is writing, if any
	applied  int64               // offset of the next record to apply
	changed  chan struct{}       // closed and replaced whenever applied advances
	// loadEnd is the topic's end offset when Start began; set before the
	// follower starts. Held records below it are logged once the load is
	// complete, and only the ids' latest: a compacted topic keeps an id's
	// superseded records (one sealed under a key rotated out since, say)
	// until compaction, and those hold nothing.
	loadEnd int64

	// updateMu serialises Update in this process, so that two Updates here
	// never race each other (only writers elsewhere, or Put and Delete).
	updateMu sync.Mutex
	// beforeWrite, if set, runs before each write of Update (test hook).
	beforeWrite func()

	lifeMu  sync.Mutex
	started bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when the follower has returned
	close   sync.Once
}

// row is the latest value of one id.
type row[T any] struct {
	v      T
	keyID  string // "" for plaintext
	held   *held  // nil unless its secrets do not open
	offset int64  // of the record it was read from
}

// held is a record whose secrets do not open: why, and its value as read,
// so that it can be written back untouched.
type held struct {
	err error
	raw []byte
}

// New connects to Kafka; call Start to load and follow the topic.
func New[T any](cfg Config[T]) (*Table[T], error) {
	if cfg.Topic == "" || cfg.Codec == nil {
		return nil, errors.New("table: Topic and Codec are required")
	}
	cfg.setDefaults()
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), // a writer waits for its record: do not batch
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%s table client: %w", cfg.Name, err)
	}
	return &Table[T]{
		cfg: cfg, client: cl,
		rows: map[string]row[T]{}, groups: map[string][]string{}, versions: map[string]int64{},
		changed: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// Start reads the topic up to its current end, so the view is complete when
// Start returns, then keeps following it in the background until Stop. If
// it fails, the follower is already stopped; Stop still closes the client.
func (t *Table[T]) Start(ctx context.Context) error {
	t.lifeMu.Lock()
	if t.started {
		t.lifeMu.Unlock()
		return fmt.Errorf("%s table: started twice", t.cfg.Name)
	}
	t.started = true
	end, err := t.endOffset(ctx)
	if err != nil {
		t.lifeMu.Unlock()
		return err
	}
	t.loadEnd = end
	runCtx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	go t.follow(runCtx)
	t.lifeMu.Unlock()
	if err := t.waitApplied(ctx, end); err != nil {
		t.stopFollower()
		return err
	}
	t.logLoadedHeld()
	return nil
}

// logLoadedHeld logs the held records among those Start loaded, once each
// id's latest record is known. Records after the load log themselves as
// they are applied (apply), so none is logged twice.
func (t *Table[T]) logLoadedHeld() {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, id := range slices.Sorted(maps.Keys(t.rows)) {
		if r := t.rows[id]; r.held != nil && r.offset < t.loadEnd {
			t.logHeld(id, r)
		}
	}
}

// logHeld says that id's latest record is held, and why.
func (t *Table[T]) logHeld(id string, r row[T]) {
	t.cfg.Logger.Error(t.cfg.Name+" secrets cannot be decrypted: "+t.cfg.HeldNote,
		t.cfg.Name+"_id", id, "key_id", r.keyID, "offset", r.offset, "err", r.held.err)
}

// Stop ends the follower, waits for it and closes the client; ctx is not
// used (the follower ends at once). It may be called more than once, and
// without Start. It returns nil.
func (t *Table[T]) Stop(context.Context) error {
	t.stopFollower()
	t.close.Do(t.client.Close)
	return nil
}

func (t *Table[T]) stopFollower() {
	t.lifeMu.Lock()
	defer t.lifeMu.Unlock()
	if t.cancel != nil {
		t.cancel()
		<-t.done
	}
}

func (t *Table[T]) endOffset(ctx context.Context) (int64, error) {
	ends, err := kadm.NewClient(t.client).ListEndOffsets(ctx, t.cfg.Topic)
	if err != nil {
		return 0, fmt.Errorf("list end offsets of %s: %w", t.cfg.Topic, err)
	}
	o, ok := ends.Lookup(t.cfg.Topic, 0)
	if !ok || o.Err != nil {
		return 0, fmt.Errorf("end offset of %s: %v", t.cfg.Topic, o.Err)
	}
	return o.Offset, nil
}

func (t *Table[T]) follow(ctx context.Context) {
	defer close(t.done)
	for {
		fetches := t.client.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(topic string, p int32, err error) {
			t.cfg.Logger.Warn(t.cfg.Name+" config fetch failed", "topic", topic, "partition", p, "err", err)
		})
		fetches.EachRecord(t.apply)
	}
}

// apply makes record r the latest of its id. It decodes before taking the
// lock, so that opening secrets does not hold up readers.
func (t *Table[T]) apply(r *kgo.Record) {
	id := string(r.Key)
	next, ok := t.decode(id, r)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noteReplacedLocked(id, r.Offset)
	t.versions[id] = r.Offset
	t.removeLocked(id)
	if ok {
		t.addLocked(id, next)
		if next.held != nil && r.Offset >= t.loadEnd {
			t.logHeld(id, next)
		}
	}
	t.applied = r.Offset + 1
	close(t.changed)
	t.changed = make(chan struct{})
}

// decode reads record r of id; false for a tombstone or an unreadable value.
func (t *Table[T]) decode(id string, r *kgo.Record) (row[T], bool) {
	if r.Value == nil {
		return row[T]{}, false
	}
	v, seal, err := t.cfg.Codec.Decode(id, r.Value)
	if err != nil {
		t.cfg.Logger.Error("skipping unreadable "+t.cfg.Name+" config record", "offset", r.Offset, "key", id, "err", err)
		return row[T]{}, false
	}
	next := row[T]{v: v, keyID: seal.KeyID, offset: r.Offset}
	if seal.Err != nil {
		// Logged by apply or Start, where it is known to be the latest.
		next.held = &held{err: seal.Err, raw: r.Value}
	}
	return next, true
}

func (t *Table[T]) addLocked(id string, next row[T]) {
	t.rows[id] = next
	if t.cfg.Group != nil {
		g := t.cfg.Group(next.v)
		t.groups[g] = append(t.groups[g], id)
	}
}

func (t *Table[T]) removeLocked(id string) {
	old, ok := t.rows[id]
	if !ok {
		return
	}
	delete(t.rows, id)
	if t.cfg.Group == nil {
		return
	}
	g := t.cfg.Group(old.v)
	ids := slices.DeleteFunc(t.groups[g], func(x string) bool { return x == id })
	if len(ids) == 0 {
		delete(t.groups, g)
	} else {
		t.groups[g] = ids
	}
}

// versionLocked returns the offset of the latest record of id, -1 if none.
func (t *Table[T]) versionLocked(id string) int64 {
	if v, ok := t.versions[id]; ok {
		return v
	}
	return -1
}

// waitApplied blocks until every record below offset has been applied.
func (t *Table[T]) waitApplied(ctx context.Context, offset int64) error {
	for {
		t.mu.RLock()
		applied, changed := t.applied, t.changed
		t.mu.RUnlock()
		if applied >= offset {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s config offset %d: %w", t.cfg.Name, offset, ctx.Err())
		case <-t.done:
			return fmt.Errorf("waiting for %s config offset %d: the table is stopped", t.cfg.Name, offset)
		case <-changed:
		}
	}
}

// Changed returns a channel that is closed at the next applied record, so
// callers can wait for a change without polling.
func (t *Table[T]) Changed() <-chan struct{} {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.changed
}

// Get returns the value of id.
func (t *Table[T]) Get(id string) (T, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.rows[id]
	return r.v, ok
}

// List returns every value, sorted by id.
func (t *Table[T]) List() []T {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ids := slices.SortedFunc(maps.Keys(t.rows), cmp.Compare)
	out := make([]T, len(ids))
	for i, id := range ids {
		out[i] = t.rows[id].v
	}
	return out
}

// Group yields the ids and values whose Config.Group is g (none without
// Config.Group). It holds the table's read lock while the loop runs: the
// loop body must not write to the table.
func (t *Table[T]) Group(g string) iter.Seq2[string, T] {
	return func(yield func(string, T) bool) {
		t.mu.RLock()
		defer t.mu.RUnlock()
		for _, id := range t.groups[g] {
			if !yield(id, t.rows[id].v) {
				return
			}
		}
	}
}

// HeldErr is Config.ErrHeld, with the reason, when the secrets of id do not
// open here; nil otherwise.
func (t *Table[T]) HeldErr(id string) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if h := t.rows[id].held; h != nil {
		return t.heldError(id, h)
	}
	return nil
}

func (t *Table[T]) heldError(id string, h *held) error {
	return fmt.Errorf("%s %s: %w: %v", t.cfg.Name, id, t.cfg.ErrHeld, h.err)
}

// Census counts the records by the key their secrets are sealed under and
// lists the held ones with the reason.
func (t *Table[T]) Census() secretbox.Census {
	c := secretbox.NewCensus()
	t.mu.RLock()
	defer t.mu.RUnlock()
	for id, r := range t.rows {
		if r.held != nil {
			c.Unreadable[id] = r.held.err.Error()
			continue
		}
		c.Count(r.keyID)
	}
	return c
}

// SealedKeyIDs counts the latest records by the key their secrets are
// sealed under, held ones included (Census leaves those out); plaintext
// records are not counted. It tells which keys the topic still needs.
func (t *Table[T]) SealedKeyIDs() map[string]int {
	out := map[string]int{}
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, r := range t.rows {
		if r.keyID != "" {
			out[r.keyID]++
		}
	}
	return out
}
