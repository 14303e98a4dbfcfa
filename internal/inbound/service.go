package inbound

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"

	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/kafka/kafkatxn"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
	"github.com/laneway/laneway/internal/plumbing/redisconn"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
	"github.com/laneway/laneway/internal/security/secretbox"
)

// Defaults for Config fields left at their zero value.
const (
	DefaultDedupWindow     = 30 * 24 * time.Hour
	DefaultCaptureTimeout  = 10 * time.Second
	DefaultVerifyBatchWait = 50 * time.Millisecond
	DefaultRefusedKeepRate = 5.0
	// kafkaDefaultBatchBytes is franz-go's (and old Kafka's) batch limit,
	// used until the inbound topic's own max.message.bytes is known.
	kafkaDefaultBatchBytes = 1_000_012
)

// Config configures a Service. Zero values take the documented defaults.
type Config struct {
	// Brokers to connect to. Required.
	Brokers []string
	// Topics names the topics; the front door uses Inbound (captures and
	// outcomes), Sources (compacted source config) and Events (where
	// verified events go). Default: topics.Config{}.WithDefaults().
	Topics topics.Config
	// Redis holds dedup claims and replay job progress. Required. Redis
	// holds no truth: when it fails, requests are forwarded without dedup.
	Redis redis.UniversalClient
	// Group is the verify stage's consumer group. Default
	// topics.GroupsFor(topics.DefaultPrefix).Inbound ("laneway-inbound").
	Group string
	// TransactionalID prefix of the verify stage; the instance id is
	// appended. Default: Group.
	TransactionalID string
	// InstanceID must be stable across restarts (a restart then fences the
	// previous run's open transaction) and unique among instances.
	// Default: kafkatxn.DefaultInstanceID(), the hostname.
	InstanceID string
	// TransactionV2 lets the verify stage use Kafka's transaction protocol
	// version 2 where the cluster has finalised it. Default false (see
	// package kafkatxn).
	TransactionV2 bool
	// SessionTimeout of the verify group. Default 0: Kafka's 45 s.
	SessionTimeout time.Duration
	// VerifyBatchWait is how long the verify stage lets the broker gather
	// captures (up to 256 KiB) before a poll returns: each poll is one
	// transaction, so a short wait trades a little verification delay for
	// far fewer transactions at low rates. Default 50 ms.
	VerifyBatchWait time.Duration
	// DedupWindow is how long a forwarded event's dedup key is remembered.
	// Default 30 days.
	DedupWindow time.Duration
	// KeyPrefix prefixes every Redis key. Default redisconn.DefaultKeyPrefix
	// ("laneway:").
	KeyPrefix string
	// CaptureTimeout bounds the wait for Kafka's acknowledgement of a
	// capture; past it the sender gets 503 and retries. Default 10 s.
	CaptureTimeout time.Duration
	// CaptureOnly runs the front door, the admin API and replays without
	// the verify stage, for instances that only take requests while others
	// verify. Default false.
	CaptureOnly bool
	// RateLimits bound how often senders may call the front door, per
	// client address and per source. Defaults: see RateLimits.
	RateLimits RateLimits
	// RefusedKeepRate is how many refused requests per second are kept as
	// metadata (a few KiB each) for forensics; beyond it they are only
	// counted. It bounds what anonymous senders can make this instance
	// store: RefusedKeepRate × ~6 KiB × the inbound retention. Default 5;
	// negative: none are kept.
	RefusedKeepRate float64
	// RefusedKeepBurst is how many refusals may be kept at once. Default 50.
	RefusedKeepBurst int
	// ReplayPageSize is the number of requests a replay job reads and
	// copies per step. Default jobs.DefaultPageSize (500).
	ReplayPageSize int
	// ReplayJobTTL is how long a replay job's progress stays readable.
	// Default jobs.DefaultJobTTL (7 days).
	ReplayJobTTL time.Duration
	// ReplayLease is how long a replay job's runner may go silent before a
	// repeated request resumes it elsewhere. Default jobs.DefaultLease (30 s).
	ReplayLease time.Duration
	// ClientOpts returns extra franz-go options for each client by name
	// ("inbound-capture", "inbound-verify", "inbound-sources",
	// "inbound-search"): metrics hooks, TLS, SASL. Default: none.
	ClientOpts func(name string) []kgo.Opt
	// Secrets seals source secrets on the sources topic (and opens them).
	// Default nil: written in plaintext (--allow-plaintext-secrets).
	Secrets *secretbox.Ring
	// Registerer receives the laneway_inbound_* metrics. Default: a
	// private registry (the metrics are kept but not exported).
	Registerer prometheus.Registerer
	// Logger. Secrets and bodies are never logged. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock for receive and verify times. Default time.Now.
	Now func() time.Time
}

