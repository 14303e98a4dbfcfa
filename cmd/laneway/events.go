package main

import (
	"context"
	"errors"
	"flag"
	"strconv"

	"github.com/laneway/laneway/internal/admin/client"
)

// eventsGroup is `laneway events ...`.
func eventsGroup() *group {
	var list struct {
		tenant, typ, entity string
		searchFlags
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
					list.register(fs, "events", "accepted at or after this time (required)", "accepted before this time")
				},
				run: func(ctx context.Context, c cmdIO, _ []string) error {
					if list.since.t.IsZero() && list.cursor == "" {
						return errors.New("--since is required (e.g. --since 1h or --since 2026-01-02T15:04:05Z)")
					}
					q := client.EventQuery{Tenant: list.tenant, Type: list.typ, Entity: list.entity,
						Since: list.since.t, Until: list.until.t, Limit: list.limit}
					fetch := func(cursor string) (client.Page[client.Event], error) {
						q.Cursor = cursor
						return c.c.ListEvents(ctx, q)
					}
					columns := []string{"ID", "TYPE", "TENANT", "ENTITY", "REV", "COALESCE", "ACCEPTED_AT", "PARTITION", "OFFSET"}
					return printSearch(ctx, c, &list.searchFlags, fetch, columns, eventRow, "(no events)")
				},
			},
		},
	}
}

// eventRow is an event's row of events list.
func eventRow(e client.Event) []string {
	return []string{e.ID, e.Type, e.Tenant, e.Entity, strconv.FormatInt(e.Revision, 10), yesNo(e.Coalesce),
		fmtTime(e.AcceptedAt), strconv.Itoa(int(e.Partition)), strconv.FormatInt(e.Offset, 10)}
}
