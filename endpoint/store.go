package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/secretbox"
)

// StoreConfig configures a Store.
type StoreConfig struct {
	// Brokers to connect to. Required.
	Brokers []string
	// Topic is the compacted config topic (one partition). Default "laneway.endpoints".
	Topic string
	// ClientOpts are extra franz-go options (metrics hooks, TLS, SASL).
	ClientOpts []kgo.Opt
	// Secrets seals endpoint secrets on the topic (and opens them). Default
	// nil: secrets are written in plaintext, and sealed records' secrets do
	// not open (the endpoint is held, see Store).
	Secrets *secretbox.Ring
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Store is every instance's view of the endpoint config: it follows the
// compacted topic from the beginning and keeps the latest value per id in
// memory. Writes go to the topic and return once this instance has read them
// back, so a client that writes and then reads sees its write.
//
// Put and Delete are blind writes: the last one wins. Update (and Disable,
// built on it) changes the latest value of an endpoint instead of one read
// earlier; see Update for how far that goes on a topic without
// compare-and-set.
//
// Secrets are sealed with cfg.Secrets under its newest key when written,
// and opened when read; records written in plaintext (before sealing) are
// read as they are. An endpoint whose secrets do not open (its key is not
// in the ring) is held: Get shows it paused and without secrets, so that
// its deliveries wait in Kafka rather than go out unsigned or be signed
// with anything else, and Put and Update refuse to write it
// (ErrSecretsUnavailable) so its sealed secrets are never overwritten.
// Delete still works.
type Store struct {
	cfg    StoreConfig
	client *kgo.Client

	mu       sync.RWMutex
	byID     map[string]Endpoint
	byTenant map[string][]string // tenant -> endpoint ids
	versions map[string]int64    // id -> offset of its latest record, tombstones included
	keyIDs   map[string]string   // id -> key id its secrets are sealed under, "" for plaintext
	held     map[string]heldRecord
	watch    *watch        // the id an Update is writing, if any
	applied  int64         // offset of the next record to apply
	changed  chan struct{} // closed and replaced whenever applied advances

	// updateMu serialises Update in this process, so that two Updates here
	// never race each other (only writers elsewhere, or Put and Delete).
	updateMu sync.Mutex
	// beforeWrite, if set, runs before each write of Update (test hook).
	beforeWrite func()

	cancel context.CancelFunc
	done   chan struct{}
}

// watch collects, for the id an Update is writing, what each record applied
// to that id replaced, so that Update can tell whether its own record
// replaced the version it was computed from.
type watch struct {
	id   string
	seen []replaced
}

// replaced is what the record at offset replaced: the value (ok false for
// none: deleted or never written) and the offset of the record that wrote it
// (-1 for none); held is set when that value's secrets did not open.
type replaced struct {
	offset  int64
	prev    Endpoint
	ok      bool
	version int64
	held    *heldRecord
}

// heldRecord is an endpoint whose secrets do not open: why, and its record
// value as read, so that it can be written back untouched.
type heldRecord struct {
	err error
	raw []byte
}

// ErrSecretsUnavailable is returned by Put and Update for an endpoint whose
// stored secrets this instance cannot open.
var ErrSecretsUnavailable = errors.New("the endpoint's secrets cannot be decrypted with this instance's key file")

// ErrNotFound is returned for an unknown or deleted endpoint id.
var ErrNotFound = errors.New("endpoint not found")

// maxUpdateWrites bounds the writes of one Update: each one after the first
// answers another writer's change to the same endpoint within a round trip.
const maxUpdateWrites = 10

// NewStore connects to Kafka; call Start to load and follow the topic.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Topic == "" {
		cfg.Topic = "laneway.endpoints"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	}, cfg.ClientOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("endpoint store client: %w", err)
	}
	return &Store{
		cfg: cfg, client: cl,
		byID: map[string]Endpoint{}, byTenant: map[string][]string{}, versions: map[string]int64{},
		keyIDs: map[string]string{}, held: map[string]heldRecord{},
		changed: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// Start reads the topic up to its current end, so the view is complete when
// Start returns, then keeps following it in the background until Stop.
func (s *Store) Start(ctx context.Context) error {
	end, err := s.endOffset(ctx)
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.follow(runCtx)
	return s.waitApplied(ctx, end)
}

// Stop ends the follower and closes the client.
func (s *Store) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	s.client.Close()
}

func (s *Store) endOffset(ctx context.Context) (int64, error) {
	ends, err := kadm.NewClient(s.client).ListEndOffsets(ctx, s.cfg.Topic)
	if err != nil {
		return 0, fmt.Errorf("list end offsets of %s: %w", s.cfg.Topic, err)
	}
	o, ok := ends.Lookup(s.cfg.Topic, 0)
	if !ok || o.Err != nil {
		return 0, fmt.Errorf("end offset of %s: %v", s.cfg.Topic, o.Err)
	}
	return o.Offset, nil
}

func (s *Store) follow(ctx context.Context) {
	defer close(s.done)
	for {
		fetches := s.client.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			s.cfg.Logger.Warn("endpoint config fetch failed", "topic", t, "partition", p, "err", err)
		})
		fetches.EachRecord(s.apply)
	}
}

