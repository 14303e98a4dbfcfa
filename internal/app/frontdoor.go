package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/inbound"
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
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = 10 * time.Second
	}
	if l.ReadTimeout <= 0 {
		l.ReadTimeout = 30 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 120 * time.Second
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = 64 << 10
	}
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

// listener is one HTTP server on its own address, served by a goroutine
// that stop waits for.
type listener struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// serve listens on addr and serves srv until stop; errors other than the
// server's own close are logged.
func (a *App) serve(name, addr string, srv *http.Server) (*listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", name, addr, err)
	}
	l := &listener{srv: srv, ln: ln, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("http server stopped", "listener", name, "err", err)
		}
	}()
	return l, nil
}

// stop drains the server's requests (10 s at most) and waits for it.
func (l *listener) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = l.srv.Shutdown(ctx)
	<-l.done
}

// inboundRoutes are the front door's routes on the API listener: all of
// them, or only the admin ones when the door has a listener of its own.
func (a *App) inboundRoutes(in *inbound.Service) []api.Route {
	if a.cfg.PublicAddr != "" {
		return in.AdminRoutes()
	}
	return in.Routes()
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
// admin API, the console and /metrics stay on HTTPAddr. It stops before the inbound
// service (stops run in reverse).
func (a *App) startPublic(in *inbound.Service, feeds http.Handler) error {
	if a.cfg.PublicAddr == "" {
		return nil
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/feed/", feeds) // pull endpoints' consumers, with their own tokens
	mux.Handle("/", in.PublicHandler())
	l, err := a.serve("public", a.cfg.PublicAddr, a.cfg.HTTPLimits.server(mux))
	if err != nil {
		return err
	}
	a.public = l
	a.onStop(l.stop)
	return nil
}

// PublicAddr is the address the public front door listens on, or "" when
// it is served on HTTPAddr.
func (a *App) PublicAddr() string {
	if a.public == nil {
		return ""
	}
	return a.public.ln.Addr().String()
}
