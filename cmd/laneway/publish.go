package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"

	"github.com/laneway/laneway/internal/admin/client"
)

// maxPublishLine bounds one NDJSON line: the API refuses envelopes above
// 256 KiB anyway, and a line this long is read whole so it can be refused
// with the API's precise reason.
const maxPublishLine = 1 << 20

// publishResult is one input event's fate, as printed.
type publishResult struct {
	Line      int    `json:"line"`
	Status    string `json:"status"` // accepted, duplicate or failed
	ID        string `json:"id,omitempty"`
	Partition *int32 `json:"partition,omitempty"`
	Offset    *int64 `json:"offset,omitempty"`
	Error     string `json:"error,omitempty"`
	Field     string `json:"field,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// publishCommand is `laneway publish`.
func publishCommand() *command {
	var key string
	return &command{
		name: "publish", synopsis: "publish [--idempotency-key K] < events", args: 0,
		about: `Publish events read from stdin: one JSON event, or NDJSON (one event per line), each
POSTed to /v1/events in input order. Prints accepted/duplicate/failed per line and exits
non-zero if any failed.`,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&key, "idempotency-key", "", "Idempotency-Key of the event (input must hold a single event)")
		},
		run: func(ctx context.Context, c cmdIO, _ []string) error {
			return publish(ctx, c, key)
		},
	}
}

func publish(ctx context.Context, c cmdIO, key string) error {
	var results []publishResult
	counts := map[string]int{}
	send := func(line int, ev []byte, key string) {
		r := publishResult{Line: line}
		res, err := c.c.PublishEvent(ctx, ev, key)
		var ae *client.APIError
		switch {
		case errors.As(err, &ae):
			r.Status, r.Error, r.Field, r.Reason = "failed", ae.Error(), ae.Field, ae.Reason
		case err != nil:
			r.Status, r.Error = "failed", err.Error()
		default:
			r.Status, r.ID, r.Partition, r.Offset = "accepted", res.ID, &res.Partition, &res.Offset
			if res.Duplicate {
				r.Status = "duplicate"
			}
		}
		counts[r.Status]++
		results = append(results, r)
	}
	err := readEvents(c.stdin, key != "", func(line int, ev []byte, parseErr error) error {
		if parseErr != nil {
			r := publishResult{Line: line, Status: "failed", Error: parseErr.Error()}
			counts[r.Status]++
			results = append(results, r)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		send(line, ev, key)
		return nil
	})
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return errors.New("no events on stdin: give one JSON event or NDJSON, one event per line")
	}
	if c.flags.json() {
		if err := encodeJSON(c.stdout, map[string]any{
			"data": results, "accepted": counts["accepted"], "duplicates": counts["duplicate"], "failed": counts["failed"],
		}); err != nil {
			return err
		}
	} else {
		t := newTable(c.stdout, "LINE", "STATUS", "ID", "PARTITION", "OFFSET", "ERROR")
		for _, r := range results {
			part, off := "-", "-"
			if r.Partition != nil {
				part, off = strconv.Itoa(int(*r.Partition)), strconv.FormatInt(*r.Offset, 10)
			}
			t.row(strconv.Itoa(r.Line), r.Status, orDash(r.ID), part, off, orDash(r.Error))
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%d accepted, %d duplicate, %d failed\n", counts["accepted"], counts["duplicate"], counts["failed"])
	}
	if n := counts["failed"]; n > 0 {
		return fmt.Errorf("%d of %d events failed", n, len(results))
	}
	return nil
}

// readEvents calls fn for each event on r. The input is NDJSON when its first
// non-empty line is a JSON value by itself; otherwise it must be one JSON
// value (an event spread over several lines). With single, the input must
// hold exactly one event. A line that is not JSON is passed with parseErr.
func readEvents(r io.Reader, single bool, fn func(line int, ev []byte, parseErr error) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var head [][]byte // lines read before the mode is known
	var first []byte
	lineNo := 0
	for len(first) == 0 {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return nil // nothing but blank lines
		}
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		lineNo++
		head = append(head, line)
		first = bytes.TrimSpace(line)
	}
	if single || !json.Valid(first) {
		// One document, perhaps indented over several lines.
		rest, err := io.ReadAll(io.LimitReader(br, maxPublishLine))
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		all := append(bytes.Join(head, []byte("\n")), '\n')
		all = bytes.TrimSpace(append(all, rest...))
		switch {
		case json.Valid(all):
			return fn(lineNo, all, nil)
		case single:
			return errors.New("--idempotency-key needs exactly one JSON event on stdin")
		}
		return fn(lineNo, nil, errors.New("input is neither one JSON event nor NDJSON (one event per line)"))
	}
	if err := fn(lineNo, first, nil); err != nil {
		return err
	}
	for {
		line, err := readLine(br)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		lineNo++
		t := bytes.TrimSpace(line)
		if len(t) == 0 {
			continue
		}
		var perr error
		if !json.Valid(t) {
			perr = errors.New("line is not valid JSON")
		}
		if err := fn(lineNo, t, perr); err != nil {
			return err
		}
	}
}

// readLine returns one line without its newline (nil at EOF), refusing lines
// longer than maxPublishLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		line = append(line, chunk...)
		if len(line) > maxPublishLine {
			return nil, fmt.Errorf("a line is longer than %d bytes", maxPublishLine)
		}
		if err != nil {
			if len(line) > 0 && errors.Is(err, io.EOF) {
				return line, nil
			}
			return nil, err
		}
		if !isPrefix {
			if line == nil {
				line = []byte{}
			}
			return line, nil
		}
	}
}
