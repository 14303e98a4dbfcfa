package inbound

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/secretbox"
	"github.com/laneway/laneway/internal/table"
)

// ErrSourceNotFound is returned for an unknown source id.
var ErrSourceNotFound = errors.New("source not found")

// SourceStore is every instance's view of the source config: a table.Table
// of sources on the compacted sources topic (as endpoint.Store is of
// endpoints). Writes go to the topic and return once this instance has
// read them back, so a client that writes and then reads sees its write.
//
// Secrets are sealed under the ring's newest key when written and opened
// when read; plaintext records (written before sealing) are read as they
// are. A source whose secrets do not open here is held: its requests are
// still captured but rejected secrets_unavailable (replayable once the key
// is back), and Put refuses to overwrite it (ErrSecretsUnavailable).
type SourceStore struct {
	ring *secretbox.Ring // nil: plaintext
	t    *table.Table[Source]
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
	return newSourceStore(cfg.Brokers, cfg.Topic, cfg.Secrets, cfg.Logger, cfg.ClientOpts)
}

// newSourceStore connects to Kafka; Start loads and follows the topic. A
// nil logger is slog.Default().
func newSourceStore(brokers []string, topic string, ring *secretbox.Ring, logger *slog.Logger, extra []kgo.Opt) (*SourceStore, error) {
	t, err := table.New(table.Config[Source]{
		Brokers: brokers, Topic: topic, ClientOpts: extra, Logger: logger,
		Codec: newSourceCodec(ring),
		Name:  "source", HeldNote: "its requests are captured but rejected secrets_unavailable until the key is back in the key file",
		ErrNotFound: ErrSourceNotFound, ErrHeld: ErrSecretsUnavailable,
	})
	if err != nil {
		return nil, err
	}
	return &SourceStore{ring: ring, t: t}, nil
}

// Start reads the topic up to its current end, so the view is complete when
// Start returns, then keeps following it in the background until Stop.
func (s *SourceStore) Start(ctx context.Context) error { return s.t.Start(ctx) }

// Stop ends the follower, waits for it and closes the client; ctx is not
// used. It may be called more than once, and without Start. It returns nil.
func (s *SourceStore) Stop(context.Context) error {
	s.t.Stop()
	return nil
}

// Get returns the source with this id.
func (s *SourceStore) Get(id string) (Source, bool) { return s.t.Get(id) }

// List returns every source, sorted by id.
func (s *SourceStore) List() []Source { return s.t.List() }

// Put validates src, writes it to the config topic and waits until this
// store has applied it. A held source is refused before validation: what
// is wrong with it is that its secrets do not open, whatever else is.
func (s *SourceStore) Put(ctx context.Context, src Source) error {
	if err := s.t.HeldErr(src.ID); err != nil {
		return err
	}
	if err := src.Validate(); err != nil {
		return err
	}
	src.heldErr = nil
	return s.t.Put(ctx, src)
}

// Delete writes a tombstone for id and waits until it is applied.
func (s *SourceStore) Delete(ctx context.Context, id string) error { return s.t.Delete(ctx, id) }

// Census counts the sources by the key their secrets are sealed under and
// lists those whose secrets do not open here.
func (s *SourceStore) Census() secretbox.Census { return s.t.Census() }

// Rekey rewrites every readable source whose secrets are not sealed under
// the ring's newest key (plaintext ones included) and returns the census
// taken after. It rewrites through the table's Update, so a change made
// meanwhile by another writer is kept; a source stored before a validation
// rule existed is still resealed as it is (Update does not validate).
func (s *SourceStore) Rekey(ctx context.Context) (secretbox.Census, error) {
	return s.t.Rekey(ctx, s.ring)
}