func (c *Config) setDefaults() error {
	if len(c.Brokers) == 0 {
		return errors.New("inbound: Config.Brokers is required")
	}
	if c.Redis == nil {
		return errors.New("inbound: Config.Redis is required")
	}
	c.Topics = c.Topics.WithDefaults()
	c.Group = cmp.Or(c.Group, topics.GroupsFor(topics.DefaultPrefix).Inbound)
	c.TransactionalID = cmp.Or(c.TransactionalID, c.Group)
	c.InstanceID = cmp.Or(c.InstanceID, kafkatxn.DefaultInstanceID())
	c.VerifyBatchWait = valutil.PositiveOr(c.VerifyBatchWait, DefaultVerifyBatchWait)
	c.DedupWindow = valutil.PositiveOr(c.DedupWindow, DefaultDedupWindow)
	c.CaptureTimeout = valutil.PositiveOr(c.CaptureTimeout, DefaultCaptureTimeout)
	c.ReplayJobTTL = valutil.PositiveOr(c.ReplayJobTTL, jobs.DefaultJobTTL)
	c.ReplayLease = valutil.PositiveOr(c.ReplayLease, jobs.DefaultLease)
	c.KeyPrefix = cmp.Or(c.KeyPrefix, redisconn.DefaultKeyPrefix)
	c.ReplayPageSize = valutil.PositiveOr(c.ReplayPageSize, jobs.DefaultPageSize)
	c.RateLimits.setDefaults()
	c.RefusedKeepRate = cmp.Or(c.RefusedKeepRate, DefaultRefusedKeepRate)
	c.RefusedKeepBurst = valutil.PositiveOr(c.RefusedKeepBurst, 50)
	if c.ClientOpts == nil {
		c.ClientOpts = func(string) []kgo.Opt { return nil }
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Now = timing.Clock(c.Now)
	return nil
}

// Service is the inbound front door: the capture handler, the verify
// stage, the source store, the listing and the replay jobs. Create it with
// New, mount Routes, Start it before serving, Stop it after the HTTP
// server has stopped.
type Service struct {
	cfg     Config
	logger  *slog.Logger
	metrics *metrics

	sources  *SourceStore
	producer *kgo.Client // captures and replay copies, acks=all
	search   *kgo.Client // listing and reads by id
	finder   *Finder
	verifier *verifier // nil when CaptureOnly
	replays  *replayer

	limits     *limiter      // per address and per source
	keepBudget *rate.Limiter // refusals kept as metadata

	// inboundBatchBytes is the inbound topic's max.message.bytes, read at
	// Start, so that a capture up to that size goes out as one batch.
	inboundBatchBytes atomic.Int32
	started           atomic.Bool
	stopOnce          sync.Once

	// writeMu serialises this process's source read-modify-writes.
	writeMu sync.Mutex
}

// New checks cfg and creates the clients; nothing is read or consumed
// until Start.
func New(cfg Config) (*Service, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Service{
		cfg: cfg, logger: cfg.Logger, metrics: newMetrics(cfg.Registerer),
		limits:     newLimiter(cfg.RateLimits, cfg.Now),
		keepBudget: rate.NewLimiter(rate.Limit(max(0, cfg.RefusedKeepRate)), cfg.RefusedKeepBurst),
	}
	if cfg.RefusedKeepRate < 0 {
		s.keepBudget = rate.NewLimiter(0, 0)
	}
	var err error
	defer func() {
		if err != nil {
			if s.sources != nil {
				_ = s.sources.Stop(context.Background()) // never started: closes its client
			}
			s.closeClients()
		}
	}()
	if s.sources, err = NewSourceStore(SourceStoreConfig{
		Brokers: cfg.Brokers, Topic: cfg.Topics.Sources, Secrets: cfg.Secrets, Logger: cfg.Logger, ClientOpts: cfg.ClientOpts("inbound-sources"),
	}); err != nil {
		return nil, err
	}
	if s.producer, err = kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0), // batches form while a produce is in flight
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.ProducerBatchMaxBytesFn(s.batchBytes),
	}, cfg.ClientOpts("inbound-capture")...)...); err != nil {
		return nil, fmt.Errorf("inbound capture client: %w", err)
	}
	if s.search, err = kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.ClientOpts("inbound-search")...)...); err != nil {
		return nil, fmt.Errorf("inbound search client: %w", err)
	}
	s.finder = newFinder(s.search, cfg.Topics.Inbound, cfg.Group)
	if !cfg.CaptureOnly {
		if s.verifier, err = newVerifier(verifierConfig{
			brokers: cfg.Brokers, inboundTopic: cfg.Topics.Inbound, eventsTopic: cfg.Topics.Events,
			group: cfg.Group, transactionalID: cfg.TransactionalID + "-" + cfg.InstanceID, instanceID: cfg.InstanceID, transactionV2: cfg.TransactionV2,
			sessionTimeout: cfg.SessionTimeout, batchWait: cfg.VerifyBatchWait, clientOpts: cfg.ClientOpts("inbound-verify"),
			sources: s.sources, metrics: s.metrics, logger: cfg.Logger, now: cfg.Now,
			checks: kafkatxn.NewChecks(cfg.Registerer, "inbound", cfg.Logger),
			dedup:  &deduper{rdb: cfg.Redis, prefix: cfg.KeyPrefix, window: cfg.DedupWindow},
		}); err != nil {
			return nil, err
		}
	}
	s.replays = newReplayer(replayConfig{
		finder: s.finder, producer: s.producer, topic: cfg.Topics.Inbound, redis: cfg.Redis,
		prefix: cfg.KeyPrefix, pageSize: cfg.ReplayPageSize, jobTTL: cfg.ReplayJobTTL, lease: cfg.ReplayLease,
		metrics: s.metrics, logger: cfg.Logger, now: cfg.Now,
	})
	return s, nil
}

