// Package app wires Laneway's components into one running service: the
// embedded Kafka and Redis when none are configured, the topics, the endpoint
// store, the fan-out and delivery stages and the HTTP API, started in order
// and stopped in reverse.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/embedded"
	"github.com/laneway/laneway/internal/inbound"
	"github.com/laneway/laneway/internal/kafka/kafkaconn"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/modes/batch"
	"github.com/laneway/laneway/internal/modes/feed"
	"github.com/laneway/laneway/internal/ops/deadletter"
	"github.com/laneway/laneway/internal/ops/eventsearch"
	"github.com/laneway/laneway/internal/ops/health"
	"github.com/laneway/laneway/internal/ops/notify"
	"github.com/laneway/laneway/internal/plumbing/connlimit"
	"github.com/laneway/laneway/internal/plumbing/redisconn"
	"github.com/laneway/laneway/internal/security/secretbox"
)

// Defaults of the Config and ServerLimits fields that no other package
// declares; `laneway serve`'s flags show these same constants.
const (
	// DefaultHTTPAddr is where the API, console and metrics listen.
	DefaultHTTPAddr = "127.0.0.1:8080"
	// DefaultSessionTimeout is Kafka's (and franz-go's) consumer group
	// session timeout, which a zero SessionTimeout leaves to the client.
	DefaultSessionTimeout = 45 * time.Second
	// DefaultReadHeaderTimeout is ServerLimits.ReadHeaderTimeout's default.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout is ServerLimits.ReadTimeout's default.
	DefaultReadTimeout = 30 * time.Second
	// DefaultIdleTimeout is ServerLimits.IdleTimeout's default.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxHeaderBytes is ServerLimits.MaxHeaderBytes's default.
	DefaultMaxHeaderBytes = 64 << 10
)

