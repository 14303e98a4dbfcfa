package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/laneway/laneway/internal/modes/feed"
	recv "github.com/laneway/laneway/receiver" // demo_fleet.go has a type receiver
)

// tailOptions are `laneway feed tail`'s own flags.
type tailOptions struct {
	cursor    string
	limit     int
	ack, once bool
}

// feedGroup is `laneway feed ...`: a pull endpoint's feed, read as its
// consumer reads it.
func feedGroup() *group {
	var o tailOptions
	return &group{
		name:  "feed",
		about: "Read a pull endpoint's feed as its consumer does: with one of the endpoint's consumer tokens\n(laneway endpoints feed-tokens create), never with the admin token.",
		common: `Every command takes --api (env LANEWAY_API), --token: the endpoint's lwf_ consumer token
(env ` + feedTokenEnv + `), and --timeout (env LANEWAY_TIMEOUT).`,
		cmds: []*command{{
			name: "feed tail", synopsis: "feed tail <id> [--cursor C] [--ack] [--limit N] [--once]", args: 1, consumer: true,
			about: `Print the feed's events, one JSON line each, following it until interrupted.
New events show as soon as they are appended (long polls). On exit the cursor to go on from is
printed on stderr. Without --cursor it starts at the acknowledged position, or at the oldest
retained event. It acknowledges nothing unless --ack is given, so that watching a feed does not
move its consumer's position.`,
			flags: func(fs *flag.FlagSet) {
				fs.StringVar(&o.cursor, "cursor", "", "start after this cursor (default: the acknowledged position)")
				fs.BoolVar(&o.ack, "ack", false, "acknowledge each page once printed: move the consumer's position")
				fs.IntVar(&o.limit, "limit", 0, fmt.Sprintf("events per read, 1–%d (default: %d)", feed.MaxLimit, feed.DefaultLimit))
				fs.BoolVar(&o.once, "once", false, "print one page, without waiting for events, and stop")
			},
			run: func(ctx context.Context, c cmdIO, args []string) error { return tailFeed(ctx, c, args[0], o) },
		}},
	}
}

// tailFeed prints the feed of endpoint id as JSON lines.
func tailFeed(ctx context.Context, c cmdIO, id string, o tailOptions) error {
	if c.flags.token == "" {
		return fmt.Errorf("no consumer token: give --token or set %s (laneway endpoints feed-tokens create %s makes one)", feedTokenEnv, id)
	}
	feed, err := recv.NewFeed(recv.FeedConfig{
		BaseURL: c.c.Base(), EndpointID: id, Token: c.flags.token, RequestTimeout: c.flags.timeout,
		Limit: o.limit, Cursor: o.cursor, NoAck: !o.ack,
		Logger: slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false) // print the data as the producer sent it
	if o.once {
		err = tailOnce(ctx, c, feed, enc, o)
	} else {
		err = feed.Run(ctx, func(_ context.Context, ev recv.FeedEvent) error { return enc.Encode(ev) })
	}
	var expired *recv.CursorExpiredError
	switch {
	case errors.As(err, &expired):
		return fmt.Errorf("%w\nto go on from the oldest retained event: laneway feed tail %s --cursor %s", err, id, expired.Oldest)
	case errors.Is(err, context.Canceled) && !o.once:
		stoppedAt(c, feed.Cursor())
		return nil
	}
	return err
}

// tailOnce prints one page, acknowledging it with --ack.
func tailOnce(ctx context.Context, c cmdIO, feed *recv.Feed, enc *json.Encoder, o tailOptions) error {
	page, err := feed.Fetch(ctx, o.cursor, 0)
	if err != nil {
		return err
	}
	for _, ev := range page.Events {
		if err := enc.Encode(ev); err != nil {
			return err
		}
	}
	if o.ack && len(page.Events) > 0 {
		if err := feed.Ack(ctx, page.NextCursor); err != nil {
			return err
		}
	}
	stoppedAt(c, page.NextCursor)
	return nil
}

// stoppedAt tells on stderr, away from the JSON lines, where to go on.
func stoppedAt(c cmdIO, cursor string) {
	if cursor == "" {
		fmt.Fprintln(c.stderr, "stopped before the first page was printed")
		return
	}
	fmt.Fprintf(c.stderr, "next cursor: %s (go on with --cursor %s)\n", cursor, cursor)
}
