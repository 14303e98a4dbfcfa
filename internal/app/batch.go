package app

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/modes/batch"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// startBatches runs the batch endpoints' runners of the partitions the
// delivery stage owns. It stops after the stage, whose release of each
// partition stops that partition's runners first.
func (a *App) startBatches(ctx context.Context) error {
	m, err := batch.New(batch.Config{
		Client: a.feedProducer, Topics: a.cfg.Topics, Group: topics.GroupsFor(a.cfg.GroupPrefix).Batch,
		Endpoints: a.store, Sender: a.sender, Breakers: a.breakers, Watcher: a.feeds.Watcher(),
		DeadLetters: deadLetterWriter{client: a.feedProducer, topic: a.cfg.Topics.Dead},
		Retry:       a.cfg.Retry, DisableAfter: a.cfg.DisableAfter, Notifier: a.notifier, OnDead: a.metrics.CountDeadLetters,
		Registerer: a.registry, Logger: a.log,
	})
	if err != nil {
		return err
	}
	a.batches = m
	return a.run(ctx, m, stopWithin)
}

// deadLetterWriter produces dead letters keyed by endpoint, as the
// delivery stage does.
type deadLetterWriter struct {
	client *kgo.Client
	topic  string
}

func (w deadLetterWriter) Write(ctx context.Context, letters []event.DeadLetter) error {
	recs := make([]*kgo.Record, len(letters))
	for i := range letters {
		value, err := json.Marshal(&letters[i])
		if err != nil {
			return err
		}
		recs[i] = &kgo.Record{Topic: w.topic, Key: []byte(letters[i].EndpointID), Value: value}
	}
	return w.client.ProduceSync(ctx, recs...).FirstErr()
}

// checkRetention refuses topics that would drop a backlog before its
// deliveries die of old age: an undelivered record must still be in Kafka
// when max_age dead-letters it, or it would be lost without a letter.
func checkRetention(cfg Config) error {
	maxAge := cfg.Retry.MaxAge
	maxAge = valutil.PositiveOr(maxAge, deliver.DefaultMaxAge)
	for _, r := range []struct {
		flag string
		d    time.Duration
	}{{"--deliveries-retention", cfg.Topics.DeliveriesRetention}, {"--feed-retention", cfg.Topics.FeedRetention}} {
		if r.d <= maxAge {
			return fmt.Errorf("%s %s must exceed --max-age %s: a backlog older than its retention would be lost without a dead letter", r.flag, r.d, maxAge)
		}
	}
	return nil
}
