package inbound

import (
	"context"
	"errors"

	"github.com/laneway/laneway/internal/kafka/table"
	"github.com/laneway/laneway/internal/model/sealing"
	"github.com/laneway/laneway/internal/model/topics"
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
//
// The table's methods (Start, Stop, Get, List, Delete, Census, Rekey) are
// the store's; Put validates.
type SourceStore struct {
	*sealing.Store[Source]
}

// SourceStoreConfig configures a SourceStore opened on its own (the
// Service opens its own from Config); Topic defaults to
// topics.Config{}.WithDefaults().Sources ("laneway.sources").
type SourceStoreConfig = sealing.StoreConfig

// NewSourceStore connects to Kafka; Start loads and follows the topic.
func NewSourceStore(cfg SourceStoreConfig) (*SourceStore, error) {
	s, err := sealing.NewStore(cfg, topics.Config{}.WithDefaults().Sources, table.Config[Source]{
		Codec: newSourceCodec(cfg.Secrets),
		Name:  "source", HeldNote: "its requests are captured but rejected secrets_unavailable until the key is back in the key file",
		ErrNotFound: ErrSourceNotFound, ErrHeld: ErrSecretsUnavailable,
	})
	if err != nil {
		return nil, err
	}
	return &SourceStore{s}, nil
}

// Put validates src, writes it to the config topic and waits until this
// store has applied it. A held source is refused before validation: what
// is wrong with it is that its secrets do not open, whatever else is.
func (s *SourceStore) Put(ctx context.Context, src Source) error {
	if err := s.HeldErr(src.ID); err != nil {
		return err
	}
	if err := src.Validate(); err != nil {
		return err
	}
	src.heldErr = nil
	return s.Table.Put(ctx, src)
}
