// Command laneway-checkorder is the independent order checker: from what the
// producer says Kafka accepted, which endpoints subscribe to what, what the
// receivers accepted and what the dead-letter topic holds, it reports lost
// events, order violations and duplicates (package internal/testkit/ordercheck has
// the definitions). It exits 0 when nothing was lost and nothing was out of
// order, 1 when something was, 2 when it could not check.
//
//	laneway-checkorder -dir /tmp/laneway-chaos-123/kill9 -kafka-brokers 127.0.0.1:39092 -dead-topic chaos-kill9-ab12cd.dead
//	laneway-checkorder -accepted accepted.ndjson -endpoints endpoints.json -receipts 'receipts-*.ndjson' -dead-file dead.ndjson
//
// Inputs: the accepted log is NDJSON of {"id","tenant","type","entity","rev",
// "coalesce","p","o","acked_at","err"}; the endpoints file a JSON array (or
// NDJSON) of {"id","name","tenant","event_types"}; receipt logs NDJSON of
// {"ep","id","entity","rev","seq","at"} where seq orders one log's receipts
// by arrival; dead letters come from the topic (read committed, from the
// start to the end offsets) or from a file of dead-letter records as Laneway
// writes them, one per line. A request log (optional: -requests, or
// requests.ndjson in -dir when it is there) has the receipts' fields plus
// "done" and "status" for every request, answered or not: it adds the check
// that no two requests of one (endpoint, entity) were in flight at once.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/ordercheck"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("laneway-checkorder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "a chaos scenario directory: its accepted.ndjson, endpoints.json and receipts.ndjson")
	accepted := fs.String("accepted", "", "accepted log(s), comma-separated globs")
	endpoints := fs.String("endpoints", "", "endpoints file")
	receipts := fs.String("receipts", "", "receipt log(s), comma-separated globs")
	requests := fs.String("requests", "", "request log(s), comma-separated globs (optional: adds the overlap check)")
	brokers := fs.String("kafka-brokers", "", "comma-separated brokers to read the dead-letter topic from")
	deadTopic := fs.String("dead-topic", "", "dead-letter topic (with -kafka-brokers)")
	deadFile := fs.String("dead-file", "", "dead letters as Laneway writes them, one JSON record per line (instead of the topic)")
	jsonOut := fs.Bool("json", false, "print the whole report as JSON")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir != "" {
		*accepted = firstNonEmpty(*accepted, filepath.Join(*dir, "accepted.ndjson"))
		*endpoints = firstNonEmpty(*endpoints, filepath.Join(*dir, "endpoints.json"))
		*receipts = firstNonEmpty(*receipts, filepath.Join(*dir, "receipts.ndjson"))
		if _, err := os.Stat(filepath.Join(*dir, "requests.ndjson")); err == nil {
			*requests = firstNonEmpty(*requests, filepath.Join(*dir, "requests.ndjson"))
		}
	}
	in, err := load(*accepted, *endpoints, *receipts, *brokers, *deadTopic, *deadFile)
	if err == nil && *requests != "" {
		in.Requests, err = ordercheck.ReadFiles[ordercheck.Receipt](strings.Split(*requests, ",")...)
	}
	if err != nil {
		fmt.Fprintln(stderr, "laneway-checkorder:", err)
		return 2
	}
	rep := ordercheck.Check(in)
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		fmt.Fprintln(stdout, rep.String())
		for _, s := range rep.LostSamples {
			fmt.Fprintln(stdout, "  lost:", s)
		}
		for _, s := range rep.ViolationSamples {
			fmt.Fprintln(stdout, "  order:", s)
		}
		for _, s := range rep.OverlapSamples {
			fmt.Fprintln(stdout, "  overlap:", s)
		}
		for _, s := range rep.OtherSamples {
			fmt.Fprintln(stdout, "  other:", s)
		}
	}
	if !rep.Pass() {
		return 1
	}
	return 0
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func load(accepted, endpoints, receipts, brokers, deadTopic, deadFile string) (ordercheck.Input, error) {
	var in ordercheck.Input
	if accepted == "" || endpoints == "" || receipts == "" {
		return in, errors.New("-accepted, -endpoints and -receipts (or -dir) are required")
	}
	var err error
	if in.Accepted, err = ordercheck.ReadFiles[ordercheck.Accepted](strings.Split(accepted, ",")...); err != nil {
		return in, err
	}
	if in.Endpoints, err = ordercheck.ReadEndpoints(endpoints); err != nil {
		return in, err
	}
	if in.Receipts, err = ordercheck.ReadFiles[ordercheck.Receipt](strings.Split(receipts, ",")...); err != nil {
		return in, err
	}
	switch {
	case deadFile != "":
		letters, err := ordercheck.ReadFile[event.DeadLetter](deadFile)
		if err != nil {
			return in, err
		}
		for _, dl := range letters {
			if d, ok := ordercheck.FromDeadLetter(dl); ok {
				in.Dead = append(in.Dead, d)
			}
		}
	case brokers != "" && deadTopic != "":
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
		if err != nil {
			return in, err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if in.Dead, err = ordercheck.ReadDeadTopic(ctx, cl, deadTopic); err != nil {
			return in, err
		}
	default:
		return in, errors.New("dead letters are required: -kafka-brokers with -dead-topic, or -dead-file")
	}
	return in, nil
}
