// Package api is Laneway's HTTP API: endpoint management under /v1/endpoints
// (pause, resume, secret rotation and reveal included), event ingest at
// POST /v1/events, dead-letter search and redrive under /v1/dead and
// /v1/redrives, and, unauthenticated, /healthz (liveness), /readyz
// (readiness) and /metrics.
//
// The package holds no state of its own. Endpoint config lives behind an
// EndpointStore (the compacted laneway.endpoints topic), accepted events go to
// a Publisher (the events topic), and ingest idempotency keys live in Redis,
// which holds no truth: losing them can cause a duplicate publish, never a
// lost event.
//
// The server is an http.Handler; the caller owns the http.Server, its
// timeouts and its shutdown.
package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/plumbing/httpjson"
	"github.com/laneway/laneway/internal/plumbing/timing"
)

// EndpointStore is the endpoint config the API reads and changes.
type EndpointStore interface {
	// Get returns the endpoint with this id, if any.
	Get(id string) (endpoint.Endpoint, bool)
	// List returns every endpoint, sorted by id.
	List() []endpoint.Endpoint
	// Put stores e durably; when it returns nil, Get sees the new value.
	Put(ctx context.Context, e endpoint.Endpoint) error
	// Delete removes the endpoint durably.
	Delete(ctx context.Context, id string) error
}

// Publisher writes accepted events to the events topic.
type Publisher interface {
	// Publish produces env to the events topic keyed by env.Entity with
	// acks=all and returns where it landed.
	Publish(ctx context.Context, env event.Envelope) (partition int32, offset int64, err error)
}

// Defaults for Config fields left at their zero value.
const (
	DefaultIdempotencyTTL = 24 * time.Hour
	DefaultSecretOverlap  = 24 * time.Hour
	// DefaultMaxBodyBytes leaves slack above the envelope limit so that an
	// event slightly too large is read whole and refused with the precise
	// reason from event.ParseEnvelope rather than a generic 413.
	DefaultMaxBodyBytes = event.MaxEnvelopeBytes + 64<<10
)

// Config configures a Server.
type Config struct {
	// Endpoints stores endpoint config. Required.
	Endpoints EndpointStore

	// Publisher receives the events accepted by POST /v1/events. Required.
	Publisher Publisher

	// Redis keeps ingest idempotency keys. Default: nil, meaning no
	// deduplication: every accepted request is published.
	Redis redis.UniversalClient

	// AdminToken is the bearer token every /v1/ route requires. Default: "",
	// meaning no token: for a loopback listener only, and then requests a
	// web page could send are refused (wrong Host, cross-origin, writes
	// without a JSON Content-Type). Length and strength are the caller's
	// to check (ParseAdminTokens).
	AdminToken string

	// AdminTokens are accepted as well as AdminToken, e.g. the old and
	// the new token during a rotation. Default: none.
	AdminTokens []string

	// IdempotencyTTL is how long the result of an ingest request is kept for
	// replay. Default: DefaultIdempotencyTTL (24h).
	IdempotencyTTL time.Duration

	// MaxBodyBytes caps request bodies; larger ones get 413.
	// Default: DefaultMaxBodyBytes (event.MaxEnvelopeBytes + 64 KiB).
	MaxBodyBytes int64

	// Ready reports whether the process can serve traffic, for /readyz.
	// Default: nil, meaning always ready.
	Ready func(ctx context.Context) error

	// Metrics is served at GET /metrics without authentication so that
	// Prometheus can scrape it. Default: nil, meaning no /metrics route.
	Metrics http.Handler

	// Logger receives errors, recovered panics and a Debug access log.
	// Secrets and payloads are never logged. Default: slog.Default().
	Logger *slog.Logger

	// Now is the clock for timestamps. Default: time.Now.
	Now func() time.Time

	// DeadLetters serves GET /v1/dead. Default: nil, the route answers 501.
	DeadLetters DeadLetterFinder

	// Redrives serves POST /v1/dead/redrive and GET /v1/redrives/{id}.
	// Default: nil, the routes answer 501.
	Redrives Redriver

	// SecretOverlap is how long rotated-out secrets stay valid by default.
	// Default: DefaultSecretOverlap (24h).
	SecretOverlap time.Duration

	// Events serves GET /v1/events (reconciliation). Default: nil, the
	// route answers 501.
	Events EventFinder

	// Health reads endpoint health snapshots for GET /v1/endpoints and the
	// capacity figures of GET /v1/health. Default: nil, endpoints are
	// shown without health.
	Health HealthReader

	// Feeds serves pull endpoints' feeds under /v1/feed/{id} (read with a
	// consumer token) and makes and deletes their topics. Default: nil,
	// pull endpoints cannot be created and the feed routes answer 501.
	Feeds Feeds

	// FeedAuthLimit bounds failed authentications at the feed routes per
	// client address. Defaults: see FeedAuthLimit.
	FeedAuthLimit FeedAuthLimit

	// Routes adds handlers of other components (the inbound front door,
	// the console) to the API's mux, behind the same admin token unless
	// marked Public.
	Routes []Route

	// NewID returns the random part of new endpoint ids ("ep_" + NewID()).
	// Default: uuid.NewString.
	NewID func() string
}

