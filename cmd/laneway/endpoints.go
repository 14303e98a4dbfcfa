package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/model/endpoint"
)

// endpointsGroup is `laneway endpoints ...`.
func endpointsGroup() *group {
	var (
		create struct {
			tenant, url, mode, secret, payload string
			types                              commaList
			maxConcurrency                     int
			batch                              batchFlags
		}
		list struct {
			tenant, sort string
			limit        int
		}
		update struct {
			url, status, payload optionalString
			types                commaList
			maxConcurrency       optionalInt
			batch                batchFlags
		}
		rotate struct {
			secret  string
			overlap optionalDuration
		}
	)
	return &group{
		name:  "endpoints",
		about: "Manage the endpoints Laneway delivers to.",
		cmds: append([]*command{
			{
				name: "endpoints create", synopsis: "endpoints create --tenant T (--url URL [--mode batch] | --mode pull) [flags]", args: 0,
				about: `Create an endpoint: push (deliveries POSTed to --url), pull (--mode pull: a feed to read) or
batch (--mode batch: deliveries POSTed to --url in signed batches, one at a time, in one order for
the whole endpoint, sized by the --batch-* flags). The answer shows the signing secret, the only
time it is shown unasked. A pull endpoint's consumer reads its feed with a consumer token
(laneway endpoints feed-tokens create).`,
				flags: func(fs *flag.FlagSet) {
					fs.StringVar(&create.tenant, "tenant", "", "tenant whose events the endpoint receives (required)")
					fs.StringVar(&create.url, "url", "", "URL deliveries are POSTed to (required unless --mode pull, which takes none)")
					fs.StringVar(&create.mode, "mode", "", `"push" (default: POST to --url), "pull" (a feed its consumer reads) or "batch" (POST batches to --url); fixed once created`)
					fs.Var(&create.types, "event-types", "comma-separated event types to receive (default: every type)")
					fs.IntVar(&create.maxConcurrency, "max-concurrency", 0, fmt.Sprintf("deliveries in flight at most (0: the server's default, %d)", endpoint.DefaultMaxConcurrency))
					fs.StringVar(&create.secret, "secret", "", "whsec_ signing secret (default: generated)")
					fs.StringVar(&create.payload, "payload", "", `"full" (default: the event's data) or "thin" (id, type, timestamp and entity only)`)
					create.batch.bind(fs, false)
				},
				run: func(ctx context.Context, c cmdIO, _ []string) error {
					if err := checkTarget(create.tenant, create.url, create.mode); err != nil {
						return err
					}
					batch, err := create.batch.config()
					if err != nil {
						return err
					}
					if batch != nil && create.mode != client.ModeBatch {
						return errors.New("--batch-max-events, --batch-max-bytes and --batch-max-wait are for --mode batch")
					}
					ep, err := c.c.CreateEndpoint(ctx, client.NewEndpoint{
						Tenant: create.tenant, URL: create.url, Mode: create.mode, EventTypes: create.types.values,
						MaxConcurrency: create.maxConcurrency, Payload: create.payload, Secret: create.secret, Batch: batch,
					})
					if err != nil {
						return err
					}
					if c.flags.json() {
						return writeJSON(c.stdout, ep.Raw)
					}
					if err := printEndpoint(c, ep); err != nil {
						return err
					}
					if ep.Mode == client.ModePull {
						fmt.Fprintln(c.stdout, "\nNext: laneway endpoints feed-tokens create "+ep.ID+" makes the token its consumer reads the feed with.")
						return nil
					}
					fmt.Fprintln(c.stdout, "\nKeep the secret: it is shown only now (later: laneway endpoints secret "+ep.ID+").")
					return nil
				},
			},
			{
				name: "endpoints list", synopsis: "endpoints list [--tenant T] [--sort id|oldest_pending_age] [--limit N]", args: 0,
				about: "List endpoints with their live health; --sort oldest_pending_age puts the most delayed first.",
				flags: func(fs *flag.FlagSet) {
					fs.StringVar(&list.tenant, "tenant", "", "only this tenant's endpoints")
					fs.StringVar(&list.sort, "sort", "id", "id, or oldest_pending_age (most behind first)")
					fs.IntVar(&list.limit, "limit", 0, "at most this many endpoints (0: all)")
				},
				run: func(ctx context.Context, c cmdIO, _ []string) error {
					l, err := c.c.ListEndpoints(ctx, client.ListEndpointsOptions{Tenant: list.tenant, Sort: list.sort, Limit: list.limit})
					if err != nil {
						return err
					}
					if c.flags.json() {
						return writeJSON(c.stdout, l.Raw)
					}
					t := newTable(c.stdout, "ID", "TENANT", "MODE", "STATUS", "PAUSED", "MAX_CONC", "PENDING", "IN_FLIGHT", "PARKED", "OLDEST_PENDING", "BREAKER", "URL")
					for _, e := range l.Data {
						h := e.Health
						if h == nil {
							h = &client.EndpointHealth{LaneState: client.LaneState{Breaker: client.Breaker{State: "-"}}}
						}
						t.row(e.ID, e.Tenant, orDash(e.Mode), e.Status, yesNo(e.Paused), strconv.Itoa(e.MaxConcurrency),
							strconv.Itoa(h.Pending), strconv.Itoa(h.InFlight), parkedCell(h), fmtSeconds(h.OldestPendingAgeSeconds),
							orDash(h.Breaker.State), orDash(e.URL))
					}
					if err := t.flush(); err != nil {
						return err
					}
					if len(l.Data) == 0 {
						fmt.Fprintln(c.stdout, "(no endpoints)")
					}
					return nil
				},
			},
			idCommand("endpoints get", "Show one endpoint and its health.", (*client.Client).GetEndpoint, showEndpoint),
			{
				name: "endpoints update", synopsis: "endpoints update <id> [--url U] [--max-concurrency N] [--event-types a,b] [--payload full|thin] [--status active|disabled] [--batch-max-events N] [--batch-max-bytes N] [--batch-max-wait D]", args: 1,
				about: "Change an endpoint; only the flags given change. Concurrency and batch size changes apply live.",
				flags: func(fs *flag.FlagSet) {
					fs.Var(&update.url, "url", "new URL")
					fs.Var(&update.maxConcurrency, "max-concurrency", "new concurrency limit")
					fs.Var(&update.types, "event-types", `comma-separated event types ("" subscribes to every type)`)
					fs.Var(&update.status, "status", "active or disabled (re-enabling clears the disabled reason)")
					fs.Var(&update.payload, "payload", "full or thin")
					update.batch.bind(fs, true)
				},
				run: func(ctx context.Context, c cmdIO, args []string) error {
					var u client.EndpointUpdate
					if update.url.set {
						u.URL = &update.url.s
					}
					if update.maxConcurrency.set {
						u.MaxConcurrency = &update.maxConcurrency.n
					}
					if update.types.set {
						u.EventTypes = &update.types.values
					}
					if update.status.set {
						u.Status = &update.status.s
					}
					if update.payload.set {
						u.Payload = &update.payload.s
					}
					var err error
					if u.Batch, err = update.batch.config(); err != nil {
						return err
					}
					if u == (client.EndpointUpdate{}) {
						return errors.New("nothing to change: give --url, --max-concurrency, --event-types, --payload, --status or --batch-max-events, --batch-max-bytes, --batch-max-wait")
					}
					ep, err := c.c.UpdateEndpoint(ctx, args[0], u)
					return showEndpoint(c, ep, err)
				},
			},
			idCommand("endpoints pause", "Hold an endpoint's deliveries; they wait in Kafka until it is resumed.",
				(*client.Client).PauseEndpoint, showEndpoint),
			idCommand("endpoints resume", "Let a paused endpoint's deliveries flow again.", (*client.Client).ResumeEndpoint, showEndpoint),
			{
				name: "endpoints rotate-secret", synopsis: "endpoints rotate-secret <id> [--secret whsec_…] [--overlap 24h]", args: 1,
				about: "Put a new signing secret first; the old ones stay valid (and sign too) until the overlap ends.",
				flags: func(fs *flag.FlagSet) {
					fs.StringVar(&rotate.secret, "secret", "", "the new whsec_ secret (default: generated)")
					fs.Var(&rotate.overlap, "overlap", "how long the old secrets stay valid; 0 retires them now (default: the server's, 24h)")
				},
				run: func(ctx context.Context, c cmdIO, args []string) error {
					o := client.RotateOptions{Secret: rotate.secret}
					if rotate.overlap.set {
						o.Overlap = &rotate.overlap.d
					}
					s, err := c.c.RotateSecret(ctx, args[0], o)
					return showSecrets(c, s, err)
				},
			},
			idCommand("endpoints secret", "Show an endpoint's valid signing secrets (the reveal is logged).",
				(*client.Client).RevealSecret, showSecrets),
			{
				name: "endpoints delete", synopsis: "endpoints delete <id>", args: 1,
				about: "Delete an endpoint; its pending deliveries become dead letters.",
				run: func(ctx context.Context, c cmdIO, args []string) error {
					if err := c.c.DeleteEndpoint(ctx, args[0]); err != nil {
						return err
					}
					if c.flags.json() {
						return encodeJSON(c.stdout, map[string]any{"id": args[0], "deleted": true})
					}
					fmt.Fprintf(c.stdout, "deleted %s\n", args[0])
					return nil
				},
			},
		}, feedTokenCommands()...),
	}
}

