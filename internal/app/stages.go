package app

import (
	"context"
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/kafka/kafkatxn"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/ops/health"
	"github.com/laneway/laneway/internal/ops/notify"
)

// The two stages and what they lean on: breakers, the operator notifier,
// health snapshots, the sender, and the batch endpoints' runners (batch.go).

// leaveGroupsOnStop registers leaveGroups for App.Stop, first, so that it
// runs after every group client has closed.
func (a *App) leaveGroupsOnStop(context.Context) error {
	a.onStop(a.leaveGroups)
	return nil
}

// startHealthReader prepares reading the endpoints' health snapshots that
// their owners publish to Redis (for the API and for a new owner).
func (a *App) startHealthReader(context.Context) error {
	r, err := health.NewReader(health.Config{Redis: a.rdb, Logger: a.log})
	a.health = r
	return err
}

// startSender prepares the HTTP client of every delivery attempt; it
// closes after the stages and the batch runners stop.
func (a *App) startSender(context.Context) error {
	sender, err := deliver.NewSender(deliver.Config{
		Timeout: a.cfg.AttemptTimeout, AllowTargets: a.cfg.AllowTargets, Logger: a.log,
	})
	if err != nil {
		return err
	}
	a.sender = sender
	a.metrics = engine.NewMetrics(a.registry)
	a.onStop(sender.Close)
	return nil
}

// startFanout runs the fan-out stage: events to per-endpoint deliveries.
func (a *App) startFanout(ctx context.Context) error {
	groups := topics.GroupsFor(a.cfg.GroupPrefix)
	fanout, err := engine.NewFanout(engine.FanoutConfig{
		Brokers: a.brokers, Topics: a.cfg.Topics, InstanceID: a.cfg.InstanceID,
		Group: groups.Fanout, TransactionalID: groups.Fanout,
		Subscribers: a.store, Metrics: a.metrics, Logger: a.log, ClientOpts: a.groupOpts("fanout"),
		TransactionV2: a.cfg.KafkaTransactionV2, OnEvent: a.cfg.OnEvent,
		SafetyChecks: kafkatxn.NewChecks(a.registry, "fanout", a.log),
	})
	if err != nil {
		return err
	}
	a.fanout = fanout
	return a.run(ctx, fanout, stopWithin)
}

// startDelivery runs the delivery stage: the partition owners, their lanes
// and attempts. It stops first of the two stages.
func (a *App) startDelivery(ctx context.Context) error {
	groups := topics.GroupsFor(a.cfg.GroupPrefix)
	stage, err := engine.NewDeliveryStage(engine.DeliveryConfig{
		Brokers: a.brokers, Topics: a.cfg.Topics, Group: groups.Deliveries, ParkedGroup: groups.Parked,
		Endpoints: a.store, Sender: a.sender, Feed: a.feedOut, Ownership: a.batches, AttemptTimeout: a.cfg.AttemptTimeout,
		SessionTimeout: a.cfg.SessionTimeout,
		Breakers:       a.breakers, DisableAfter: a.cfg.DisableAfter, Notifier: a.notifier,
		InstanceID: a.cfg.InstanceID, LoadHealth: a.health.Load,
		Retry: a.cfg.Retry, CommitInterval: a.cfg.CommitInterval, ParkAfter: a.cfg.ParkAfter, LaneBuffer: a.cfg.LaneBuffer,
		LaneBytes: a.cfg.LaneBytes, InstanceBytes: a.cfg.InstanceBytes, MaxInFlight: a.cfg.MaxInFlight,
		Metrics: a.metrics, Logger: a.log, OnEvent: a.cfg.OnEvent,
		ClientOpts: a.groupOpts("deliveries"), ReaderClientOpts: a.clientOpts("parked"),
	})
	if err != nil {
		return err
	}
	a.registry.MustRegister(stage.Collector())
	a.delivery = stage
	return a.run(ctx, stage, stopWithin)
}

// startHealthPublisher shares this instance's endpoint health through Redis
// every second; it stops before the stage.
func (a *App) startHealthPublisher(ctx context.Context) error {
	p, err := health.NewPublisher(health.Config{Redis: a.rdb, Logger: a.log}, a.delivery)
	if err != nil {
		return err
	}
	return a.run(ctx, p, stopWithin)
}

// startBreakers keeps breaker state in memory for the endpoints this
// instance owns and flushes it to Redis every second for the next owner;
// its final flush, when it stops, is bounded by 5s.
func (a *App) startBreakers(ctx context.Context) error {
	store, err := breaker.NewStore(breaker.StoreConfig{Client: a.rdb})
	if err != nil {
		return err
	}
	cache, err := breaker.NewCache(breaker.CacheConfig{Store: store, Breaker: a.cfg.Breaker, Logger: a.log})
	if err != nil {
		return err
	}
	a.breakers = cache
	return a.run(ctx, cache, 5*time.Second)
}

// startNotifier runs the operator notifications; it stops after the
// delivery stage, which may still disable endpoints while it drains, and
// its drain is bounded by stopWithin.
func (a *App) startNotifier(ctx context.Context) error {
	secret, err := operatorWebhookSecret(a.cfg.OperatorWebhookSecret, a.cfg.OperatorWebhookSecretFile)
	if err != nil {
		return err
	}
	n, err := notify.New(notify.Config{
		URL: a.cfg.OperatorWebhookURL, Secret: secret, InstanceID: a.cfg.InstanceID, Logger: a.log,
	})
	if err != nil {
		return err
	}
	a.notifier = n
	return a.run(ctx, n, stopWithin)
}