// Config is everything `laneway serve` can be told. Zero values take the
// defaults documented on each field.
type Config struct {
	// KafkaBrokers to use; empty starts the embedded Kafka.
	KafkaBrokers []string
	// EmbeddedKafkaAddr is where the embedded Kafka listens. Default
	// embedded.DefaultKafkaAddr ("127.0.0.1:9092"). It has no
	// authentication, so an address beyond loopback is refused unless
	// EmbeddedKafkaAllowRemote is set.
	EmbeddedKafkaAddr string
	// EmbeddedKafkaAllowRemote lets the embedded Kafka listen beyond
	// loopback, where anyone who reaches it can read and write every topic,
	// endpoint secrets included. Default false.
	EmbeddedKafkaAllowRemote bool
	// DataDir persists the embedded Kafka; empty keeps it in memory.
	DataDir string
	// RedisURL to use; empty starts an in-process Redis.
	RedisURL string
	// Kafka secures every Kafka client Laneway opens (TLS, mutual TLS,
	// SASL). Default: plaintext, unauthenticated. Refused with the
	// embedded Kafka, which has neither.
	Kafka kafkaconn.Config
	// Redis adds TLS files and ACL credentials to RedisURL. Default: the
	// URL alone. Refused with the in-process Redis.
	Redis redisconn.Config
	// HTTPAddr is the API listen address. Default DefaultHTTPAddr
	// ("127.0.0.1:8080").
	HTTPAddr string
	// PublicAddr, when set, serves the inbound front door (POST
	// /in/{source}) and the pull feeds (/v1/feed/{id}) and nothing else,
	// and HTTPAddr no longer serves the door: expose this one, keep the
	// API, console and /metrics private. Default "": the front door is on
	// HTTPAddr.
	PublicAddr string
	// HTTPLimits bound each connection on both listeners (timeouts, header
	// size). Defaults as in ServerLimits.
	HTTPLimits ServerLimits
	// Conns caps the open connections of each listener, in all and per
	// client address (InboundRateLimits.TrustedProxies are spared the
	// latter). Defaults as in connlimit.Limits: an eighth of the
	// file-descriptor limit per listener, 64 per address.
	Conns connlimit.Limits
	// InboundRateLimits bound requests to the front door per client address
	// and per source. Defaults as in inbound.RateLimits.
	InboundRateLimits inbound.RateLimits
	// FeedAuthLimit bounds failed authentications at the pull feeds'
	// routes per client address (429 beyond). Defaults as in
	// api.FeedAuthLimit; TrustedProxies, when unset, are
	// InboundRateLimits.TrustedProxies (the same ingress).
	FeedAuthLimit api.FeedAuthLimit
	// InboundRefusedKeepRate is how many refused front-door requests per
	// second are kept as metadata. Default inbound.DefaultRefusedKeepRate (5).
	InboundRefusedKeepRate float64
	// AdminToken, when set, is required as a Bearer token on /v1: one
	// token, or two separated by a comma during a rotation, each at least
	// 32 bytes, not an example from the docs and not guessable
	// (api.ParseAdminTokens).
	// Without one the API refuses to listen on anything but loopback.
	// Default "".
	AdminToken string
	// AdminTokenFile is a file holding the admin token(s) instead, one per
	// line; read at start. Default "": none. Not both.
	AdminTokenFile string
	// Topics names and sizes the topics. Defaults as in topics.Config.
	Topics topics.Config
	// Secrets seals endpoint and source secrets on Kafka. Default: see
	// SecretsConfig (a key of its own for the embedded Kafka; a real
	// cluster refuses to start without one).
	Secrets SecretsConfig
	// InstanceID names this instance; it must be stable across restarts
	// and unique among instances. It is the transactional ids' suffix (a
	// restart fences the old transactions) and the consumer groups' static
	// member id (a restarted instance takes its old place without a
	// rebalance). Default: the hostname.
	InstanceID string
	// GroupPrefix prefixes the consumer group and transactional ids, so
	// several independent Laneways can share one cluster. Default
	// topics.DefaultPrefix ("laneway").
	GroupPrefix string
	// AllowTargets are CIDRs outbound delivery may reach despite the SSRF guard.
	AllowTargets []netip.Prefix
	// AttemptTimeout bounds one whole HTTP attempt. Default
	// deliver.DefaultTimeout (5s).
	AttemptTimeout time.Duration
	// Retry is the retry and dead-letter policy. Zero fields take the delivery contract's defaults.
	Retry deliver.RetryPolicy
	// CommitInterval is how often delivery watermarks are committed.
	// Default engine.DefaultCommitInterval (1s).
	CommitInterval time.Duration
	// Breaker tunes the per-endpoint breaker. Defaults breaker.DefaultThreshold
	// (20 failures), DefaultFirstPause (5m) and DefaultMaxPause (1h).
	Breaker breaker.Config
	// DisableAfter disables an endpoint failing this long without a
	// success. Default partition.DefaultDisableAfter (120h).
	DisableAfter time.Duration
	// KafkaTransactionV2 lets the transactional stages (fan-out, inbound
	// verify) use Kafka's transaction protocol version 2 where the cluster
	// has finalised it. Default false: version 1, because version 2 lost
	// deliveries after unclean broker restarts (package kafkatxn).
	KafkaTransactionV2 bool
	// SessionTimeout is how long a silent group member keeps its partitions
	// (for example after kill -9). Default 0: the client's,
	// DefaultSessionTimeout (45s, Kafka's).
	SessionTimeout time.Duration
	// ParkAfter parks a lane whose oldest pending delivery waited this
	// long. Default partition.DefaultParkAfter (30s).
	ParkAfter time.Duration
	// LaneBuffer parks a lane holding more unstarted deliveries. Default
	// partition.DefaultLaneBuffer (10000).
	LaneBuffer int
	// LaneBytes parks a lane holding more bytes of deliveries. Default
	// partition.DefaultLaneBytes (32 MiB).
	LaneBytes int64
	// InstanceBytes parks the largest lanes while all lanes together hold
	// more. Default engine.DefaultInstanceBytes (512 MiB).
	InstanceBytes int64
	// MaxInFlight caps the instance's attempts in flight, shared fairly
	// among endpoints once it binds. Default engine.DefaultMaxInFlight():
	// half the file-descriptor limit.
	MaxInFlight int
	// OperatorWebhookURL is told (a signed POST) about every endpoint the
	// engine disables. Empty: disables are only logged.
	OperatorWebhookURL string
	// OperatorWebhookSecret (whsec_...) signs the operator webhook.
	OperatorWebhookSecret string
	// OperatorWebhookSecretFile names a file holding OperatorWebhookSecret
	// instead (read at start, surrounding space trimmed), to keep it out of
	// the process list and the environment. Not both. Default "".
	OperatorWebhookSecretFile string
	// SecretOverlap is how long a rotated-out endpoint secret stays valid
	// unless the rotation says otherwise. Default api.DefaultSecretOverlap
	// (24h).
	SecretOverlap time.Duration
	// OnEvent, when set, is told what the fan-out and delivery stages did
	// (engine.Event), synchronously: it must not block. For tests that
	// wait on the engine instead of polling its metrics. Default nil.
	OnEvent func(engine.Event)
	// Logger. Default slog.Default().
	Logger *slog.Logger
}

