package feed

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/kafka/offsets"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/timing"
)

// PositionsConfig configures Positions.
type PositionsConfig struct {
	// Admin commits and fetches the acknowledged offsets. Required.
	Admin *kadm.Client
	// Group holds the acknowledged offsets (topics.Groups.Feed). Required.
	Group string
	// Reader reads the event at an acknowledged position, for its age.
	// Required.
	Reader *Reader
	// Topics names the feed topics. Default: topics.Config{} defaults.
	Topics topics.Config
	// Batch makes these the positions of batch endpoints' topics
	// (topics.Config.BatchFeed) rather than pull endpoints' feeds.
	Batch bool
	// Now is the clock for ages. Default: time.Now.
	Now func() time.Time
}

// Positions keeps each feed's acknowledged position and reports how far
// its consumer is behind.
type Positions struct {
	cfg   PositionsConfig
	locks sync.Map // topic -> *sync.Mutex: one ack at a time per feed here
}

// NewPositions returns Positions.
func NewPositions(cfg PositionsConfig) (*Positions, error) {
	if cfg.Admin == nil || cfg.Group == "" || cfg.Reader == nil {
		return nil, errors.New("feed positions: Admin, Group and Reader are required")
	}
	cfg.Now = timing.Clock(cfg.Now)
	return &Positions{cfg: cfg}, nil
}

func (p *Positions) topic(endpointID string) string {
	if p.cfg.Batch {
		return p.cfg.Topics.BatchFeed(endpointID)
	}
	return p.cfg.Topics.Feed(endpointID)
}

// Position is where a feed's consumer stands.
type Position struct {
	// Acked is the acknowledged offset: every event below it is handled.
	// Without an acknowledgement it is Start.
	Acked    int64
	HasAcked bool
	// Start is the oldest retained offset, End the next to be written.
	Start, End int64
	// OldestUnacked is when the oldest unacknowledged event was appended;
	// zero when the consumer is caught up.
	OldestUnacked time.Time
}

// Lag is the number of events not yet acknowledged.
func (p Position) Lag() int64 { return max(0, p.End-max(p.Acked, p.Start)) }

// OldestUnackedAge is how long the oldest unacknowledged event has waited.
func (p Position) OldestUnackedAge(now time.Time) time.Duration {
	if p.OldestUnacked.IsZero() {
		return 0
	}
	return max(0, now.Sub(p.OldestUnacked))
}

// Ack stores offset as the endpoint's acknowledged position, unless it is
// behind the stored one (acknowledging is monotonic) and returns the
// position stored. An offset past the feed's end is an *AheadError.
func (p *Positions) Ack(ctx context.Context, endpointID string, offset int64) (int64, error) {
	topic := p.topic(endpointID)
	mu, _ := p.locks.LoadOrStore(topic, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	pos, err := p.Position(ctx, endpointID)
	if err != nil {
		return 0, err
	}
	if offset > pos.End {
		return 0, &AheadError{End: pos.End}
	}
	if pos.HasAcked && offset <= pos.Acked {
		return pos.Acked, nil
	}
	if err := offsets.Commit(ctx, p.cfg.Admin, p.cfg.Group, topic, 0, offset); err != nil {
		return 0, fmt.Errorf("acknowledge feed %s: %w", topic, err)
	}
	return offset, nil
}

// Position reads the feed's acknowledged offset, bounds and the age of
// its oldest unacknowledged event.
func (p *Positions) Position(ctx context.Context, endpointID string) (Position, error) {
	topic := p.topic(endpointID)
	var pos Position
	s, e, ok, err := offsets.Bounds(ctx, p.cfg.Admin, topic, 0)
	if err != nil {
		return pos, fmt.Errorf("feed %s bounds: %w", topic, err)
	}
	if !ok || errors.Is(s.Err, kerr.UnknownTopicOrPartition) {
		return pos, nil // not created yet: an empty feed
	}
	if s.Err != nil || e.Err != nil {
		return pos, fmt.Errorf("feed %s bounds: %w", topic, errors.Join(s.Err, e.Err))
	}
	pos.Start, pos.End, pos.Acked = s.Offset, e.Offset, s.Offset
	fetched, err := p.cfg.Admin.FetchOffsetsForTopics(ctx, p.cfg.Group, topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		err = nil // nothing acknowledged yet, on any feed
	}
	if err != nil {
		return pos, fmt.Errorf("feed %s acknowledged position: %w", topic, err)
	}
	if o, ok := fetched.Lookup(topic, 0); ok && o.Err == nil && o.At >= 0 {
		pos.Acked, pos.HasAcked = o.At, true
	}
	return pos, p.oldestUnacked(ctx, topic, &pos)
}

// oldestUnacked reads the first event at or after the acknowledged
// position, whose append time is how long the consumer is behind.
func (p *Positions) oldestUnacked(ctx context.Context, topic string, pos *Position) error {
	from := max(pos.Acked, pos.Start)
	if from >= pos.End {
		return nil
	}
	res, err := p.cfg.Reader.reader(topic).Read(ctx, 0, from, 1)
	if errors.Is(err, kread.ErrOffsetOutOfRange) {
		return nil // retention moved on since the bounds were read
	}
	if err != nil {
		return fmt.Errorf("feed %s oldest unacknowledged event: %w", topic, err)
	}
	if len(res.Records) > 0 {
		pos.OldestUnacked = res.Records[0].Timestamp
	}
	return nil
}

// Forget drops the acknowledged position of a deleted feed.
func (p *Positions) Forget(ctx context.Context, endpointID string) error {
	topic := p.topic(endpointID)
	p.cfg.Reader.forget(topic)
	p.locks.Delete(topic)
	offs := kadm.Offsets{}
	offs.AddOffset(topic, 0, 0, -1)
	_, err := p.cfg.Admin.DeleteOffsets(ctx, p.cfg.Group, offs.TopicsSet())
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("forget feed %s position: %w", topic, err)
	}
	return nil
}