func (s *Service) batchBytes(topic string) int32 {
	if topic == s.cfg.Topics.Inbound {
		if n := s.inboundBatchBytes.Load(); n > 0 {
			return n
		}
	}
	return kafkaDefaultBatchBytes
}

// Start loads the source config, reads the inbound topic's message size
// limit and starts the replay runner and the verify stage (unless
// CaptureOnly), which run until Stop: ctx bounds only the loading. The
// topics must exist (topics.Ensure creates them).
func (s *Service) Start(ctx context.Context) error {
	if err := s.sources.Start(ctx); err != nil {
		return fmt.Errorf("load inbound sources: %w", err)
	}
	if err := s.replays.Start(ctx); err != nil {
		return err
	}
	s.inboundBatchBytes.Store(s.maxMessageBytes(ctx))
	if s.verifier != nil {
		_ = s.verifier.Start(ctx) // cannot fail
	}
	s.started.Store(true)
	return nil
}

// maxMessageBytes reads the inbound topic's max.message.bytes (the
// broker's default when the topic sets none).
func (s *Service) maxMessageBytes(ctx context.Context) int32 {
	rcs, err := kadm.NewClient(s.search).DescribeTopicConfigs(ctx, s.cfg.Topics.Inbound)
	if err == nil {
		var rc kadm.ResourceConfig
		if rc, err = rcs.On(s.cfg.Topics.Inbound, nil); err == nil && rc.Err == nil {
			for _, c := range rc.Configs {
				if c.Key == "max.message.bytes" && c.Value != nil {
					if n, err := strconv.ParseInt(*c.Value, 10, 32); err == nil && n >= 1024 {
						return int32(n)
					}
				}
			}
		}
	}
	s.logger.Warn("could not read the inbound topic's max.message.bytes; captures over ~1 MB will get 413", "topic", s.cfg.Topics.Inbound, "err", err)
	return kafkaDefaultBatchBytes
}

// Stop stops replay jobs (their progress saved), the verify stage (its
// current transaction finished) and the source store, and closes the
// clients. Stop the HTTP server first: captures after Stop get 503. It
// waits for the replay jobs and the verify stage without a bound of its own
// (ctx is not used); the last flush of refused requests kept is bounded by
// 5s. It may be called more than once, and without Start; it returns nil.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.started.Store(false)
		_ = s.replays.Stop(ctx) // returns nil
		if s.verifier != nil {
			_ = s.verifier.Stop(ctx) // returns nil
		}
		_ = s.sources.Stop(ctx) // returns nil
		flushCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.producer.Flush(flushCtx) // the refused requests still being kept
		s.closeClients()
	})
	return nil
}