// checkTarget refuses what the API would: a push or batch endpoint needs a
// URL, a pull endpoint has none.
func checkTarget(tenant, url, mode string) error {
	switch mode {
	case "", client.ModePush:
		if tenant == "" || url == "" {
			return errors.New("--tenant and --url are required (or --mode pull, which takes no --url)")
		}
	case client.ModeBatch:
		if tenant == "" || url == "" {
			return errors.New("--tenant and --url are required: a batch endpoint's batches are POSTed to --url")
		}
	case client.ModePull:
		if tenant == "" {
			return errors.New("--tenant is required")
		}
		if url != "" {
			return errors.New("--url cannot be given with --mode pull: a pull endpoint's consumer reads its feed (laneway feed tail)")
		}
	default:
		return fmt.Errorf("--mode must be push, pull or batch, not %q", mode)
	}
	return nil
}

// batchFlags are the --batch-* flags of a batch endpoint's sizes.
type batchFlags struct {
	maxEvents, maxBytes optionalInt
	maxWait             optionalDuration
}

// bind adds the flags to create's (update false) or update's flag set.
func (b *batchFlags) bind(fs *flag.FlagSet, update bool) {
	note := func(def string) string {
		if update {
			return " (batch endpoints)"
		}
		return " (--mode batch; default " + def + ")"
	}
	fs.Var(&b.maxEvents, "batch-max-events", fmt.Sprintf("events in one batch at most, 1 to %d", endpoint.MaxBatchEvents)+
		note(strconv.Itoa(endpoint.DefaultBatchMaxEvents)))
	fs.Var(&b.maxBytes, "batch-max-bytes", fmt.Sprintf("bytes in one batch's body at most, %d to %d; a larger event goes alone", endpoint.MinBatchBytes, endpoint.MaxBatchBytes)+
		note(fmt.Sprintf("%d, %d MiB", endpoint.DefaultBatchMaxBytes, endpoint.DefaultBatchMaxBytes>>20)))
	fs.Var(&b.maxWait, "batch-max-wait", fmt.Sprintf("how long a batch that is not full waits for more events, at most %gm; 0 does not wait", endpoint.MaxBatchWait.Minutes())+
		note(endpoint.DefaultBatchMaxWait.String()))
}

