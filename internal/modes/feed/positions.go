package feed

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/kafka/offsets"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Defaults of PositionsConfig.
const (
	DefaultAckKeyPrefix = "laneway:feed:acked:"
	DefaultAckKeyTTL    = 7 * 24 * time.Hour
)

// forward stores ARGV[1] at KEYS[1] unless the key holds as much or more,
// and returns what the key holds then: compare and set in one step, so that
// acks through several instances at once only move a position forward.
var forward = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]))
local off = tonumber(ARGV[1])
if cur and cur >= off then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return off
`)

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
	// Redis keeps the furthest position acknowledged through any instance,
	// which makes "only forward" one atomic step across instances (Kafka's
	// offset commit cannot compare). Kafka stays the durable copy: a Redis
	// flush loses nothing. Required.
	Redis redis.UniversalClient
	// AckKeyPrefix starts the Redis key of each feed's furthest position
	// (then the group and the topic). Default DefaultAckKeyPrefix.
	AckKeyPrefix string
	// AckKeyTTL is how long that key outlives the feed's last ack; Kafka
	// holds the position after it. Default DefaultAckKeyTTL (7 days).
	AckKeyTTL time.Duration
	// Now is the clock for ages. Default: time.Now.
	Now func() time.Time
}

// Positions keeps each feed's acknowledged position and reports how far
// its consumer is behind.
type Positions struct {
	cfg PositionsConfig
	// locks hold one ack at a time per feed in this process, which spares
	// Kafka commits racing each other from here; across instances the
	// Redis script decides.
	locks sync.Map // topic -> *sync.Mutex
}

// NewPositions returns Positions.
func NewPositions(cfg PositionsConfig) (*Positions, error) {
	if cfg.Admin == nil || cfg.Group == "" || cfg.Reader == nil || cfg.Redis == nil {
		return nil, errors.New("feed positions: Admin, Group, Reader and Redis are required")
	}
	if cfg.AckKeyPrefix == "" {
		cfg.AckKeyPrefix = DefaultAckKeyPrefix
	}
	cfg.AckKeyTTL = valutil.PositiveOr(cfg.AckKeyTTL, DefaultAckKeyTTL)
	cfg.Now = timing.Clock(cfg.Now)
	return &Positions{cfg: cfg}, nil
}

// key is the Redis key of topic's furthest acknowledged position.
func (p *Positions) key(topic string) string {
	return p.cfg.AckKeyPrefix + p.cfg.Group + ":" + topic
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
// behind the stored one (acknowledging is monotonic, across instances too)
// and returns the position stored. An offset past the feed's end is an
// *AheadError. Without Redis it fails rather than risk going backwards.
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
	stored, err := p.forward(ctx, topic, offset)
	if err != nil || stored > offset {
		return stored, err // another instance acknowledged further: it commits that
	}
	return p.commit(ctx, topic, offset)
}

// forward moves the feed's furthest position in Redis to offset unless it
// is there already, and returns the furthest position.
func (p *Positions) forward(ctx context.Context, topic string, offset int64) (int64, error) {
	stored, err := forward.Run(ctx, p.cfg.Redis, []string{p.key(topic)}, offset, p.cfg.AckKeyTTL.Milliseconds()).Int64()
	if err != nil {
		return 0, fmt.Errorf("acknowledge feed %s: %w", topic, err)
	}
	return stored, nil
}

// commit stores offset in Kafka, then again the furthest position while
// Redis holds a further one: a commit from another instance may have
// landed before this one, and Kafka must end on the furthest. Reads take
// the larger of both, so the moment between shows no step back.
func (p *Positions) commit(ctx context.Context, topic string, offset int64) (int64, error) {
	for {
		if err := offsets.Commit(ctx, p.cfg.Admin, p.cfg.Group, topic, 0, offset); err != nil {
			return 0, fmt.Errorf("acknowledge feed %s: %w", topic, err)
		}
		furthest, _, err := p.furthest(ctx, topic)
		if err != nil || furthest <= offset {
			return offset, err
		}
		offset = furthest
	}
}

// furthest reads the furthest position Redis holds for topic; ok is false
// when it holds none (never acknowledged, expired or flushed).
func (p *Positions) furthest(ctx context.Context, topic string) (offset int64, ok bool, err error) {
	raw, err := p.cfg.Redis.Get(ctx, p.key(topic)).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("feed %s acknowledged position: %w", topic, err)
	}
	offset, err = strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("feed %s acknowledged position %q: %w", topic, raw, err)
	}
	return offset, true, nil
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
	p.withFurthest(ctx, topic, &pos)
	return pos, p.oldestUnacked(ctx, topic, &pos)
}

// withFurthest raises pos.Acked to the furthest position in Redis, which
// is ahead of Kafka's while an ack through another instance commits.
// Without Redis a read shows Kafka's position (behind by those commits
// at most): Redis holds no truth, and reads do not depend on it.
func (p *Positions) withFurthest(ctx context.Context, topic string, pos *Position) {
	furthest, ok, err := p.furthest(ctx, topic)
	if err != nil || !ok {
		return
	}
	if !pos.HasAcked || furthest > pos.Acked {
		pos.Acked, pos.HasAcked = furthest, true
	}
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
	if err := p.cfg.Redis.Del(ctx, p.key(topic)).Err(); err != nil {
		return fmt.Errorf("forget feed %s position: %w", topic, err)
	}
	offs := kadm.Offsets{}
	offs.AddOffset(topic, 0, 0, -1)
	_, err := p.cfg.Admin.DeleteOffsets(ctx, p.cfg.Group, offs.TopicsSet())
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return fmt.Errorf("forget feed %s position: %w", topic, err)
	}
	return nil
}