// App is a running Laneway.
type App struct {
	cfg      Config
	log      *slog.Logger
	registry *prometheus.Registry

	adminTokens []string // accepted on /v1; none: tokenless, loopback only

	kafka *embedded.Kafka
	redis *embedded.Redis
	rdb   *redis.Client

	secrets  *secretbox.Ring // nil: plaintext (SecretsConfig.AllowPlaintext)
	producer *kgo.Client
	store    *endpoint.Store
	breakers *breaker.Cache
	notifier *notify.Notifier
	health   *health.Reader
	redriver *deadletter.Redriver
	dead     *deadletter.Finder
	events   *eventsearch.Finder
	metrics  *engine.Metrics
	sender   *deliver.Sender
	batches  *batch.Manager
	fanout   *engine.Fanout
	delivery *engine.DeliveryStage
	inbound  *inbound.Service
	feeds    *feed.Service
	feedOut  *feed.Writer
	// feedProducer writes feeds and batch endpoints' dead letters.
	feedProducer *kgo.Client
	api          *listener    // the admin API, console, /metrics (and the front door without PublicAddr)
	public       *listener    // the front door's own listener, when PublicAddr is set
	feedHandler  http.Handler // the pull feeds' routes, for the public listener

	brokers   []string
	kafkaOpts []kgo.Opt // TLS and SASL, on every client
	redisURL  string
	stops     []func(context.Context) error

	// keyToCreate is the embedded default's key file when it does not
	// exist yet: createSecretsKey makes it, or refuses to.
	keyToCreate string
	// keyFile is the file the ring was read from, if any.
	keyFile string
}

// Start brings every component up. On error, whatever started is stopped.
func Start(ctx context.Context, cfg Config) (*App, error) {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.HTTPAddr = cmp.Or(cfg.HTTPAddr, DefaultHTTPAddr)
	cfg.GroupPrefix = cmp.Or(cfg.GroupPrefix, topics.DefaultPrefix)
	cfg.InstanceID = cmp.Or(cfg.InstanceID, engine.DefaultInstanceID())
	cfg.Topics = cfg.Topics.WithDefaults()
	tokens, err := adminTokens(cfg.AdminToken, cfg.AdminTokenFile)
	if err != nil {
		return nil, err
	}
	if err := checkExposure(cfg.HTTPAddr, len(tokens) > 0); err != nil {
		return nil, err
	}
	if err := checkEmbeddedKafka(cfg); err != nil {
		return nil, err
	}
	if err := checkRetention(cfg); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: cfg.Logger, registry: prometheus.NewRegistry(), adminTokens: tokens}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Start order; App.Stop stops in reverse, so each part stops before
	// what it leans on.
	steps := []func(context.Context) error{
		a.loadSecrets, a.startKafka, a.startRedis, a.ensureTopics, a.createSecretsKey, a.warnUnsafe, a.startStore, a.startFeeds,
		a.leaveGroupsOnStop, a.startBreakers, a.startNotifier, a.startHealthReader, a.startSender,
		a.startBatches, a.startFanout, a.startDelivery, a.startHealthPublisher,
		a.startIngest, a.startSearch, a.startRedriver, a.startInbound, a.startAPI, a.startPublic,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			if stopErr := a.Stop(context.Background()); stopErr != nil {
				a.log.Warn("stopping what started", "err", stopErr)
			}
			return nil, err
		}
	}
	return a, nil
}

