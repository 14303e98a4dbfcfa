package endpoint

import (
	"errors"

	"github.com/laneway/laneway/internal/kafka/table"
	"github.com/laneway/laneway/internal/model/sealing"
	"github.com/laneway/laneway/internal/model/topics"
)

// StoreConfig configures a Store; Topic defaults to the default endpoints
// topic, topics.Config{}.WithDefaults().Endpoints ("laneway.endpoints").
type StoreConfig = sealing.StoreConfig

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
//
// The table's methods (Start, Stop, Get, List, Put, Delete, Changed,
// Census, Rekey) are the store's.
type Store struct {
	*sealing.Store[Endpoint]
}

// ErrSecretsUnavailable is returned by Put and Update for an endpoint whose
// stored secrets this instance cannot open.
var ErrSecretsUnavailable = errors.New("the endpoint's secrets cannot be decrypted with this instance's key file")

// ErrNotFound is returned for an unknown or deleted endpoint id.
var ErrNotFound = errors.New("endpoint not found")

// NewStore connects to Kafka; call Start to load and follow the topic.
func NewStore(cfg StoreConfig) (*Store, error) {
	s, err := sealing.NewStore(cfg, topics.Config{}.WithDefaults().Endpoints, table.Config[Endpoint]{
		Codec: newCodec(cfg.Secrets),
		Group: func(e Endpoint) string { return e.Tenant },
		Name:  "endpoint", HeldNote: "its deliveries are held (shown paused) until the key is back in the key file",
		ErrNotFound: ErrNotFound, ErrHeld: ErrSecretsUnavailable,
	})
	if err != nil {
		return nil, err
	}
	return &Store{s}, nil
}

// Subscribers appends to dst the ids of the active endpoints of tenant that
// subscribe to eventType, and returns it.
func (s *Store) Subscribers(dst []string, tenant, eventType string) []string {
	for id, e := range s.Group(tenant) {
		if e.Subscribes(tenant, eventType) {
			dst = append(dst, id)
		}
	}
	return dst
}
