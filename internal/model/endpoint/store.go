package endpoint

import (
	"context"
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/secretbox"
	"github.com/laneway/laneway/internal/table"
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

// Store is every instance's view of the endpoint config: a table.Table of
// endpoints on the compacted topic, indexed by tenant. Writes go to the
// topic and return once this instance has read them back, so a client that
// writes and then reads sees its write.
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
	cfg StoreConfig
	t   *table.Table[Endpoint]
}

// ErrSecretsUnavailable is returned by Put and Update for an endpoint whose
// stored secrets this instance cannot open.
var ErrSecretsUnavailable = errors.New("the endpoint's secrets cannot be decrypted with this instance's key file")

// ErrNotFound is returned for an unknown or deleted endpoint id.
var ErrNotFound = errors.New("endpoint not found")

// NewStore connects to Kafka; call Start to load and follow the topic.
func NewStore(cfg StoreConfig) (*Store, error) {
	if cfg.Topic == "" {
		cfg.Topic = "laneway.endpoints"
	}
	t, err := table.New(table.Config[Endpoint]{
		Brokers: cfg.Brokers, Topic: cfg.Topic, ClientOpts: cfg.ClientOpts, Logger: cfg.Logger,
		Codec: newCodec(cfg.Secrets),
		Group: func(e Endpoint) string { return e.Tenant },
		Name:  "endpoint", HeldNote: "its deliveries are held (shown paused) until the key is back in the key file",
		ErrNotFound: ErrNotFound, ErrHeld: ErrSecretsUnavailable,
	})
	if err != nil {
		return nil, err
	}
	return &Store{cfg: cfg, t: t}, nil
}

// Start reads the topic up to its current end, so the view is complete when
// Start returns, then keeps following it in the background until Stop.
func (s *Store) Start(ctx context.Context) error { return s.t.Start(ctx) }

// Stop ends the follower, waits for it and closes the client; ctx is not
// used. It may be called more than once, and without Start. It returns nil.
func (s *Store) Stop(context.Context) error {
	s.t.Stop()
	return nil
}

// Changed returns a channel that is closed at the next applied config change,
// so callers can wait for a change without polling.
func (s *Store) Changed() <-chan struct{} { return s.t.Changed() }

// Get returns the endpoint with this id.
func (s *Store) Get(id string) (Endpoint, bool) { return s.t.Get(id) }

// List returns every endpoint, sorted by id.
func (s *Store) List() []Endpoint { return s.t.List() }

// Subscribers appends to dst the ids of the active endpoints of tenant that
// subscribe to eventType, and returns it.
func (s *Store) Subscribers(dst []string, tenant, eventType string) []string {
	for id, e := range s.t.Group(tenant) {
		if e.Subscribes(tenant, eventType) {
			dst = append(dst, id)
		}
	}
	return dst
}

// Put writes e to the config topic and waits until this store has applied it.
// It replaces whatever the topic holds for e.ID, including changes made
// since e was read; to change one field of the latest value, use Update.
func (s *Store) Put(ctx context.Context, e Endpoint) error { return s.t.Put(ctx, e) }

// Delete writes a tombstone for id and waits until it is applied.
func (s *Store) Delete(ctx context.Context, id string) error { return s.t.Delete(ctx, id) }
