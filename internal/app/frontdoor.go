package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/plumbing/connlimit"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// ServerLimits bound what one HTTP connection may hold, on every listener.
// Zero values take the defaults documented on each field.
type ServerLimits struct {
	// ReadHeaderTimeout bounds reading a request's line and headers.
	// Default 10 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included: a sender
	// that trickles its body is cut when it runs out, instead of holding a
	// connection and a goroutine for as long as it likes. Default 30 s (a
	// 1 MiB body then needs about 35 KB/s).
	ReadTimeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long. Default 120 s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers together; a larger
	// request gets 431 before any handler runs, so nothing of it is stored.
	// Default 64 KiB (providers send a few KiB).
	MaxHeaderBytes int
}

func (l ServerLimits) withDefaults() ServerLimits {
	l.ReadHeaderTimeout = valutil.PositiveOr(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	l.ReadTimeout = valutil.PositiveOr(l.ReadTimeout, DefaultReadTimeout)
	l.IdleTimeout = valutil.PositiveOr(l.IdleTimeout, DefaultIdleTimeout)
	l.MaxHeaderBytes = valutil.PositiveOr(l.MaxHeaderBytes, DefaultMaxHeaderBytes)
	return l
}

// server is an http.Server for h under these limits.
func (l ServerLimits) server(h http.Handler) *http.Server {
	l = l.withDefaults()
	return &http.Server{
		Handler: h, ReadHeaderTimeout: l.ReadHeaderTimeout, ReadTimeout: l.ReadTimeout,
		IdleTimeout: l.IdleTimeout, MaxHeaderBytes: l.MaxHeaderBytes,
	}
}

// listener is one HTTP server on its own address, a component: Start
// listens and serves from a goroutine, Stop drains the server's requests
// within its context and waits for that goroutine.
type listener struct {
	name, addr string
	srv        *http.Server
	conns      connlimit.Config
	log        *slog.Logger
	ln         net.Listener
	done       chan struct{}
}

// listener is a listener for h on addr under the configured limits. Its
// connections are capped (Config.Conns), per listener so that one flooded
// listener leaves the other, and the descriptors of deliveries, Kafka and
// Redis, alone.
func (a *App) listener(name, addr string, h http.Handler) *listener {
	conns := connlimit.Config{Limits: a.cfg.Conns, Name: name, Exempt: a.cfg.InboundRateLimits.TrustedProxies, Registerer: a.registry}
	return &listener{name: name, addr: addr, srv: a.cfg.HTTPLimits.server(h), conns: conns, log: a.log}
}

// Start listens on the address and serves; errors other than the server's
// own close are logged.
func (l *listener) Start(context.Context) error {
	raw, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("%s: listen on %s: %w", l.name, l.addr, err)
	}
	ln, err := connlimit.Wrap(raw, l.conns)
	if err != nil {
		_ = raw.Close()
		return fmt.Errorf("%s: %w", l.name, err)
	}
	l.ln, l.done = ln, make(chan struct{})
	go func() {
		defer close(l.done)
		if err := l.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.log.Error("http server stopped", "listener", l.name, "err", err)
		}
	}()
	return nil
}

// Stop drains the server's requests within ctx and waits for the server.
func (l *listener) Stop(ctx context.Context) error {
	if l.ln == nil {
		return nil // never listened
	}
	err := l.srv.Shutdown(ctx)
	<-l.done
	return err
}

// Addr is the address the listener is bound to.
func (l *listener) Addr() string { return l.ln.Addr().String() }

// inboundRoutes are the front door's routes on the API listener: all of
// them, or only the admin ones when the door has a listener of its own.
func (a *App) inboundRoutes() []api.Route {
	if a.cfg.PublicAddr != "" {
		return a.inbound.AdminRoutes()
	}
	return a.inbound.Routes()
}

// doorSharesAPublicListener reports whether the front door is served on
// HTTPAddr (no PublicAddr) and HTTPAddr reaches beyond loopback: then
// anyone who can send to the door can also reach that listener's /metrics.
func (a *App) doorSharesAPublicListener() bool {
	if a.cfg.PublicAddr != "" {
		return false
	}
	loopback, err := isLoopbackAddr(a.cfg.HTTPAddr)
	return err != nil || !loopback
}

// startPublic serves the inbound front door and the pull feeds alone on
// PublicAddr: the address a deployment exposes to the internet, while the
// admin API, the console and /metrics stay on HTTPAddr. It stops before the
// inbound service (stops run in reverse).
func (a *App) startPublic(ctx context.Context) error {
	if a.cfg.PublicAddr == "" {
		return nil
	}
	// The pull endpoints' consumers, with their own tokens.
	feeds := api.Route{Pattern: "/v1/feed/", Handler: a.feedHandler, Public: true}
	a.public = a.listener("public", a.cfg.PublicAddr, a.inbound.PublicHandler(feeds))
	return a.run(ctx, a.public, stopWithin)
}

// PublicAddr is the address the public front door listens on, or "" when
// it is served on HTTPAddr.
func (a *App) PublicAddr() string {
	if a.public == nil {
		return ""
	}
	return a.public.Addr()
}