func (s *Store) apply(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := string(r.Key)
	if w := s.watch; w != nil && w.id == id {
		prev, ok := s.byID[id]
		rep := replaced{offset: r.Offset, prev: prev, ok: ok, version: s.versionLocked(id)}
		if h, held := s.held[id]; held {
			rep.held = &h
		}
		w.seen = append(w.seen, rep)
	}
	s.versions[id] = r.Offset
	s.removeLocked(id)
	if r.Value != nil {
		s.addLocked(id, r)
	}
	s.applied = r.Offset + 1
	close(s.changed)
	s.changed = make(chan struct{})
}

// addLocked applies the value of record r of endpoint id.
func (s *Store) addLocked(id string, r *kgo.Record) {
	d, err := decodeRecord(id, r.Value, s.cfg.Secrets)
	if err != nil {
		s.cfg.Logger.Error("skipping unreadable endpoint config record", "offset", r.Offset, "key", id, "err", err)
		return
	}
	e := d.e
	if d.secretErr != nil {
		// Held: paused here so that its deliveries wait, never sent unsigned.
		s.cfg.Logger.Error("endpoint secrets cannot be decrypted: its deliveries are held (shown paused) until the key is back in the key file",
			"endpoint_id", id, "key_id", d.keyID, "offset", r.Offset, "err", d.secretErr)
		s.held[id] = heldRecord{err: d.secretErr, raw: r.Value}
		e.Paused = true
	}
	s.keyIDs[id] = d.keyID
	s.byID[id] = e
	s.byTenant[e.Tenant] = append(s.byTenant[e.Tenant], id)
}

func (s *Store) removeLocked(id string) {
	old, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	delete(s.keyIDs, id)
	delete(s.held, id)
	ids := slices.DeleteFunc(s.byTenant[old.Tenant], func(x string) bool { return x == id })
	if len(ids) == 0 {
		delete(s.byTenant, old.Tenant)
	} else {
		s.byTenant[old.Tenant] = ids
	}
}

// versionLocked returns the offset of the latest record of id, -1 if none.
func (s *Store) versionLocked(id string) int64 {
	if v, ok := s.versions[id]; ok {
		return v
	}
	return -1
}

// waitApplied blocks until every record below offset has been applied.
func (s *Store) waitApplied(ctx context.Context, offset int64) error {
	for {
		s.mu.RLock()
		applied, changed := s.applied, s.changed
		s.mu.RUnlock()
		if applied >= offset {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for endpoint config offset %d: %w", offset, ctx.Err())
		case <-changed:
		}
	}
}

// Changed returns a channel that is closed at the next applied config change,
// so callers can wait for a change without polling.
func (s *Store) Changed() <-chan struct{} {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.changed
}

// Get returns the endpoint with this id.
func (s *Store) Get(id string) (Endpoint, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.byID[id]
	return e, ok
}

// List returns every endpoint, sorted by id.
func (s *Store) List() []Endpoint {
	s.mu.RLock()
	out := make([]Endpoint, 0, len(s.byID))
	for _, e := range s.byID {
		out = append(out, e)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Subscribers appends to dst the ids of the active endpoints of tenant that
// subscribe to eventType, and returns it.
func (s *Store) Subscribers(dst []string, tenant, eventType string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, id := range s.byTenant[tenant] {
		e := s.byID[id]
		if e.Subscribes(tenant, eventType) {
			dst = append(dst, id)
		}
	}
	return dst
}

// Put writes e to the config topic and waits until this store has applied it.
// It replaces whatever the topic holds for e.ID, including changes made
// since e was read; to change one field of the latest value, use Update.
func (s *Store) Put(ctx context.Context, e Endpoint) error {
	if e.ID == "" {
		return errors.New("endpoint id is required")
	}
	if err := s.heldErr(e.ID); err != nil {
		return err
	}
	value, err := encodeRecord(e, s.cfg.Secrets)
	if err != nil {
		return err
	}
	return s.write(ctx, e.ID, value)
}

// heldErr is ErrSecretsUnavailable, with the reason, when the secrets of
// endpoint id do not open here.
func (s *Store) heldErr(id string) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if h, ok := s.held[id]; ok {
		return fmt.Errorf("endpoint %s: %w: %v", id, ErrSecretsUnavailable, h.err)
	}
	return nil
}

// Delete writes a tombstone for id and waits until it is applied.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, ok := s.Get(id); !ok {
		return ErrNotFound
	}
	return s.write(ctx, id, nil)
}

func (s *Store) write(ctx context.Context, id string, value []byte) error {
	_, err := s.writeAt(ctx, id, value)
	return err
}

// writeAt writes value (nil: a tombstone) for id, waits until this store
// has applied it and returns its offset.
func (s *Store) writeAt(ctx context.Context, id string, value []byte) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rec := &kgo.Record{Topic: s.cfg.Topic, Key: []byte(id), Value: value}
	if err := s.client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return 0, fmt.Errorf("write endpoint %s: %w", id, err)
	}
	return rec.Offset, s.waitApplied(ctx, rec.Offset+1)
}
