package app

// The HTTP side: the API and what it serves (ingest, dead-letter search
// and redrive, inbound), and readiness; its listeners are in frontdoor.go.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/admin/console"
	"github.com/laneway/laneway/internal/inbound"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/ops/deadletter"
	"github.com/laneway/laneway/internal/ops/eventsearch"
)

// startIngest opens the producer of POST /v1/events and of redrives; it
// closes after the API and the redriver stop.
func (a *App) startIngest(context.Context) error {
	producer, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(a.brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.DefaultProduceTopic(a.cfg.Topics.Events),
	}, a.clientOpts("ingest")...)...)
	if err != nil {
		return err
	}
	a.producer = producer
	a.onStop(producer.Close)
	return nil
}

// startSearch prepares the API's searches of the dead-letter and events
// topics, which read time ranges with a client of their own.
func (a *App) startSearch(context.Context) error {
	reader, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.brokers...)}, a.clientOpts("dead-search")...)...)
	if err != nil {
		return err
	}
	a.onStop(reader.Close)
	a.dead = deadletter.NewFinder(reader, a.cfg.Topics.Dead)
	a.events = eventsearch.New(reader, a.cfg.Topics.Events)
	a.registerSearchMetrics()
	return nil
}

// startRedriver runs redrive jobs; it stops (saving its jobs' progress)
// before the producer and the search client close.
func (a *App) startRedriver(ctx context.Context) error {
	r, err := deadletter.NewRedriver(deadletter.Config{
		Finder: a.dead, Producer: a.producer, DeliveriesTopic: a.cfg.Topics.Deliveries, Endpoints: a.store,
		Redis: a.rdb, MarkerTTL: a.cfg.Topics.DeadRetention, Logger: a.log,
	})
	if err != nil {
		return err
	}
	a.redriver = r
	return a.run(ctx, r, stopWithin)
}

// startInbound runs the inbound front door (capture at POST /in/{source},
// the verify stage, replay); it stops after the listeners that serve it.
func (a *App) startInbound(ctx context.Context) error {
	in, err := inbound.New(inbound.Config{
		Brokers: a.brokers, Topics: a.cfg.Topics, Redis: a.rdb,
		Group: topics.GroupsFor(a.cfg.GroupPrefix).Inbound, InstanceID: a.cfg.InstanceID,
		SessionTimeout: a.cfg.SessionTimeout, TransactionV2: a.cfg.KafkaTransactionV2,
		ClientOpts: a.clientOpts, Secrets: a.secrets, Registerer: a.registry, Logger: a.log,
		RateLimits: a.cfg.InboundRateLimits, RefusedKeepRate: a.cfg.InboundRefusedKeepRate,
	})
	if err != nil {
		return err
	}
	if err := a.runLoading(ctx, in, "inbound"); err != nil {
		return err
	}
	a.inbound = in
	return nil
}

// registerSearchMetrics counts the records the searches read, which shows
// they read time ranges rather than whole topics.
func (a *App) registerSearchMetrics() {
	for _, s := range []struct {
		index            string
		scanned, fetched func() int64
	}{
		{"events", a.events.Scanned, a.events.Fetched},
		{"dead", a.dead.Scanned, a.dead.Fetched},
	} {
		labels := prometheus.Labels{"index": s.index}
		a.registry.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "laneway_search_records_examined_total",
				Help: "Records examined by API searches (inside the searched time range).", ConstLabels: labels},
				func() float64 { return float64(s.scanned()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "laneway_search_records_fetched_total",
				Help: "Records fetched from Kafka by API searches, examined or not.", ConstLabels: labels},
				func() float64 { return float64(s.fetched()) }),
		)
	}
}

// startAPI serves the admin API, the console, /metrics and, without a
// PublicAddr, the front door and the pull feeds on HTTPAddr.
func (a *App) startAPI(ctx context.Context) error {
	routes, metrics := a.metricsRoutes(append(append(console.Routes(), api.OpenAPIRoute()), a.inboundRoutes()...))
	srv, err := api.New(api.Config{
		Endpoints: a.store, Publisher: &publisher{client: a.producer, topic: a.cfg.Topics.Events},
		Redis: a.rdb, AdminTokens: a.adminTokens, Ready: a.ready, Logger: a.log,
		DeadLetters: a.dead, Redrives: a.redriver, SecretOverlap: a.cfg.SecretOverlap, Health: a.health, Events: a.events,
		Feeds: a.feeds, Routes: routes, Metrics: metrics, FeedAuthLimit: a.feedAuthLimit(),
	})
	if err != nil {
		return err
	}
	a.feedHandler = srv.FeedHandler()
	a.api = a.listener("api", a.cfg.HTTPAddr, srv.Handler())
	return a.run(ctx, a.api, stopWithin)
}

// feedAuthLimit is the configured limit; the feeds share the front door's
// listener and so its ingress, whose proxies it trusts unless told apart.
func (a *App) feedAuthLimit() api.FeedAuthLimit {
	l := a.cfg.FeedAuthLimit
	if l.TrustedProxies == nil {
		l.TrustedProxies = a.cfg.InboundRateLimits.TrustedProxies
	}
	return l
}

// metricsRoutes decides how /metrics is served: open (the handler comes
// back for api.Config.Metrics), or, when the front door shares a listener
// beyond loopback with it, as one more route behind the admin token. Its
// series name source ids (the door's capture paths) and endpoint ids, which
// an anonymous sender at the door must not learn.
func (a *App) metricsRoutes(routes []api.Route) ([]api.Route, http.Handler) {
	metrics := promhttp.HandlerFor(a.registry, promhttp.HandlerOpts{Registry: a.registry})
	if !a.doorSharesAPublicListener() {
		return routes, metrics
	}
	a.log.Info("GET /metrics needs the admin token: the inbound front door shares "+a.cfg.HTTPAddr+
		" with it; set --public-addr to give the door a listener of its own and keep /metrics open on this one",
		"addr", a.cfg.HTTPAddr)
	return append(routes, api.Route{Pattern: "GET /metrics", Handler: metrics}), nil
}

func (a *App) ready(ctx context.Context) error {
	if err := a.delivery.Ping(ctx); err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	return nil
}

// publisher produces events to the events topic, keyed by entity.
type publisher struct {
	client *kgo.Client
	topic  string
}

func (p *publisher) Publish(ctx context.Context, env event.Envelope) (int32, int64, error) {
	value, err := json.Marshal(&env)
	if err != nil {
		return 0, 0, err
	}
	rec := &kgo.Record{Topic: p.topic, Key: []byte(env.Entity), Value: value}
	if err := p.client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return 0, 0, err
	}
	return rec.Partition, rec.Offset, nil
}
