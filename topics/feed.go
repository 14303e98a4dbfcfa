package topics

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Feed is the topic of the pull endpoint id: one partition, so that its
// offsets are the feed's sequence numbers and a page is read from where
// its cursor points, whatever other endpoints carry.
func (c Config) Feed(endpointID string) string { return c.WithDefaults().FeedPrefix + endpointID }

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

// EnsureFeed creates the feed topic of a pull endpoint if it is missing.
func EnsureFeed(ctx context.Context, adm *kadm.Client, c Config, endpointID string) error {
	c = c.WithDefaults()
	configs := map[string]*string{}
	for k, v := range c.FeedConfigs() {
		configs[k] = &v
	}
	name := c.Feed(endpointID)
	resp, err := adm.CreateTopic(ctx, 1, c.ReplicationFactor, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create feed topic %s: %w", name, err)
	}
	return nil
}

// DeleteFeed deletes the feed topic of a deleted pull endpoint. A missing
// topic is not an error.
func DeleteFeed(ctx context.Context, adm *kadm.Client, c Config, endpointID string) error {
	name := c.Feed(endpointID)
	resp, err := adm.DeleteTopic(ctx, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("delete feed topic %s: %w", name, err)
	}
	return nil
}
