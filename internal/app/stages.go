package app

import (
	"context"
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/health"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/notify"
)

// The two stages and what they lean on: breakers, the operator notifier,
// health snapshots, and the batch endpoints' runners.

// startStages starts the fan-out and delivery stages.
func (a *App) startStages(ctx context.Context) error {
	a.onStop(a.leaveGroups) // runs after every group client has closed
	if err := a.startBreakers(); err != nil {
		return err
	}
	if err := a.startNotifier(ctx); err != nil {
		return err
	}
	healthReader, err := health.NewReader(health.Config{Redis: a.rdb, Logger: a.log})
	if err != nil {
		return err
	}
	a.health = healthReader
	metrics := engine.NewMetrics(a.registry)
	fanout, err := engine.NewFanout(engine.FanoutConfig{
		Brokers: a.brokers, Topics: a.cfg.Topics, InstanceID: a.cfg.InstanceID,
		Group: topics.GroupsFor(a.cfg.GroupPrefix).Fanout, TransactionalID: topics.GroupsFor(a.cfg.GroupPrefix).Fanout,
		Subscribers: a.store, Metrics: metrics, Logger: a.log, ClientOpts: a.groupOpts("fanout"),
		TransactionV2: a.cfg.KafkaTransactionV2,
	})
	if err != nil {
		return err
	}
	sender, err := deliver.NewSender(deliver.Config{
		Timeout: a.cfg.AttemptTimeout, AllowTargets: a.cfg.AllowTargets, Logger: a.log,
	})
	if err != nil {
		return err
	}
	a.onStop(sender.Close) // runs after the stages stop: stops run in reverse
	batches, err := a.startBatches(ctx, sender, metrics)
	if err != nil {
		return err
	}
	stage, err := engine.NewDeliveryStage(engine.DeliveryConfig{
		Brokers: a.brokers, Topics: a.cfg.Topics, Group: topics.GroupsFor(a.cfg.GroupPrefix).Deliveries,
		ParkedGroup: topics.GroupsFor(a.cfg.GroupPrefix).Parked,
		Endpoints:   a.store, Sender: sender, Feed: a.feedOut, Ownership: batches, AttemptTimeout: a.cfg.AttemptTimeout,
		Breakers: a.breakers, DisableAfter: a.cfg.DisableAfter, Notifier: a.notifier,
		InstanceID: a.cfg.InstanceID, LoadHealth: healthReader.Load,
		Retry: a.cfg.Retry, CommitInterval: a.cfg.CommitInterval, ParkAfter: a.cfg.ParkAfter, LaneBuffer: a.cfg.LaneBuffer,
		LaneBytes: a.cfg.LaneBytes, InstanceBytes: a.cfg.InstanceBytes, MaxInFlight: a.cfg.MaxInFlight,
		Metrics: metrics, Logger: a.log,
		ClientOpts: a.groupOpts("deliveries"), ReaderClientOpts: a.clientOpts("parked"),
	})
	if err != nil {
		a.stop(fanout, stopWithin) // not started: closes its session
		return err
	}
	a.registry.MustRegister(stage.Collector())
	a.fanout, a.delivery = fanout, stage
	if err := a.run(ctx, fanout, stopWithin); err != nil {
		return err
	}
	if err := a.run(ctx, stage, stopWithin); err != nil {
		return err
	}
	return a.startHealthPublisher(ctx, stage)
}

// startHealthPublisher shares this instance's endpoint health through Redis
// every second; it stops before the stage.
func (a *App) startHealthPublisher(ctx context.Context, source health.Source) error {
	p, err := health.NewPublisher(health.Config{Redis: a.rdb, Logger: a.log}, source)
	if err != nil {
		return err
	}
	return a.run(ctx, p, stopWithin)
}

// startBreakers keeps breaker state in memory for the endpoints this
// instance owns and flushes it to Redis every second for the next owner;
// its final flush, when it stops, is bounded by 5s.
func (a *App) startBreakers() error {
	store, err := breaker.NewStore(breaker.StoreConfig{Client: a.rdb})
	if err != nil {
		return err
	}
	cache, err := breaker.NewCache(breaker.CacheConfig{Store: store, Breaker: a.cfg.Breaker, Logger: a.log})
	if err != nil {
		return err
	}
	a.breakers = cache
	// Not App.Start's context: the cache flushes until its Start's context
	// ends (breaker.Cache.Start), and must run until App.Stop.
	return a.run(context.Background(), cache, 5*time.Second)
}

// startNotifier runs the operator notifications; it stops after the
// delivery stage, which may still disable endpoints while it drains, and
// its drain is bounded by stopWithin.
func (a *App) startNotifier(ctx context.Context) error {
	n, err := notify.New(notify.Config{
		URL: a.cfg.OperatorWebhookURL, Secret: a.cfg.OperatorWebhookSecret, InstanceID: a.cfg.InstanceID, Logger: a.log,
	})
	if err != nil {
		return err
	}
	a.notifier = n
	return a.run(ctx, n, stopWithin)
}