// config returns the sizes given, nil when none is. The API leaves out a
// size of 0 (the default), so 0 events or bytes is refused here, and a
// wait of 0 is sent as 1 ms, which the API keeps for "do not wait".
func (b *batchFlags) config() (*client.BatchConfig, error) {
	if !b.maxEvents.set && !b.maxBytes.set && !b.maxWait.set {
		return nil, nil
	}
	var c client.BatchConfig
	if b.maxEvents.set {
		if b.maxEvents.n < 1 {
			return nil, fmt.Errorf("--batch-max-events must be between 1 and %d", endpoint.MaxBatchEvents)
		}
		c.MaxEvents = b.maxEvents.n
	}
	if b.maxBytes.set {
		if b.maxBytes.n < 1 {
			return nil, fmt.Errorf("--batch-max-bytes must be between %d and %d", endpoint.MinBatchBytes, endpoint.MaxBatchBytes)
		}
		c.MaxBytes = b.maxBytes.n
	}
	if b.maxWait.set {
		if b.maxWait.d%time.Millisecond != 0 {
			return nil, fmt.Errorf("--batch-max-wait must be whole milliseconds, not %s", b.maxWait.d)
		}
		c.MaxWaitMS = max(b.maxWait.d.Milliseconds(), 1)
	}
	return &c, nil
}

// idCommand is `<name> <id>`: one call of the API about the endpoint id,
// its answer shown by show.
func idCommand[T any](name, about string, call func(*client.Client, context.Context, string) (T, error),
	show func(cmdIO, T, error) error) *command {
	return &command{
		name: name, synopsis: name + " <id>", args: 1, about: about,
		run: func(ctx context.Context, c cmdIO, args []string) error {
			v, err := call(c.c, ctx, args[0])
			return show(c, v, err)
		},
	}
}

