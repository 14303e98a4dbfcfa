// Package topics names Laneway's Kafka topics and creates them with the
// partition counts and retention each one needs.
package topics

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Defaults for Config fields left at their zero value, and for the group
// prefix (GroupsFor). Existing deployments' topic and group names derive
// from DefaultPrefix: do not change it.
const (
	// DefaultPrefix starts every topic ("laneway.events") and consumer
	// group ("laneway-fanout") name.
	DefaultPrefix              = "laneway"
	DefaultPartitions          = 8
	DefaultReplicationFactor   = -1 // the broker's default
	DefaultEventsRetention     = 30 * 24 * time.Hour
	DefaultDeliveriesRetention = 7 * 24 * time.Hour
	DefaultDeadRetention       = 30 * 24 * time.Hour
	DefaultInboundRetention    = 30 * 24 * time.Hour
	DefaultFeedRetention       = 7 * 24 * time.Hour
)

// Config names the topics and sizes them. Zero values take the defaults.
type Config struct {
	// Events is the topic producers publish to. Default "laneway.events".
	Events string
	// Deliveries holds one record per (event, endpoint). Default "laneway.deliveries".
	Deliveries string
	// Parked holds the backlog of lanes that cannot keep up. Default "laneway.parked".
	Parked string
	// Dead holds dead letters. Default "laneway.dead".
	Dead string
	// Endpoints is the compacted endpoint config topic. Default "laneway.endpoints".
	Endpoints string
	// Inbound holds requests captured by the inbound front door, raw.
	// Default "laneway.inbound".
	Inbound string
	// Sources is the compacted inbound source config topic. Default "laneway.sources".
	Sources string
	// FeedPrefix starts the name of each pull endpoint's feed topic,
	// FeedPrefix + endpoint id. Default "laneway.feed.".
	FeedPrefix string
	// BatchPrefix starts the name of each batch endpoint's topic, its
	// backlog in sequence order: BatchPrefix + endpoint id. Default
	// "laneway.batch.".
	BatchPrefix string

	// Partitions of events, deliveries and parked (parked must match
	// deliveries: partition p of both belongs to one instance). Default
	// DefaultPartitions (8).
	Partitions int32
	// ReplicationFactor of every topic; -1 takes the broker default.
	// Default DefaultReplicationFactor (-1).
	ReplicationFactor int16
	// EventsRetention is how long events stay replayable and searchable
	// (reconciliation API). Default DefaultEventsRetention (30 days).
	EventsRetention time.Duration
	// DeliveriesRetention bounds how long an undelivered backlog may wait in
	// deliveries and parked; it must exceed the 72 h delivery age limit.
	// Default DefaultDeliveriesRetention (7 days).
	DeliveriesRetention time.Duration
	// DeadRetention is how long dead letters stay redrivable. Default
	// DefaultDeadRetention (30 days).
	DeadRetention time.Duration
	// InboundRetention is how long captured inbound requests stay
	// replayable (and kept for forensics when rejected). Default
	// DefaultInboundRetention (30 days).
	InboundRetention time.Duration
	// FeedRetention is how long a pull endpoint's feed keeps an event for
	// its consumer. Default DefaultFeedRetention (7 days).
	FeedRetention time.Duration
}

// WithPrefix names every topic not yet named "<prefix>.<role>", so several
// independent Laneways can share one cluster.
func (c Config) WithPrefix(prefix string) Config {
	setString(&c.Events, prefix+".events")
	setString(&c.Deliveries, prefix+".deliveries")
	setString(&c.Parked, prefix+".parked")
	setString(&c.Dead, prefix+".dead")
	setString(&c.Endpoints, prefix+".endpoints")
	setString(&c.Inbound, prefix+".inbound")
	setString(&c.Sources, prefix+".sources")
	setString(&c.FeedPrefix, prefix+".feed.")
	setString(&c.BatchPrefix, prefix+".batch.")
	return c
}

