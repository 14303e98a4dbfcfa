package inbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/secretbox"
)

// ErrSourceNotFound is returned for an unknown source id.
var ErrSourceNotFound = errors.New("source not found")

// SourceStore is every instance's view of the source config: it follows the
// compacted sources topic from the beginning and keeps the latest value per
// id in memory (the same pattern as endpoint.Store). Writes go to the topic
// and return once this instance has read them back, so a client that writes
// and then reads sees its write.
//
// Secrets are sealed under the ring's newest key when written and opened
// when read; plaintext records (written before sealing) are read as they
// are. A source whose secrets do not open here is held: its requests are
// still captured but rejected secrets_unavailable (replayable once the key
// is back), and Put refuses to overwrite it (ErrSecretsUnavailable).
type SourceStore struct {
	topic  string
	logger *slog.Logger
	client *kgo.Client
	ring   *secretbox.Ring // nil: plaintext

	mu      sync.RWMutex
	byID    map[string]Source
	keyIDs  map[string]string // id -> key id its secrets are sealed under, "" for plaintext
	applied int64             // offset of the next record to apply
	changed chan struct{}     // closed and replaced whenever applied advances

	cancel context.CancelFunc
	done   chan struct{}
}

// SourceStoreConfig configures a SourceStore opened on its own (the
// Service opens its own from Config).
type SourceStoreConfig struct {
	// Brokers to connect to. Required.
	Brokers []string
	// Topic is the compacted sources topic. Default "laneway.sources".
	Topic string
	// Secrets seals and opens source secrets. Default nil: plaintext.
	Secrets *secretbox.Ring
	// ClientOpts are extra franz-go options (metrics hooks, TLS, SASL).
	ClientOpts []kgo.Opt
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// NewSourceStore connects to Kafka; Start loads and follows the topic.
func NewSourceStore(cfg SourceStoreConfig) (*SourceStore, error) {
	if cfg.Topic == "" {
		cfg.Topic = "laneway.sources"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return newSourceStore(cfg.Brokers, cfg.Topic, cfg.Secrets, cfg.Logger, cfg.ClientOpts)
}

// newSourceStore connects to Kafka; Start loads and follows the topic.
func newSourceStore(brokers []string, topic string, ring *secretbox.Ring, logger *slog.Logger, extra []kgo.Opt) (*SourceStore, error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	}, extra...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("inbound source store client: %w", err)
	}
	return &SourceStore{
		topic: topic, logger: logger, client: cl, ring: ring,
		byID: map[string]Source{}, keyIDs: map[string]string{}, changed: make(chan struct{}), done: make(chan struct{}),
	}, nil
}

// Start reads the topic up to its current end, so the view is complete when
// Start returns, then keeps following it in the background until Stop.
func (s *SourceStore) Start(ctx context.Context) error {
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
func (s *SourceStore) Stop() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	s.client.Close()
}

func (s *SourceStore) endOffset(ctx context.Context) (int64, error) {
	ends, err := kadm.NewClient(s.client).ListEndOffsets(ctx, s.topic)
	if err != nil {
		return 0, fmt.Errorf("list end offsets of %s: %w", s.topic, err)
	}
	o, ok := ends.Lookup(s.topic, 0)
	if !ok || o.Err != nil {
		return 0, fmt.Errorf("end offset of %s: %v", s.topic, o.Err)
	}
	return o.Offset, nil
}

func (s *SourceStore) follow(ctx context.Context) {
	defer close(s.done)
	for {
		fetches := s.client.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fetches.EachError(func(t string, p int32, err error) {
			s.logger.Warn("inbound source config fetch failed", "topic", t, "partition", p, "err", err)
		})
		fetches.EachRecord(s.apply)
	}
}

