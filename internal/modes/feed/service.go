package feed

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/topics"
)

// ServiceConfig configures a Service.
type ServiceConfig struct {
	// Client reads the feeds and administers their topics and positions.
	// It should be the service's own (see ReaderConfig.Client). Required.
	Client *kgo.Client
	// Topics names the feed topics and sizes them. Default: topics.Config{}
	// defaults.
	Topics topics.Config
	// Group holds the acknowledged positions (topics.Groups.Feed).
	// Required.
	Group string
	// Redis makes acknowledgements only move forward across instances
	// (PositionsConfig.Redis). Required.
	Redis redis.UniversalClient
	// BatchGroup holds batch endpoints' cursors (topics.Groups.Batch), read
	// for their positions. Default: none, batch positions are not read.
	BatchGroup string
	// PollInterval is the watcher's; default DefaultPollInterval.
	PollInterval time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for ages. Default time.Now.
	Now func() time.Time
}

// Service is what the API needs of feeds: their topics' lifecycle, pages,
// acknowledgements and positions. Start it before use; Stop drains it.
type Service struct {
	adm       *kadm.Client
	topics    topics.Config
	watcher   *Watcher
	reader    *Reader
	positions *Positions
	batch     *Positions // nil without a BatchGroup
}

// NewService returns a Service.
func NewService(cfg ServiceConfig) (*Service, error) {
	if cfg.Client == nil || cfg.Group == "" || cfg.Redis == nil {
		return nil, errors.New("feed service: Client, Group and Redis are required")
	}
	adm := kadm.NewClient(cfg.Client)
	w := NewWatcher(WatcherConfig{Admin: adm, PollInterval: cfg.PollInterval, Logger: cfg.Logger})
	r, err := NewReader(ReaderConfig{Client: cfg.Client, Watcher: w, Topics: cfg.Topics})
	if err != nil {
		return nil, err
	}
	p, err := NewPositions(PositionsConfig{Admin: adm, Group: cfg.Group, Reader: r, Topics: cfg.Topics, Redis: cfg.Redis, Now: cfg.Now})
	if err != nil {
		return nil, err
	}
	svc := &Service{adm: adm, topics: cfg.Topics, watcher: w, reader: r, positions: p}
	if cfg.BatchGroup != "" {
		if svc.batch, err = NewPositions(PositionsConfig{Admin: adm, Group: cfg.BatchGroup, Reader: r, Topics: cfg.Topics, Redis: cfg.Redis, Now: cfg.Now, Batch: true}); err != nil {
			return nil, err
		}
	}
	return svc, nil
}

// Watcher is the service's long-poll watcher, which batch runners wait on
// too.
func (s *Service) Watcher() *Watcher { return s.watcher }

// BatchPosition reports how far a batch endpoint's feed has been sent:
// Acked is its cursor (every event below it delivered or dead-lettered).
func (s *Service) BatchPosition(ctx context.Context, endpointID string) (Position, error) {
	if s.batch == nil {
		return Position{}, errors.New("feed service: no BatchGroup configured")
	}
	return s.batch.Position(ctx, endpointID)
}

// Start runs the long-poll watcher until Stop (see Watcher.Start). It
// cannot fail.
func (s *Service) Start(ctx context.Context) error { return s.watcher.Start(ctx) }

// Stop ends the watcher and waits for it (see Watcher.Stop); long polls in
// progress end with their requests. It returns nil.
func (s *Service) Stop(ctx context.Context) error { return s.watcher.Stop(ctx) }

// Appended wakes the long polls on this instance that an append made here
// satisfies (WriterConfig.Appended).
func (s *Service) Appended(topic string, end int64) { s.watcher.Appended(topic, end) }

// Create makes the topic of a new pull endpoint's feed, or of a new batch
// endpoint's backlog.
func (s *Service) Create(ctx context.Context, e endpoint.Endpoint) error {
	if e.Batched() {
		return topics.EnsureFeed(ctx, s.adm, s.topics, s.topics.BatchFeed(e.ID))
	}
	return topics.EnsureFeed(ctx, s.adm, s.topics, s.topics.Feed(e.ID))
}

// Delete removes a deleted pull endpoint's feed and its position. (A batch
// endpoint's topic is its runner's to drain, then delete.)
func (s *Service) Delete(ctx context.Context, endpointID string) error {
	return errors.Join(topics.DeleteFeed(ctx, s.adm, s.topics.Feed(endpointID)), s.positions.Forget(ctx, endpointID))
}

// Read returns a page of the feed (Reader.Read).
func (s *Service) Read(ctx context.Context, endpointID string, from int64, limit int, wait time.Duration) (Page, error) {
	return s.reader.Read(ctx, endpointID, from, limit, wait)
}

// Ack stores an acknowledged position (Positions.Ack).
func (s *Service) Ack(ctx context.Context, endpointID string, offset int64) (int64, error) {
	return s.positions.Ack(ctx, endpointID, offset)
}

// Position reports where the feed's consumer stands (Positions.Position).
func (s *Service) Position(ctx context.Context, endpointID string) (Position, error) {
	return s.positions.Position(ctx, endpointID)
}