// WithDefaults returns c with every zero field set to its default: names
// under DefaultPrefix, and the Default* sizes and retentions.
func (c Config) WithDefaults() Config {
	c = c.WithPrefix(DefaultPrefix)
	c.Partitions = valutil.PositiveOr(c.Partitions, DefaultPartitions)
	c.ReplicationFactor = cmp.Or(c.ReplicationFactor, DefaultReplicationFactor)
	c.EventsRetention = valutil.PositiveOr(c.EventsRetention, DefaultEventsRetention)
	c.DeliveriesRetention = valutil.PositiveOr(c.DeliveriesRetention, DefaultDeliveriesRetention)
	c.DeadRetention = valutil.PositiveOr(c.DeadRetention, DefaultDeadRetention)
	c.InboundRetention = valutil.PositiveOr(c.InboundRetention, DefaultInboundRetention)
	c.FeedRetention = valutil.PositiveOr(c.FeedRetention, DefaultFeedRetention)
	return c
}

func with(configs map[string]*string, key, value string) map[string]*string {
	configs[key] = &value
	return configs
}

func setString(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

type spec struct {
	name       string
	partitions int32
	configs    map[string]*string
}

func (c Config) specs() []spec {
	retention := func(d time.Duration) map[string]*string {
		ms := strconv.FormatInt(d.Milliseconds(), 10)
		return map[string]*string{"retention.ms": &ms}
	}
	// The broker stamps the records of the topics only Laneway writes and
	// whose values carry their own times (created_at, dead_at): under
	// CreateTime, Kafka 4 refuses a record stamped more than an hour ahead
	// of its clock (INVALID_TIMESTAMP, log.message.timestamp.after.max.ms),
	// so a host whose clock runs fast could neither park nor dead-letter.
	brokerTime := func(configs map[string]*string) map[string]*string {
		return with(configs, "message.timestamp.type", "LogAppendTime")
	}
	return []spec{
		{c.Events, c.Partitions, retention(c.EventsRetention)},
		{c.Deliveries, c.Partitions, brokerTime(retention(c.DeliveriesRetention))},
		{c.Parked, c.Partitions, brokerTime(retention(c.DeliveriesRetention))},
		{c.Dead, c.Partitions, brokerTime(retention(c.DeadRetention))},
		// Captured requests are kept whole: room for the 1 MiB default body
		// limit plus headers, above Kafka's ~1 MB default.
		{c.Inbound, c.Partitions, with(retention(c.InboundRetention), "max.message.bytes", "2097152")},
		// One partition keeps every config change in one total order.
		{c.Endpoints, 1, compacted()},
		{c.Sources, 1, compacted()},
	}
}

// CompactedConfigs are the configs of the compacted config topics. They
// hold secrets (sealed): a value replaced by a rotation, or deleted, must
// be gone within hours, not Kafka's "at least 7 days" (segment.ms) plus
// 24 h (delete.retention.ms). Segments roll at the first write an hour
// after they began, a closed segment with anything superseded in it is
// compacted at once (dirty ratio 0.01) and at the latest 6 h after the
// write (max.compaction.lag.ms), and a tombstone is kept an hour for
// readers that were behind.
var CompactedConfigs = map[string]string{
	"cleanup.policy":            "compact",
	"segment.ms":                "3600000",
	"min.cleanable.dirty.ratio": "0.01",
	"max.compaction.lag.ms":     "21600000",
	"delete.retention.ms":       "3600000",
}

func compacted() map[string]*string { return pointers(CompactedConfigs) }

// pointers is configs as kadm.CreateTopic takes them.
func pointers(configs map[string]string) map[string]*string {
	out := make(map[string]*string, len(configs))
	for k, v := range configs {
		out[k] = &v
	}
	return out
}

// Ensure creates every missing topic. Existing topics are left as they are,
// but a deliveries/parked partition mismatch is an error because parking
// relies on partition p of both belonging to the same owner.
func Ensure(ctx context.Context, adm *kadm.Client, c Config) error {
	c = c.WithDefaults()
	for _, s := range c.specs() {
		if err := create(ctx, adm, c, s); err != nil {
			return err
		}
	}
	return checkParkedMatchesDeliveries(ctx, adm, c)
}

// create creates the topic s unless it exists.
func create(ctx context.Context, adm *kadm.Client, c Config, s spec) error {
	resp, err := adm.CreateTopic(ctx, s.partitions, c.ReplicationFactor, s.configs, s.name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create topic %s: %w", s.name, err)
	}
	return nil
}

// checkParkedMatchesDeliveries also waits until freshly created topics show
// up in metadata with their partitions, so callers can produce right away.
// Not for leaders: clients wait for a leader themselves, and an instance
// starting while a broker recovers should not wait for it here.
func checkParkedMatchesDeliveries(ctx context.Context, adm *kadm.Client, c Config) error {
	details, err := awaitTopics(ctx, adm, false, c.Deliveries, c.Parked, c.Events, c.Dead, c.Endpoints, c.Inbound, c.Sources)
	if err != nil {
		return err
	}
	d, p := len(details[c.Deliveries].Partitions), len(details[c.Parked].Partitions)
	if d != p {
		return fmt.Errorf("topic %s has %d partitions but %s has %d: they must match", c.Deliveries, d, c.Parked, p)
	}
	return nil
}

// awaitTopics waits until metadata shows every named topic with its
// partitions and, with led, each partition with a leader (so that a
// consumer reading a feed just created is answered, not refused).
func awaitTopics(ctx context.Context, adm *kadm.Client, led bool, names ...string) (kadm.TopicDetails, error) {
	for {
		details, err := adm.ListTopics(ctx, names...)
		if err == nil && allThere(details, names, led) {
			return details, nil
		}
		if !timing.Sleep(ctx, 50*time.Millisecond) {
			return nil, fmt.Errorf("waiting for topics %v to appear: %w (last error: %v)", names, ctx.Err(), err)
		}
	}
}

func allThere(details kadm.TopicDetails, names []string, led bool) bool {
	for _, name := range names {
		d, ok := details[name]
		if !ok || d.Err != nil || len(d.Partitions) == 0 {
			return false
		}
		for _, p := range d.Partitions {
			if led && p.Leader < 0 {
				return false
			}
		}
	}
	return true
}

// Feed is the topic of the pull endpoint id: one partition, so that its
// offsets are the feed's sequence numbers and a page is read from where
// its cursor points, whatever other endpoints carry.
func (c Config) Feed(endpointID string) string { return c.WithDefaults().FeedPrefix + endpointID }

// BatchFeed is the topic of the batch endpoint id, laid out as a feed: its
// backlog, which the endpoint's runner sends in batches. Its own prefix
// lets a runner find the topic of an endpoint deleted while it was away,
// and drain it into dead letters.
func (c Config) BatchFeed(endpointID string) string {
	return c.WithDefaults().BatchPrefix + endpointID
}

// FeedConfigs are the configs of a feed topic. A feed is never compacted:
// a replay after a crash may append an old state again after newer ones,
// and compaction by entity would then keep the old state as the entity's
// last record, which a consumer far behind would read as new (the
// partition simulator's rule 7). Retention alone bounds it.
func (c Config) FeedConfigs() map[string]string {
	c = c.WithDefaults()
	return map[string]string{
		"cleanup.policy": "delete",
		"retention.ms":   strconv.FormatInt(c.FeedRetention.Milliseconds(), 10),
		"segment.ms":     "3600000",
	}
}

// EnsureFeed creates a feed topic (Feed or BatchFeed) if it is missing.
func EnsureFeed(ctx context.Context, adm *kadm.Client, c Config, name string) error {
	c = c.WithDefaults()
	if err := create(ctx, adm, c, spec{name, 1, pointers(c.FeedConfigs())}); err != nil {
		return err
	}
	_, err := awaitTopics(ctx, adm, true, name)
	return err
}

// DeleteFeed deletes a feed topic of a deleted endpoint. A missing topic
// is not an error.
func DeleteFeed(ctx context.Context, adm *kadm.Client, name string) error {
	resp, err := adm.DeleteTopic(ctx, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("delete feed topic %s: %w", name, err)
	}
	return nil
}