// Stop shuts components down in reverse start order and returns what
// their stops reported, joined. Each component's Stop is bounded by its
// own limit, and all of them by ctx: pass a fresh context (not one whose
// end asked for the stop), or components cannot drain. It may be called
// more than once.
func (a *App) Stop(ctx context.Context) error {
	var errs []error
	for i := len(a.stops) - 1; i >= 0; i-- {
		errs = append(errs, a.stops[i](ctx))
	}
	a.stops = nil
	return errors.Join(errs...)
}

// onStop registers closing a client (or another step that cannot fail)
// for App.Stop.
func (a *App) onStop(fn func()) {
	a.stops = append(a.stops, func(context.Context) error { fn(); return nil })
}

// component is every long-running part's lifecycle: Start returns once it
// runs (or failed to), Stop stops it and waits for its goroutines, within
// its context where the component can honour it.
type component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// stopper is what App.Stop needs of a component; the embedded Kafka and
// Redis, which their constructors start, have only that.
type stopper interface {
	Stop(ctx context.Context) error
}

// stopWithin bounds the context a component's Stop is given, unless its
// step says otherwise. Only some components use it (the operator
// notifier's drain); the others have bounds of their own, or none.
const stopWithin = 10 * time.Second

// run starts c and registers its Stop for App.Stop, which stops components
// in reverse start order; Stop is given a context bounded by within. If
// Start fails, c is stopped at once (every component allows Stop after a
// failed Start).
func (a *App) run(ctx context.Context, c component, within time.Duration) error {
	if err := c.Start(ctx); err != nil {
		if stopErr := a.stop(context.Background(), c, within); stopErr != nil {
			a.log.Warn("stopping a component that failed to start", "err", stopErr)
		}
		return err
	}
	a.stopping(c, within)
	return nil
}

// loadWithin bounds the start of a component that first reads a config
// topic to its end (the endpoint store, the inbound sources).
const loadWithin = 60 * time.Second

// runLoading is run for such a component, its start bounded by loadWithin
// and its error prefixed with what.
func (a *App) runLoading(ctx context.Context, c component, what string) error {
	ctx, cancel := context.WithTimeout(ctx, loadWithin)
	defer cancel()
	if err := a.run(ctx, c, stopWithin); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// stopping registers c's Stop for App.Stop.
func (a *App) stopping(c stopper, within time.Duration) {
	a.stops = append(a.stops, func(ctx context.Context) error { return a.stop(ctx, c, within) })
}

// stop stops c within its bound (and ctx), naming c in its error.
func (a *App) stop(ctx context.Context, c stopper, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		return fmt.Errorf("stopping %T: %w", c, err)
	}
	return nil
}

// Brokers are the Kafka bootstrap addresses in use.
func (a *App) Brokers() []string { return a.brokers }

// RedisURL is the Redis in use, its password redacted: it is for printing.
func (a *App) RedisURL() string { return redisconn.Redact(a.redisURL) }

// HTTPAddr is the address the API listens on.
func (a *App) HTTPAddr() string { return a.api.Addr() }

// Registry is the Prometheus registry behind /metrics.
func (a *App) Registry() *prometheus.Registry { return a.registry }

// Endpoints is the endpoint config store.
func (a *App) Endpoints() *endpoint.Store { return a.store }

// Embedded reports whether the in-process Kafka is in use.
func (a *App) Embedded() bool { return a.kafka != nil }

// Topics are the topic names in use.
func (a *App) Topics() topics.Config { return a.cfg.Topics }

// FanoutTransactionalID is the fan-out's Kafka transactional id.
func (a *App) FanoutTransactionalID() string { return a.fanout.TransactionalID() }

// DeliveriesGroup is the delivery stage's consumer group.
func (a *App) DeliveriesGroup() string { return topics.GroupsFor(a.cfg.GroupPrefix).Deliveries }
