package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/kafka/logscan"
)

// searchFlags are the flags every time-range listing (dead list, events
// list) shares.
type searchFlags struct {
	since, until timeFlag
	limit        int
	cursor       string
	all          bool
}

// register adds the flags to fs; items names what is listed ("letters"),
// sinceHelp and untilHelp what the times bound.
func (f *searchFlags) register(fs *flag.FlagSet, items, sinceHelp, untilHelp string) {
	fs.Var(&f.since, "since", sinceHelp)
	fs.Var(&f.until, "until", untilHelp)
	fs.IntVar(&f.limit, "limit", 0, fmt.Sprintf("%s per page, 1–%d (default: the server's, %d)", items, logscan.MaxLimit, logscan.DefaultLimit))
	fs.StringVar(&f.cursor, "cursor", "", "continue from an earlier page's next cursor")
	fs.BoolVar(&f.all, "all", false, "follow the cursors to the end")
}

// printSearch prints the page fetch reads at the flags' cursor (with --all,
// every page after it too): the API's JSON with -o json, else a table of
// columns, one row an item, saying none when there is nothing at all.
func printSearch[T any](ctx context.Context, c cmdIO, f *searchFlags, fetch func(cursor string) (client.Page[T], error),
	columns []string, row func(T) []string, none string) error {
	l, err := collect(ctx, f.cursor, f.all, fetch)
	if err != nil {
		return err
	}
	if c.flags.json() {
		return writeListingJSON(c.stdout, l, f.all)
	}
	t := newTable(c.stdout, columns...)
	for _, it := range l.items {
		t.row(row(it)...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(l.items) == 0 && l.next == "" {
		fmt.Fprintln(c.stdout, none)
	}
	moreHint(c.stdout, l.next, len(l.items))
	return nil
}