// Route is a handler another component serves through the API's listener.
type Route struct {
	// Pattern is a net/http ServeMux pattern, e.g. "POST /in/{source}".
	Pattern string
	Handler http.Handler
	// Public routes skip the admin token: they authenticate their callers
	// themselves (signatures) or serve only what anyone may see.
	Public bool
}

// Server is the HTTP API. Create it with New; it is safe for concurrent use.
type Server struct {
	endpoints EndpointStore
	publisher Publisher
	redis     redis.UniversalClient
	// tokenHashes are the accepted admin tokens' hashes, compared in
	// constant time; none means tokenless (loopback) mode.
	tokenHashes [][sha256.Size]byte
	sameOrigin  *http.CrossOriginProtection
	ttl         time.Duration
	maxBody     int64
	ready       func(context.Context) error
	logger      *slog.Logger
	now         func() time.Time
	newID       func() string
	handler     http.Handler
	feedHandler http.Handler

	dead          DeadLetterFinder
	redrives      Redriver
	secretOverlap time.Duration
	extra         []Route
	health        HealthReader
	events        EventFinder
	feeds         Feeds
	feedGuard     feedGuard

	// writeMu serialises endpoint read-modify-write cycles (PATCH, DELETE)
	// in this process, so that two concurrent PATCHes do not lose one
	// another's changes. The store has no compare-and-set, so writes from
	// different instances can still race; endpoint changes are rare admin
	// operations and the last write wins.
	writeMu sync.Mutex
}

// New checks cfg, fills in defaults and returns a Server.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	s := &Server{
		endpoints:   cfg.Endpoints,
		publisher:   cfg.Publisher,
		redis:       cfg.Redis,
		tokenHashes: hashTokens(append([]string{cfg.AdminToken}, cfg.AdminTokens...)),
		sameOrigin:  http.NewCrossOriginProtection(),
		ttl:         cfg.IdempotencyTTL,
		maxBody:     cfg.MaxBodyBytes,
		ready:       cfg.Ready,
		logger:      cfg.Logger,
		now:         cfg.Now,
		newID:       cfg.NewID,

		dead:          cfg.DeadLetters,
		redrives:      cfg.Redrives,
		secretOverlap: cfg.SecretOverlap,
		extra:         cfg.Routes,
		health:        cfg.Health,
		events:        cfg.Events,
		feeds:         cfg.Feeds,
		feedGuard:     newFeedGuard(cfg.FeedAuthLimit, cfg.Now),
	}
	// The access log wraps the panic handler so that a recovered panic is
	// logged with the 500 it produced.
	s.handler = s.accessLog(noSniff(s.recoverPanics(s.routes(cfg.Metrics))))
	feeds := http.NewServeMux()
	s.feedRoutes(feeds)
	s.feedHandler = s.accessLog(noSniff(s.recoverPanics(jsonMisses(feeds))))
	return s, nil
}

