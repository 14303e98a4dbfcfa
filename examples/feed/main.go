// Command feed is a minimal consumer of a Laneway pull endpoint, built on
// package receiver's Feed: it follows the endpoint's feed and prints each
// event, in order, as soon as Laneway appends it.
//
//	LANEWAY_API=http://127.0.0.1:8080 LANEWAY_FEED_TOKEN=lwf_… go run ./examples/feed ep_…
//
// The token is one of the endpoint's consumer tokens (laneway endpoints
// feed-tokens create ep_…), not the admin token. The program keeps no state:
// each page it printed is acknowledged on the server, and a restart goes on
// from there. Stop it with Ctrl-C.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/laneway/laneway/receiver"
)

// The environment variables the program reads.
const (
	apiEnv   = "LANEWAY_API"        // default: defaultAPI
	tokenEnv = "LANEWAY_FEED_TOKEN" // required
)

const defaultAPI = "http://127.0.0.1:8080"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "feed:", err)
		os.Exit(1)
	}
}

// run follows the feed of the endpoint args[0] until ctx ends, which is a
// clean stop.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) != 1 {
		return errors.New("usage: " + tokenEnv + "=lwf_… feed <endpoint id>")
	}
	if getenv(tokenEnv) == "" {
		return errors.New("no consumer token: set " + tokenEnv + " (laneway endpoints feed-tokens create " + args[0] + " makes one)")
	}
	api := getenv(apiEnv)
	if api == "" {
		api = defaultAPI
	}
	feed, err := receiver.NewFeed(receiver.FeedConfig{
		BaseURL: api, EndpointID: args[0], Token: getenv(tokenEnv),
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "following the feed of %s at %s\n", args[0], api)
	err = feed.Run(ctx, func(_ context.Context, ev receiver.FeedEvent) error {
		_, err := fmt.Fprintf(stdout, "%d %s %s entity=%s revision=%d occurred=%s data=%s\n", ev.Sequence, ev.ID, ev.Type,
			ev.Entity.ID, ev.Entity.Revision, ev.Timestamp.Format(time.RFC3339), ev.Data)
		return err
	})
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "stopped at cursor %s\n", feed.Cursor())
		return nil
	}
	return err
}
