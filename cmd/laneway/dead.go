package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/laneway/laneway/internal/admin/client"
)

// deadGroup is `laneway dead ...`.
func deadGroup() *group {
	var (
		list struct {
			endpoint, reason string
			searchFlags
		}
		rd struct {
			ids                       commaList
			endpoint, reason, idemKey string
			since, until              timeFlag
			wait                      bool
			poll                      time.Duration
			progress                  string
		}
	)
	return &group{
		name:  "dead",
		about: "Search dead letters and redrive them.",
		cmds: []*command{
			{
				name: "dead list", synopsis: "dead list [--endpoint ID] [--reason R] [--since T] [--until T] [--limit N] [--all]", args: 0,
				about: "List dead letters, oldest first. Times are RFC 3339 or a duration ago (15m, 2h).",
				flags: func(fs *flag.FlagSet) {
					fs.StringVar(&list.endpoint, "endpoint", "", "only this endpoint's letters (reads one partition)")
					fs.StringVar(&list.reason, "reason", "", "only letters of this reason (e.g. http_413, endpoint_disabled)")
					list.register(fs, "letters", "died at or after this time", "died before this time")
				},
				run: func(ctx context.Context, c cmdIO, _ []string) error {
					q := client.DeadQuery{EndpointID: list.endpoint, Reason: list.reason, Since: list.since.t, Until: list.until.t, Limit: list.limit}
					fetch := func(cursor string) (client.Page[client.DeadLetter], error) {
						q.Cursor = cursor
						return c.c.ListDead(ctx, q)
					}
					columns := []string{"ID", "ENDPOINT", "REASON", "DEAD_AT", "TYPE", "ENTITY", "REV", "SEQ", "ATTEMPTS", "DETAIL"}
					return printSearch(ctx, c, &list.searchFlags, fetch, columns, deadRow, "(no dead letters)")
				},
			},
			{
				name: "dead redrive", synopsis: "dead redrive (--ids a,b | --endpoint ID [--reason R] [--since T] [--until T]) [flags]", args: 0,
				about: `Send dead letters back for delivery, in the order they died, and follow the job to the
end with a progress bar (plain progress lines when stdout is not a terminal).`,
				flags: func(fs *flag.FlagSet) {
					fs.Var(&rd.ids, "ids", "comma-separated dead-letter ids")
					fs.StringVar(&rd.endpoint, "endpoint", "", "every letter of this endpoint (in the time range)")
					fs.StringVar(&rd.reason, "reason", "", "with --endpoint: only letters of this reason")
					fs.Var(&rd.since, "since", "with --endpoint: died at or after this time (RFC 3339 or a duration ago)")
					fs.Var(&rd.until, "until", "with --endpoint: died before this time (default: now)")
					fs.StringVar(&rd.idemKey, "idempotency-key", "", "Idempotency-Key: a repeat finds the same job instead of starting one")
					fs.BoolVar(&rd.wait, "wait", true, "follow the job until it is done (--wait=false: print the job and return)")
					fs.DurationVar(&rd.poll, "poll", 500*time.Millisecond, "how often the job is read while waiting")
					fs.StringVar(&rd.progress, "progress", "auto", "auto (a bar on a terminal, lines otherwise), bar, lines or none")
				},
				run: func(ctx context.Context, c cmdIO, _ []string) error {
					req := client.RedriveRequest{IDs: rd.ids.values, EndpointID: rd.endpoint, Reason: rd.reason}
					if !rd.since.t.IsZero() {
						req.Since = &rd.since.t
					}
					if !rd.until.t.IsZero() {
						req.Until = &rd.until.t
					}
					switch {
					case len(req.IDs) == 0 && req.EndpointID == "":
						return errors.New("give --ids, or --endpoint with an optional --since/--until")
					case len(req.IDs) > 0 && (req.EndpointID != "" || req.Since != nil || req.Until != nil || req.Reason != ""):
						return errors.New("--ids cannot be combined with --endpoint, --reason, --since or --until")
					}
					mode := rd.progress
					if mode == "auto" {
						mode = "lines"
						if isTerminal(c.stdout) {
							mode = "bar"
						}
					}
					if mode != "bar" && mode != "lines" && mode != "none" {
						return fmt.Errorf("--progress must be auto, bar, lines or none, not %q", rd.progress)
					}
					if c.flags.json() {
						mode = "none" // one JSON document only
					}
					return redrive(ctx, c, req, rd.idemKey, rd.wait, rd.poll, mode)
				},
			},
		},
	}
}

