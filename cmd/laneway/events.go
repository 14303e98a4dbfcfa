package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/laneway/laneway/internal/client"
)

// eventsGroup is `laneway events ...`.
func eventsGroup() *group {
	var list struct {
		tenant, typ, entity, cursor string
		since, until                timeFlag
		limit                       int
		all                         bool
	}
	return &group{
		name:  "events",
		about: "Search the events Laneway accepted (reconciliation).",
		cmds: []*command{
			{
				name: "events list", synopsis: "events list --since T [--until T] [--tenant T] [--type X] [--entity E] [--limit N] [--all]", args: 0,
				about: `List accepted events by the time Kafka stored them. Times are RFC 3339 or a duration
ago (15m, 2h); --since is required (searches read a time range, not the whole topic).`,
				flags: func(fs *flag.FlagSet) {
					fs.StringVar(&list.tenant, "tenant", "", "only this tenant's events")
					fs.StringVar(&list.typ, "type", "", "only events of this type")
					fs.StringVar(&list.entity, "entity", "", "only events of this entity")
					fs.Var(&list.since, "since", "accepted at or after this time (required)")
					fs.Var(&list.until, "until", "accepted before this time")
					fs.IntVar(&list.limit, "limit", 0, "events per page, 1–1000 (default: the server's, 100)")
					fs.StringVar(&list.cursor, "cursor", "", "continue from an earlier page's next cursor")
					fs.BoolVar(&list.all, "all", false, "follow the cursors to the end")
				},
				run: func(ctx context.Context, c cmdIO, _ []string) error {
					if list.since.t.IsZero() && list.cursor == "" {
						return errors.New("--since is required (e.g. --since 1h or --since 2026-01-02T15:04:05Z)")
					}
					q := client.EventQuery{Tenant: list.tenant, Type: list.typ, Entity: list.entity,
						Since: list.since.t, Until: list.until.t, Limit: list.limit}
					l, err := collect(ctx, list.cursor, list.all, func(cursor string) (client.Page[client.Event], error) {
						q.Cursor = cursor
						return c.c.ListEvents(ctx, q)
					})
					if err != nil {
						return err
					}
					if c.flags.json() {
						return writeListingJSON(c.stdout, l, list.all)
					}
					t := newTable(c.stdout, "ID", "TYPE", "TENANT", "ENTITY", "REV", "COALESCE", "ACCEPTED_AT", "PARTITION", "OFFSET")
					for _, e := range l.items {
						t.row(e.ID, e.Type, e.Tenant, e.Entity, strconv.FormatInt(e.Revision, 10), yesNo(e.Coalesce),
							fmtTime(e.AcceptedAt), strconv.Itoa(int(e.Partition)), strconv.FormatInt(e.Offset, 10))
					}
					if err := t.flush(); err != nil {
						return err
					}
					if len(l.items) == 0 && l.next == "" {
						fmt.Fprintln(c.stdout, "(no events)")
					}
					moreHint(c.stdout, l.next, len(l.items))
					return nil
				},
			},
		},
	}
}
