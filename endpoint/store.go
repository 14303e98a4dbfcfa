package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// StoreConfig configures a Store.
type StoreConfig struct {
	// Brokers to connect to. Required.
	Brokers []string
	// Topic is the compacted config topic (one partition). Default "laneway.endpoints".
	Topic string
	// ClientOpts are extra franz-go options (metrics hooks, TLS, SASL).
	ClientOpts []kgo.Opt
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Store is every instance's view of the endpoint config: it follows the
// compacted topic from the beginning and keeps the latest value per id in
// memory. Writes go to the topic and return once this instance has read them
// back, so a client that writes and then reads sees its write.
type Store struct {
	cfg    StoreConfig
	client *kgo.Client

	mu       sync.RWMutex
	byID     map[string]Endpoint
	byTenant map[string][]string // tenant -> endpoint ids
	applied  int64               // offset of the next record to apply
	changed  chan struct{}       // closed and replaced whenever applied advances

	cancel context.CancelFunc
	done   chan struct{}
}

// ErrNotFound is returned for an unknown endpoint id.
var ErrNotFound = errors.New("endpoint not found")

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
		byID: map[string]Endpoint{}, byTenant: map[string][]string{},
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
	s.removeLocked(id)
	if r.Value != nil {
		var e Endpoint
		if err := json.Unmarshal(r.Value, &e); err != nil || e.ID != id {
			s.cfg.Logger.Error("skipping unreadable endpoint config record", "offset", r.Offset, "key", id, "err", err)
		} else {
			s.byID[id] = e
			s.byTenant[e.Tenant] = append(s.byTenant[e.Tenant], id)
		}
	}
	s.applied = r.Offset + 1
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Store) removeLocked(id string) {
	old, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	ids := slices.DeleteFunc(s.byTenant[old.Tenant], func(x string) bool { return x == id })
	if len(ids) == 0 {
		delete(s.byTenant, old.Tenant)
	} else {
		s.byTenant[old.Tenant] = ids
	}
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
func (s *Store) Put(ctx context.Context, e Endpoint) error {
	if e.ID == "" {
		return errors.New("endpoint id is required")
	}
	value, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return s.write(ctx, e.ID, value)
}

// Delete writes a tombstone for id and waits until it is applied.
func (s *Store) Delete(ctx context.Context, id string) error {
	if _, ok := s.Get(id); !ok {
		return ErrNotFound
	}
	return s.write(ctx, id, nil)
}

func (s *Store) write(ctx context.Context, id string, value []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rec := &kgo.Record{Topic: s.cfg.Topic, Key: []byte(id), Value: value}
	if err := s.client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("write endpoint %s: %w", id, err)
	}
	return s.waitApplied(ctx, rec.Offset+1)
}
