package inbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrSourceNotFound is returned for an unknown source id.
var ErrSourceNotFound = errors.New("source not found")

// SourceStore is every instance's view of the source config: it follows the
// compacted sources topic from the beginning and keeps the latest value per
// id in memory (the same pattern as endpoint.Store). Writes go to the topic
// and return once this instance has read them back, so a client that writes
// and then reads sees its write.
type SourceStore struct {
	topic  string
	logger *slog.Logger
	client *kgo.Client

	mu      sync.RWMutex
	byID    map[string]Source
	applied int64         // offset of the next record to apply
	changed chan struct{} // closed and replaced whenever applied advances

	cancel context.CancelFunc
	done   chan struct{}
}

// newSourceStore connects to Kafka; Start loads and follows the topic.
func newSourceStore(brokers []string, topic string, logger *slog.Logger, extra []kgo.Opt) (*SourceStore, error) {
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
		topic: topic, logger: logger, client: cl,
		byID: map[string]Source{}, changed: make(chan struct{}), done: make(chan struct{}),
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
	if r.Value != nil {
		var src Source
		if err := json.Unmarshal(r.Value, &src); err != nil || src.ID != id {
			s.logger.Error("skipping unreadable inbound source record", "offset", r.Offset, "key", id, "err", err)
		} else {
			s.byID[id] = src
		}
	}
	s.applied = r.Offset + 1
	close(s.changed)
	s.changed = make(chan struct{})
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
	if err := src.Validate(); err != nil {
		return err
	}
	value, err := json.Marshal(src)
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