func (s *Service) closeClients() {
	if s.producer != nil {
		s.producer.Close()
	}
	if s.search != nil {
		s.search.Close()
	}
}

// Sources is the source config store.
func (s *Service) Sources() *SourceStore { return s.sources }

// Finder lists and reads captured requests.
func (s *Service) Finder() *Finder { return s.finder }

// Routes are the front door's handlers, for api.Config.Routes:
//
//	POST   /in/{source}                             public: the capture front door
//	POST   /in/{source}/{token}                     public: the same, for a source with a capture token
//	POST   /v1/inbound/sources                      create a source (201, secrets shown once)
//	GET    /v1/inbound/sources                      list sources (no secrets)
//	GET    /v1/inbound/sources/{id}                 one source (no secrets)
//	PATCH  /v1/inbound/sources/{id}                 change settings
//	DELETE /v1/inbound/sources/{id}                 delete (204)
//	POST   /v1/inbound/sources/{id}/secret/rotate   new current secret, old one kept as previous
//	GET    /v1/inbound/sources/{id}/secret          reveal the secrets
//	POST   /v1/inbound/sources/{id}/capture-token/rotate  new capture token, old one kept as previous
//	GET    /v1/inbound/requests                     list by source, status, job, since, until
//	GET    /v1/inbound/requests/{id}                one captured request, headers and body
//	GET    /v1/inbound/requests/{id}/body           its body bytes, exactly
//	POST   /v1/inbound/replays                      re-verify or re-publish (202, background job)
//	GET    /v1/inbound/replays/{id}                 replay progress
func (s *Service) Routes() []api.Route {
	return append(s.captureRoutes(), s.AdminRoutes()...)
}

// captureRoutes are the front door: /in/{source}, and /in/{source}/{token}
// for a source with a capture token (capturetoken.go).
func (s *Service) captureRoutes() []api.Route {
	h := http.HandlerFunc(s.capture)
	return []api.Route{
		{Pattern: "POST /in/{source}", Handler: h, Public: true},
		{Pattern: "POST /in/{source}/{token}", Handler: h, Public: true},
	}
}

// PublicHandler serves the capture routes, and the other public routes
// given (the pull feeds, which authenticate their callers), for a listener
// that faces the internet: nothing else (no admin route, no console, no
// metrics) is reachable through it; every other path is a JSON 404 that
// names what is. Every response carries X-Content-Type-Options: nosniff,
// so that no browser renders an answer (which may echo a path) as anything
// but its type.
func (s *Service) PublicHandler(others ...api.Route) http.Handler {
	mux := http.NewServeMux()
	served := []string{"POST /in/{source}"}
	for _, r := range append(s.captureRoutes(), others...) {
		mux.Handle(r.Pattern, r.Handler)
	}
	for _, r := range others {
		if strings.HasSuffix(r.Pattern, "/") {
			r.Pattern += "…" // a subtree
		}
		served = append(served, r.Pattern)
	}
	notFound := "not found: this listener serves " + strings.Join(served, " and ") + " only"
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		httpjson.Error(w, http.StatusNotFound, notFound)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		mux.ServeHTTP(w, r)
	})
}

// AdminRoutes are Routes without the capture route, for an API listener
// when the front door has a listener of its own (PublicHandler).
func (s *Service) AdminRoutes() []api.Route {
	admin := func(pattern string, h http.HandlerFunc) api.Route { return api.Route{Pattern: pattern, Handler: h} }
	return []api.Route{
		admin("POST /v1/inbound/sources", s.createSource),
		admin("GET /v1/inbound/sources", s.listSources),
		admin("GET /v1/inbound/sources/{id}", s.getSource),
		admin("PATCH /v1/inbound/sources/{id}", s.patchSource),
		admin("DELETE /v1/inbound/sources/{id}", s.deleteSource),
		admin("POST /v1/inbound/sources/{id}/secret/rotate", s.rotateSecret),
		admin("GET /v1/inbound/sources/{id}/secret", s.revealSecret),
		admin("POST /v1/inbound/sources/{id}/capture-token/rotate", s.rotateCaptureToken),
		admin("GET /v1/inbound/requests", s.listRequests),
		admin("GET /v1/inbound/requests/{id}", s.getRequest),
		admin("GET /v1/inbound/requests/{id}/body", s.getRequestBody),
		admin("POST /v1/inbound/replays", s.submitReplay),
		admin("GET /v1/inbound/replays/{id}", s.getReplay),
	}
}
