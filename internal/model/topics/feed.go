package topics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

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
	configs := map[string]*string{}
	for k, v := range c.FeedConfigs() {
		configs[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, 1, c.ReplicationFactor, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create feed topic %s: %w", name, err)
	}
	return waitLed(ctx, adm, name)
}

// waitLed waits until the topic's partition has a leader in metadata, so
// that a consumer reading the new feed at once is answered, not refused.
func waitLed(ctx context.Context, adm *kadm.Client, name string) error {
	for {
		details, err := adm.ListTopics(ctx, name)
		if d, ok := details[name]; err == nil && ok && d.Err == nil && len(d.Partitions) > 0 && d.Partitions[0].Leader >= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for feed topic %s to have a leader: %w (last error: %v)", name, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
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