// showEndpoint prints an endpoint the API answered with: its JSON with
// --json, else as a table.
func showEndpoint(c cmdIO, ep client.Endpoint, err error) error {
	if err != nil {
		return err
	}
	if c.flags.json() {
		return writeJSON(c.stdout, ep.Raw)
	}
	return printEndpoint(c, ep)
}

// showSecrets prints an endpoint's valid secrets the API answered with.
func showSecrets(c cmdIO, s client.Secrets, err error) error {
	if err != nil {
		return err
	}
	if c.flags.json() {
		return writeJSON(c.stdout, s.Raw)
	}
	fmt.Fprintf(c.stdout, "Secrets of %s, newest first (deliveries carry one signature per valid secret):\n", s.EndpointID)
	t := newTable(c.stdout, "SECRET", "EXPIRES_AT")
	for _, sec := range s.Secrets {
		exp := "never (current)"
		if sec.ExpiresAt != nil {
			exp = fmtTime(*sec.ExpiresAt)
		}
		t.row(sec.Secret, exp)
	}
	return t.flush()
}

// printEndpoint shows one endpoint as "key  value" lines.
func printEndpoint(c cmdIO, e client.Endpoint) error {
	types := strings.Join(e.EventTypes, ",")
	if types == "" {
		types = "(every type)"
	}
	t := newTable(c.stdout)
	t.row("id", e.ID)
	t.row("tenant", e.Tenant)
	if e.Mode != "" {
		t.row("mode", e.Mode)
	}
	if e.Mode != client.ModePull {
		t.row("url", e.URL)
	}
	if b := e.Batch; b != nil {
		t.row("batch:", "")
		t.row("  max_events", strconv.Itoa(b.MaxEvents))
		t.row("  max_bytes", strconv.Itoa(b.MaxBytes))
		t.row("  max_wait", (time.Duration(b.MaxWaitMS) * time.Millisecond).String())
	}
	t.row("event_types", types)
	t.row("max_concurrency", strconv.Itoa(e.MaxConcurrency))
	if e.Payload != "" {
		t.row("payload", e.Payload)
	}
	t.row("status", e.Status)
	if e.DisabledReason != "" {
		t.row("disabled_reason", e.DisabledReason)
	}
	t.row("paused", yesNo(e.Paused))
	t.row("created_at", fmtTime(e.CreatedAt))
	t.row("updated_at", fmtTime(e.UpdatedAt))
	if e.Secret != "" {
		t.row("secret", e.Secret)
	}
	if h := e.Health; h != nil {
		t.row("health:", "")
		t.row("  pending", strconv.Itoa(h.Pending))
		t.row("  in_flight", strconv.Itoa(h.InFlight))
		t.row("  parked", parkedCell(h))
		t.row("  oldest_pending_age", fmtSeconds(h.OldestPendingAgeSeconds))
		br := h.Breaker.State
		if h.Breaker.ConsecutiveFailures > 0 {
			br += fmt.Sprintf(" (%d consecutive failures)", h.Breaker.ConsecutiveFailures)
		}
		if h.Breaker.PausedUntil != nil {
			br += " until " + fmtTime(*h.Breaker.PausedUntil)
		}
		t.row("  breaker", br)
		t.row("  last_success_at", fmtTimePtr(h.LastSuccessAt))
		t.row("  last_error", orDash(truncate(h.LastError, 120)))
		t.row("  last_error_at", fmtTimePtr(h.LastErrorAt))
		t.row("  last_minute", fmt.Sprintf("delivered %d, failed %d, dead %d, superseded %d",
			h.PerMinute.Delivered, h.PerMinute.Failed, h.PerMinute.Dead, h.PerMinute.Superseded))
		t.row("  owner", orDash(h.Owner))
	}
	if f := e.Feed; f != nil {
		feedRows(t, f)
	}
	return t.flush()
}

// feedRows shows where a pull endpoint's consumer stands.
func feedRows(t *table, f *client.FeedPosition) {
	acked := f.AckedCursor
	if acked == "" {
		acked = "- (the consumer has acknowledged nothing)"
	}
	t.row("feed:", "")
	t.row("  acked_cursor", acked)
	t.row("  start_cursor", orDash(f.StartCursor))
	t.row("  end_cursor", orDash(f.EndCursor))
	t.row("  lag", strconv.FormatInt(f.Lag, 10))
	t.row("  oldest_unacked_age", fmtSeconds(f.OldestUnackedAgeSeconds))
}

func parkedCell(h *client.EndpointHealth) string {
	switch {
	case h.ParkedReason != "":
		return fmt.Sprintf("%d (%s)", h.Parked, h.ParkedReason)
	case h.Parked > 0:
		return strconv.Itoa(h.Parked)
	}
	return "-"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
