// Command receiver is a minimal Laneway webhook receiver built on package
// receiver: it verifies each delivery's signature, drops duplicates and
// stale revisions, and prints the deliveries that are left.
//
//	LANEWAY_WEBHOOK_SECRET=whsec_… go run ./examples/receiver -addr 127.0.0.1:8000
//
// then point a Laneway endpoint at http://127.0.0.1:8000/webhooks. Several
// secrets, comma separated, are accepted while a secret is rotated. Prefer
// the environment variable to -secret: flags show up in ps.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/laneway/laneway/receiver"
)

// secretEnv holds the secret(s) when -secret is not given.
const secretEnv = "LANEWAY_WEBHOOK_SECRET"

// path is where deliveries are received.
const path = "/webhooks"

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "receiver:", err)
		os.Exit(1)
	}
}

type options struct {
	addr    string
	secrets []string
	verbose bool
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("receiver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8000", "address to listen on")
	secret := fs.String("secret", "", "signing secret(s), comma separated during a rotation (default $"+secretEnv+")")
	verbose := fs.Bool("v", false, "log duplicates, stale revisions and rejections")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if *secret == "" {
		*secret = getenv(secretEnv)
	}
	var secrets []string
	for s := range strings.SplitSeq(*secret, ",") {
		if s = strings.TrimSpace(s); s != "" {
			secrets = append(secrets, s)
		}
	}
	if len(secrets) == 0 {
		return options{}, errors.New("no secret: set -secret or " + secretEnv)
	}
	return options{addr: *addr, secrets: secrets, verbose: *verbose}, nil
}

// newHandler returns the receiver's routes: deliveries on path are printed
// to out, one line each.
func newHandler(secrets []string, out io.Writer, logger *slog.Logger) (http.Handler, error) {
	var mu sync.Mutex // keeps concurrent deliveries' lines whole
	h, err := receiver.NewHandler(receiver.Config{Secrets: secrets, Logger: logger},
		func(_ context.Context, d receiver.Delivery) error {
			mu.Lock()
			defer mu.Unlock()
			_, err := fmt.Fprintf(out, "%s %s entity=%s revision=%d occurred=%s data=%s\n",
				d.ID, d.Type, d.Entity.ID, d.Entity.Revision, d.Timestamp.Format(time.RFC3339), d.Data)
			return err
		})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(path, h)
	return mux, nil
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	opts, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if opts.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	handler, err := newHandler(opts.secrets, stdout, logger)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "receiving Laneway webhooks on http://%s%s\n", ln.Addr(), path)
	return serve(ctx, ln, handler)
}

// serve serves until ctx ends, then lets requests in progress finish.
func serve(ctx context.Context, ln net.Listener, handler http.Handler) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
