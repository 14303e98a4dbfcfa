package sealing

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/table"
	"github.com/laneway/laneway/internal/security/secretbox"
)

// StoreConfig configures a Store.
type StoreConfig struct {
	// Brokers to connect to. Required.
	Brokers []string
	// Topic is the compacted config topic (one partition). Default: the
	// store's own (laneway.endpoints, laneway.sources).
	Topic string
	// ClientOpts are extra franz-go options (metrics hooks, TLS, SASL).
	ClientOpts []kgo.Opt
	// Secrets seals the records' secrets on the topic (and opens them).
	// Default nil: secrets are written in plaintext, and sealed records'
	// secrets do not open (the record is held).
	Secrets *secretbox.Ring
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// Store is every instance's view of one kind of config record on its
// compacted topic: a table.Table whose codec seals the records' secrets
// with Secrets. Writes go to the topic and return once this instance has
// read them back, so a client that writes and then reads sees its write.
type Store[T any] struct {
	*table.Table[T]
	ring *secretbox.Ring
}

// NewStore connects to Kafka for a table of cfg's topic (defaultTopic when
// it names none), as tc otherwise says; Start loads and follows it.
func NewStore[T any](cfg StoreConfig, defaultTopic string, tc table.Config[T]) (*Store[T], error) {
	tc.Brokers, tc.Topic, tc.ClientOpts, tc.Logger = cfg.Brokers, cfg.Topic, cfg.ClientOpts, cfg.Logger
	tc.Topic = cmp.Or(tc.Topic, defaultTopic)
	t, err := table.New(tc)
	if err != nil {
		return nil, err
	}
	return &Store[T]{Table: t, ring: cfg.Secrets}, nil
}

// Rekey rewrites every record whose secrets are not sealed under the
// ring's newest key (plaintext ones included), through the table's
// Update, so a change made meanwhile by another writer is kept. Records
// whose secrets do not open are left as they are and listed in the census
// it returns, taken after the rewrite.
func (s *Store[T]) Rekey(ctx context.Context) (secretbox.Census, error) {
	return s.Table.Rekey(ctx, s.ring)
}