func (s *SourceStore) apply(r *kgo.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := string(r.Key)
	delete(s.byID, id)
	delete(s.keyIDs, id)
	if r.Value != nil {
		s.addLocked(id, r)
	}
	s.applied = r.Offset + 1
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *SourceStore) addLocked(id string, r *kgo.Record) {
	src, keyID, err := decodeSource(id, r.Value, s.ring)
	if err != nil {
		s.logger.Error("skipping unreadable inbound source record", "offset", r.Offset, "key", id, "err", err)
		return
	}
	if src.heldErr != nil {
		s.logger.Error("inbound source secrets cannot be decrypted: its requests are captured but rejected secrets_unavailable until the key is back in the key file",
			"source", id, "key_id", keyID, "offset", r.Offset, "err", src.heldErr)
	}
	s.byID[id], s.keyIDs[id] = src, keyID
}

func (s *SourceStore) waitApplied(ctx context.Context, offset int64) error {
	for {
		s.mu.RLock()
		applied, changed := s.applied, s.changed
		s.mu.RUnlock()
		if applied >= offset {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for source config offset %d: %w", offset, ctx.Err())
		case <-changed:
		}
	}
}

// Get returns the source with this id.
func (s *SourceStore) Get(id string) (Source, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	src, ok := s.byID[id]
	return src, ok
}

// List returns every source, sorted by id.
func (s *SourceStore) List() []Source {
	s.mu.RLock()
	out := make([]Source, 0, len(s.byID))
	for _, src := range s.byID {
		out = append(out, src)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Put validates src, writes it to the config topic and waits until this
// store has applied it.
func (s *SourceStore) Put(ctx context.Context, src Source) error {
	if cur, ok := s.Get(src.ID); ok && cur.heldErr != nil {
		return fmt.Errorf("source %s: %w: %v", src.ID, ErrSecretsUnavailable, cur.heldErr)
	}
	if err := src.Validate(); err != nil {
		return err
	}
	src.heldErr = nil
	value, err := encodeSource(src, s.ring)
	if err != nil {
		return err
	}
	return s.write(ctx, src.ID, value)
}

// Delete writes a tombstone for id and waits until it is applied.
func (s *SourceStore) Delete(ctx context.Context, id string) error {
	if _, ok := s.Get(id); !ok {
		return ErrSourceNotFound
	}
	return s.write(ctx, id, nil)
}

func (s *SourceStore) write(ctx context.Context, id string, value []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rec := &kgo.Record{Topic: s.topic, Key: []byte(id), Value: value}
	if err := s.client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("write source %s: %w", id, err)
	}
	return s.waitApplied(ctx, rec.Offset+1)
}

// Census counts the sources by the key their secrets are sealed under and
// lists those whose secrets do not open here.
func (s *SourceStore) Census() secretbox.Census {
	c := secretbox.NewCensus()
	s.mu.RLock()
	defer s.mu.RUnlock()
	for id, src := range s.byID {
		if src.heldErr != nil {
			c.Unreadable[id] = src.heldErr.Error()
			continue
		}
		c.Count(s.keyIDs[id])
	}
	return c
}

// Rekey rewrites every readable source whose secrets are not sealed under
// the ring's newest key (plaintext ones included) and returns the census
// taken after. Like Put, each rewrite is a blind write of the value this
// store holds: a change made on another instance in the same moment can
// be overwritten, so rekey when nobody is editing sources.
func (s *SourceStore) Rekey(ctx context.Context) (secretbox.Census, error) {
	if s.ring == nil {
		return secretbox.Census{}, secretbox.ErrNoRing
	}
	rewritten := 0
	for _, src := range s.List() {
		s.mu.RLock()
		keyID := s.keyIDs[src.ID]
		s.mu.RUnlock()
		if src.heldErr != nil || keyID == s.ring.WriteKeyID() {
			continue
		}
		// Not Put: a source stored before a validation rule existed is
		// still resealed as it is.
		value, err := encodeSource(src, s.ring)
		if err == nil {
			err = s.write(ctx, src.ID, value)
		}
		if err != nil {
			return secretbox.Census{}, err
		}
		rewritten++
	}
	c := s.Census()
	c.Rewritten = rewritten
	return c, nil
}