func redrive(ctx context.Context, c cmdIO, req client.RedriveRequest, key string, wait bool, poll time.Duration, mode string) error {
	job, created, err := c.c.Redrive(ctx, req, key)
	if err != nil {
		return err
	}
	if !c.flags.json() {
		verb := "started"
		if !created {
			verb = "found (the same request already ran or runs)"
		}
		fmt.Fprintf(c.stdout, "redrive %s %s\n", job.ID, verb)
	}
	if wait && !job.Finished() {
		total := redriveTotal(ctx, c, req, job)
		p := &progress{w: c.stdout, mode: mode, total: total}
		p.show(job)
		tick := time.NewTicker(max(poll, 50*time.Millisecond))
		defer tick.Stop()
		for !job.Finished() {
			select {
			case <-ctx.Done():
				p.end()
				return fmt.Errorf("stopped waiting (the redrive %s goes on): %w", job.ID, ctx.Err())
			case <-tick.C:
			}
			next, err := c.c.GetRedrive(ctx, job.ID)
			if err != nil {
				p.end()
				return fmt.Errorf("reading redrive %s: %w", job.ID, err)
			}
			job = next
			p.show(job)
		}
		p.end()
	}
	if c.flags.json() {
		if err := writeJSON(c.stdout, job.Raw); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(c.stdout, "redrive %s %s: matched %d, redriven %d, skipped %d, already redriven %d (scanned %d)\n",
			job.ID, job.Status, job.Matched, job.Redriven, job.Skipped, job.AlreadyRedriven, job.Scanned)
	}
	if job.Status == client.RedriveFailed {
		return fmt.Errorf("redrive %s failed: %s", job.ID, orDash(job.Error))
	}
	return nil
}

// redriveTotal is how many letters the job will handle, when it can be known
// cheaply: the number of ids, or for a range a count of its letters if that
// takes a few pages. 0 means unknown (the bar then shows counts only).
func redriveTotal(ctx context.Context, c cmdIO, req client.RedriveRequest, job client.RedriveJob) int64 {
	if len(req.IDs) > 0 {
		seen := map[string]bool{}
		for _, id := range req.IDs {
			seen[id] = true
		}
		return int64(len(seen))
	}
	q := client.DeadQuery{EndpointID: req.EndpointID, Reason: req.Reason, Until: job.Until, Limit: 1000}
	if req.Since != nil {
		q.Since = *req.Since
	}
	var n int64
	for range 10 {
		p, err := c.c.ListDead(ctx, q)
		if err != nil {
			return 0
		}
		n += int64(len(p.Data))
		if p.NextCursor == "" {
			return n
		}
		q.Cursor = p.NextCursor
	}
	return 0
}

// progress draws a redrive's progress: a bar redrawn in place, one line
// per change, or nothing.
type progress struct {
	w     io.Writer
	mode  string
	total int64
	last  string
	drawn bool
}

func (p *progress) show(j client.RedriveJob) {
	counts := fmt.Sprintf("redriven %d, skipped %d, already %d, scanned %d", j.Redriven, j.Skipped, j.AlreadyRedriven, j.Scanned)
	switch p.mode {
	case "lines":
		line := fmt.Sprintf("redrive %s: %s, %s", j.ID, j.Status, counts)
		if p.total > 0 {
			line = fmt.Sprintf("redrive %s: %s, %d/%d, %s", j.ID, j.Status, min(j.Handled(), p.total), p.total, counts)
		}
		if line != p.last {
			fmt.Fprintln(p.w, line)
			p.last = line
		}
	case "bar":
		fmt.Fprintf(p.w, "\r%s %s %s\x1b[K", bar(j, p.total, 30), j.Status, counts)
		p.drawn = true
	}
}

// end finishes a bar's line.
func (p *progress) end() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// bar renders "[#####-----]  12/40  30%" or, without a total, the handled count.
func bar(j client.RedriveJob, total int64, width int) string {
	done := j.Handled()
	if total <= 0 {
		if j.Finished() {
			return "[" + strings.Repeat("#", width) + "] " + strconv.FormatInt(done, 10)
		}
		// Unknown total: a marker that moves as polls come in.
		pos := int(j.Scanned) % width
		return "[" + strings.Repeat("-", pos) + "#" + strings.Repeat("-", width-pos-1) + "] " + strconv.FormatInt(done, 10)
	}
	frac := float64(min(done, total)) / float64(total)
	if j.Status == client.RedriveDone {
		frac = 1
	}
	n := int(frac * float64(width))
	return fmt.Sprintf("[%s%s] %d/%d %3.0f%%", strings.Repeat("#", n), strings.Repeat("-", width-n), min(done, total), total, frac*100)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// deadRow is a dead letter's row of dead list.
// deadRow is one letter's row; SEQ is a batch endpoint's sequence of the
// delivery (a redrive sends it under the same one), "-" for other modes.
func deadRow(d client.DeadLetter) []string {
	typ, entity, rev, seq, attempts := "-", "-", "-", "-", "-"
	if dl := d.Delivery; dl != nil {
		typ, entity, rev, attempts = dl.Type, dl.Entity, strconv.FormatInt(dl.Revision, 10), strconv.Itoa(dl.Attempts)
		if dl.Sequence != 0 {
			seq = strconv.FormatInt(dl.Sequence, 10)
		}
	}
	return []string{d.ID, orDash(d.EndpointID), d.Reason, fmtTime(d.DeadAt), typ, entity, rev, seq, attempts, orDash(truncate(d.Detail, 60))}
}
