// Command laneway is the Laneway webhook delivery engine. `laneway serve`
// runs it; see `laneway serve --help` for every setting. The other commands
// are clients of a running Laneway's HTTP API, and `laneway demo` shows one
// at work.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "laneway:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "demo":
		return demo(ctx, args[1:], stdout, stderr)
	case "endpoints":
		return endpointsGroup().run(ctx, args[1:], stdin, stdout, stderr)
	case "publish":
		return publishCommand().exec(ctx, args[1:], stdin, stdout, stderr)
	case "dead":
		return deadGroup().run(ctx, args[1:], stdin, stdout, stderr)
	case "events":
		return eventsGroup().run(ctx, args[1:], stdin, stdout, stderr)
	case "feed":
		return feedGroup().run(ctx, args[1:], stdin, stdout, stderr)
	case "secrets":
		return secretsCommand(ctx, args[1:], stdout, stderr)
	default:
		return fmt.Errorf("unknown command %q\n%s", args[0], usage)
	}
}

const usage = `Usage: laneway <command> [flags]

Commands:
  serve        run Laneway (embedded Kafka and Redis unless --kafka-brokers / --redis-url are given)
  demo         run Laneway with a simulated receiver fleet, one customer slow, and live traffic
  secrets      new-key, status, rekey: the key file sealing secrets on Kafka (takes serve's flags)

API clients (--api, env LANEWAY_API; --token, env LANEWAY_ADMIN_TOKEN; -o table|json):
  endpoints    create, list, get, update, pause, resume, rotate-secret, secret, delete,
               feed-tokens create|list|rotate|revoke (a pull endpoint's consumer tokens)
  publish      publish one JSON event or NDJSON read from stdin
  dead         list dead letters; redrive them and follow the job
  events       list accepted events in a time range (reconciliation)

Feed consumer (--api, env LANEWAY_API; --token, env LANEWAY_FEED_TOKEN: an lwf_ consumer token):
  feed         tail a pull endpoint's feed, one JSON line per event

Run 'laneway <command> --help' for the flags of a command.
`