func hashTokens(tokens []string) [][sha256.Size]byte {
	var out [][sha256.Size]byte
	for _, t := range tokens {
		if t != "" {
			out = append(out, sha256.Sum256([]byte(t)))
		}
	}
	return out
}

func (c *Config) validate() error {
	switch {
	case c.Endpoints == nil:
		return errors.New("api: Config.Endpoints is required")
	case c.Publisher == nil:
		return errors.New("api: Config.Publisher is required")
	case c.IdempotencyTTL < 0:
		return errors.New("api: Config.IdempotencyTTL must not be negative")
	case c.SecretOverlap < 0 || c.SecretOverlap > MaxSecretOverlap:
		return errors.New("api: Config.SecretOverlap must be between 0 and 30 days")
	case c.MaxBodyBytes < 0:
		return errors.New("api: Config.MaxBodyBytes must not be negative")
	}
	return nil
}

func (c *Config) setDefaults() {
	c.IdempotencyTTL = cmp.Or(c.IdempotencyTTL, DefaultIdempotencyTTL)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	if c.Ready == nil {
		c.Ready = func(context.Context) error { return nil }
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Now = timing.Clock(c.Now)
	if c.NewID == nil {
		c.NewID = uuid.NewString
	}
	c.SecretOverlap = cmp.Or(c.SecretOverlap, DefaultSecretOverlap)
}

// Handler returns the http.Handler serving every route.
func (s *Server) Handler() http.Handler { return s.handler }

// FeedHandler serves the feed routes alone (/v1/feed/…), which consumers
// reach with their own tokens: for a public listener that must not serve
// the admin API.
func (s *Server) FeedHandler() http.Handler { return s.feedHandler }

func (s *Server) routes(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if metrics != nil {
		mux.Handle("GET /metrics", s.tokenlessHostOnly(metrics))
	}
	// Authentication is attached per route rather than by path prefix so
	// that no /v1 handler can be reached without it, whatever the path
	// cleaning does.
	v1 := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.requireToken(h)) }
	v1("POST /v1/endpoints", s.createEndpoint)
	v1("GET /v1/endpoints", s.listEndpoints)
	v1("GET /v1/endpoints/{id}", s.getEndpoint)
	v1("PATCH /v1/endpoints/{id}", s.patchEndpoint)
	v1("DELETE /v1/endpoints/{id}", s.deleteEndpoint)
	v1("POST /v1/endpoints/{id}/pause", s.setPaused(true))
	v1("POST /v1/endpoints/{id}/resume", s.setPaused(false))
	v1("POST /v1/endpoints/{id}/secret/rotate", s.rotateSecret)
	v1("GET /v1/endpoints/{id}/secret", s.revealSecret)
	v1("POST /v1/events", s.ingestEvent)
	v1("GET /v1/events", s.listEvents)
	v1("GET /v1/health", s.platformHealth)
	v1("GET /v1/dead", s.listDead)
	v1("POST /v1/dead/redrive", s.redrive)
	v1("GET /v1/redrives/{id}", s.getRedrive)
	v1("POST /v1/endpoints/{id}/feed-tokens", s.createFeedToken)
	v1("GET /v1/endpoints/{id}/feed-tokens", s.listFeedTokens)
	v1("POST /v1/endpoints/{id}/feed-tokens/{token_id}/rotate", s.rotateFeedToken)
	v1("DELETE /v1/endpoints/{id}/feed-tokens/{token_id}", s.revokeFeedToken)
	s.feedRoutes(mux)
	for _, r := range s.extra {
		if r.Public {
			mux.Handle(r.Pattern, r.Handler)
		} else {
			mux.Handle(r.Pattern, s.requireToken(r.Handler))
		}
	}
	return jsonMisses(mux)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	httpjson.Write(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.ready(r.Context()); err != nil {
		// Readiness is answered unauthenticated: the cause (hosts,
		// addresses) goes to the log only.
		s.logger.WarnContext(r.Context(), "api: not ready", "error", err)
		httpjson.Write(w, http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "error": "not ready"})
		return
	}
	httpjson.Write(w, http.StatusOK, map[string]string{"status": "ready"})
}
