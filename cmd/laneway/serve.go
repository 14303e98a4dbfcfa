package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/embedded"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/partition"
)

// serveFlags binds every `serve` setting to a flag and a LANEWAY_* variable.
func serveFlags(fs *flag.FlagSet) (*app.Config, *logFlags, *listFlags) {
	cfg := &app.Config{}
	lists := &listFlags{}
	logs := &logFlags{}
	fs.Var(&lists.brokers, "kafka-brokers", "comma-separated Kafka bootstrap brokers; empty runs the embedded Kafka")
	fs.StringVar(&cfg.EmbeddedKafkaAddr, "embedded-kafka-addr", embedded.DefaultKafkaAddr, "listen address of the embedded Kafka (loopback only, unless --embedded-kafka-allow-remote)")
	fs.BoolVar(&cfg.EmbeddedKafkaAllowRemote, "embedded-kafka-allow-remote", false, "let the embedded Kafka listen beyond loopback: it has no authentication, anyone who reaches it reads and writes every topic")
	fs.StringVar(&cfg.DataDir, "data-dir", "laneway-data", "directory the embedded Kafka persists to (empty: memory only)")
	fs.StringVar(&lists.secretsKeyFile, "secrets-key-file", "", "key file sealing endpoint and source secrets on Kafka: \"<key id> <base64 of 32 bytes>\" per line, the last one seals (default with the embedded Kafka: <data-dir>/secrets.key, created)")
	fs.BoolVar(&cfg.Secrets.AllowPlaintext, "allow-plaintext-secrets", false, "run against --kafka-brokers without --secrets-key-file, writing secrets in plaintext")
	fs.BoolVar(&cfg.Secrets.AllowNewKey, "allow-new-secrets-key", false, "with the embedded Kafka, create a new <data-dir>/secrets.key although records on the topics are sealed under a key it lacks (the old file is lost): those records stay held")
	fs.StringVar(&cfg.RedisURL, "redis-url", "", "Redis URL (redis://host:port/db, rediss:// for TLS); empty runs an in-process Redis")
	connFlags(fs, &cfg.Kafka, &cfg.Redis)
	fs.StringVar(&cfg.HTTPAddr, "http-addr", app.DefaultHTTPAddr, "API, console and metrics listen address")
	frontDoorFlags(fs, cfg)
	fs.StringVar(&cfg.AdminToken, "admin-token", "", "Bearer token required on /v1 (required to listen beyond loopback): at least 32 random bytes (openssl rand -hex 32; guessable ones are refused); two, comma-separated, during a rotation")
	fs.StringVar(&cfg.AdminTokenFile, "admin-token-file", "", "file holding the admin token instead of --admin-token, one per line (two during a rotation)")
	fs.StringVar(&cfg.Topics.Events, "events-topic", "", "topic producers publish events to (default <topic-prefix>.events)")
	fs.StringVar(&lists.topicPrefix, "topic-prefix", topics.DefaultPrefix, "prefix of Laneway's topics: <prefix>.events, .deliveries, .parked, .dead, .endpoints")
	fs.StringVar(&cfg.GroupPrefix, "group-prefix", topics.DefaultPrefix, "prefix of Laneway's consumer groups and transactional ids")
	partitions := fs.Int("partitions", topics.DefaultPartitions, "partitions of the events, deliveries and parked topics when Laneway creates them")
	fs.DurationVar(&cfg.Topics.EventsRetention, "events-retention", topics.DefaultEventsRetention, "retention of the events topic when Laneway creates it (replay and GET /v1/events reach this far back)")
	fs.DurationVar(&cfg.Topics.DeliveriesRetention, "deliveries-retention", topics.DefaultDeliveriesRetention, "retention of the deliveries and parked topics when created (must exceed --max-age)")
	fs.DurationVar(&cfg.Topics.DeadRetention, "dead-retention", topics.DefaultDeadRetention, "retention of the dead-letter topic when created (how long letters stay redrivable)")
	fs.DurationVar(&cfg.Topics.InboundRetention, "inbound-retention", topics.DefaultInboundRetention, "retention of captured inbound requests when created")
	fs.DurationVar(&cfg.Topics.FeedRetention, "feed-retention", topics.DefaultFeedRetention, "retention of each pull or batch endpoint's feed topic when created (how far back a consumer may be)")
	fs.StringVar(&cfg.InstanceID, "instance-id", "", "stable unique name of this instance (default: hostname)")
	fs.Var(&lists.allow, "allow-targets", "comma-separated CIDRs delivery may reach despite the SSRF guard (e.g. 127.0.0.0/8)")
	fs.DurationVar(&cfg.AttemptTimeout, "attempt-timeout", deliver.DefaultTimeout, "limit on one whole HTTP delivery attempt")
	fs.DurationVar(&cfg.Retry.Base, "retry-base", deliver.DefaultRetryBase, "first retry delay; doubles per attempt")
	fs.DurationVar(&cfg.Retry.Max, "retry-max", deliver.DefaultRetryMax, "cap on one retry delay (and on Retry-After)")
	fs.IntVar(&cfg.Retry.MaxAttempts, "max-attempts", deliver.DefaultMaxAttempts, "attempts before a delivery is dead")
	fs.DurationVar(&cfg.Retry.MaxAge, "max-age", deliver.DefaultMaxAge, "age after which a delivery is dead")
	fs.DurationVar(&cfg.CommitInterval, "commit-interval", engine.DefaultCommitInterval, "how often delivery watermarks are committed")
	fs.IntVar(&cfg.Breaker.Threshold, "breaker-threshold", breaker.DefaultThreshold, "consecutive failures that pause an endpoint")
	fs.DurationVar(&cfg.Breaker.FirstPause, "breaker-pause", breaker.DefaultFirstPause, "first pause of an endpoint whose breaker opens")
	fs.DurationVar(&cfg.Breaker.MaxPause, "breaker-max-pause", breaker.DefaultMaxPause, "longest pause; each failed probe round doubles it")
	fs.DurationVar(&cfg.DisableAfter, "disable-after", partition.DefaultDisableAfter, "disable an endpoint failing this long without a success")
	fs.BoolVar(&cfg.KafkaTransactionV2, "kafka-transaction-v2", false, "use Kafka's transaction protocol v2 (KIP-890 part 2) where the cluster offers it; off: v2 lost deliveries after unclean broker restarts (docs/reliability.md)")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", app.DefaultSessionTimeout, "how long a silent instance keeps its partitions (consumer group session timeout)")
	fs.DurationVar(&cfg.ParkAfter, "park-after", partition.DefaultParkAfter, "park a lane whose oldest pending delivery has waited this long")
	fs.IntVar(&cfg.LaneBuffer, "lane-buffer", partition.DefaultLaneBuffer, "park a lane holding more unstarted deliveries than this")
	fs.Int64Var(&cfg.LaneBytes, "lane-bytes", partition.DefaultLaneBytes, "park a lane holding more bytes of deliveries than this")
	fs.Int64Var(&cfg.InstanceBytes, "instance-bytes", engine.DefaultInstanceBytes, "park the largest lanes while all lanes together hold more bytes than this")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", engine.DefaultMaxInFlight(), "cap on the instance's delivery attempts in flight, shared fairly among endpoints (default: half the file-descriptor limit)")
	fs.StringVar(&cfg.OperatorWebhookURL, "operator-webhook-url", "", "URL told (signed POST) when Laneway disables an endpoint; empty: log only")
	fs.StringVar(&cfg.OperatorWebhookSecret, "operator-webhook-secret", "", "whsec_ secret signing the operator webhook (required with its URL); prefer --operator-webhook-secret-file")
	fs.StringVar(&cfg.OperatorWebhookSecretFile, "operator-webhook-secret-file", "", "file holding the operator webhook's whsec_ secret instead of --operator-webhook-secret, read at start")
	fs.DurationVar(&cfg.SecretOverlap, "secret-overlap", api.DefaultSecretOverlap, "how long a rotated-out endpoint secret stays valid by default")
	fs.StringVar(&logs.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&logs.format, "log-format", "json", "json or text")
	lists.partitions = partitions
	return cfg, logs, lists
}

type logFlags struct{ level, format string }

type listFlags struct {
	brokers, allow stringList
	partitions     *int
	topicPrefix    string
	secretsKeyFile string
}

// stringList is a comma-separated flag value.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	*l = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// envName maps a flag name to its environment variable.
func envName(flagName string) string {
	return "LANEWAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its variable.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if v := getenv(envName(f.Name)); v != "" && !given[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", envName(f.Name), e)
			}
		}
	})
	return err
}

func printDefaults(fs *flag.FlagSet, w io.Writer) {
	fmt.Fprintf(w, "Usage: laneway %s [flags]\n\nEvery flag can also be set through the environment variable shown.\n\n", fs.Name())
	fs.VisitAll(func(f *flag.Flag) {
		def := f.DefValue
		if def == "" {
			def = `""`
		}
		fmt.Fprintf(w, "  --%s (env %s, default %s)\n      %s\n", f.Name, envName(f.Name), def, f.Usage)
	})
}

func parseServe(args []string, getenv func(string) string, stderr io.Writer) (app.Config, logFlags, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg, logs, lists := serveFlags(fs)
	fs.Usage = func() { printDefaults(fs, stderr) }
	if err := fs.Parse(args); err != nil {
		return app.Config{}, logFlags{}, err
	}
	if err := applyEnv(fs, getenv); err != nil {
		return app.Config{}, logFlags{}, err
	}
	cfg.KafkaBrokers = lists.brokers
	cfg.Topics.Partitions = int32(*lists.partitions)
	cfg.Topics = cfg.Topics.WithPrefix(lists.topicPrefix)
	for _, s := range lists.allow {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return app.Config{}, logFlags{}, fmt.Errorf("--allow-targets %q: %w", s, err)
		}
		cfg.AllowTargets = append(cfg.AllowTargets, p)
	}
	if lists.secretsKeyFile != "" {
		ring, err := secretbox.LoadKeyFile(lists.secretsKeyFile)
		if err != nil {
			return app.Config{}, logFlags{}, fmt.Errorf("--secrets-key-file: %w", err)
		}
		cfg.Secrets.Ring, cfg.Secrets.KeyFile = ring, lists.secretsKeyFile
	}
	return *cfg, *logs, nil
}

func newLogger(l logFlags, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be json or text, not %q", l.format)
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, logs, err := parseServe(args, os.Getenv, stderr)
	if err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	logger, err := newLogger(logs, stderr)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	a, err := app.Start(ctx, cfg)
	if err != nil {
		return err
	}
	printWelcome(stdout, a, cfg.AdminToken != "" || cfg.AdminTokenFile != "")
	<-ctx.Done()
	logger.Info("shutting down")
	// A fresh context: ctx has ended, and the components must drain.
	if err := a.Stop(context.Background()); err != nil {
		logger.Warn("stopping", "err", err)
	}
	return nil
}

func printWelcome(w io.Writer, a *app.App, withToken bool) {
	kafka := strings.Join(a.Brokers(), ",")
	if a.Embedded() {
		kafka += " (embedded)"
	}
	auth := ""
	if withToken {
		auth = ` -H "Authorization: Bearer $LANEWAY_ADMIN_TOKEN"`
	}
	base := "http://" + a.HTTPAddr()
	frontDoor := ""
	if addr := a.PublicAddr(); addr != "" { // --public-addr: the only address to expose to providers
		frontDoor = "\n  Front door:      http://" + addr + "/in/{source}   (public listener: inbound webhooks, and pull feeds at /v1/feed/{id})"
	}
	fmt.Fprintf(w, `Laneway is running.
  Console:         %[1]s/
  API and metrics: %[1]s   (/v1/..., /openapi.json, /metrics, /healthz, /readyz)%[5]s
  Kafka:           %[2]s
  Redis:           %[3]s

Create an endpoint:
  curl -s%[4]s -H 'Content-Type: application/json' -X POST %[1]s/v1/endpoints -d '{"tenant":"acme","url":"https://example.com/webhooks","max_concurrency":4}'

Publish an event:
  curl -s%[4]s -H 'Content-Type: application/json' -X POST %[1]s/v1/events -d '{"type":"order.updated","tenant":"acme","entity":"order:123","revision":1,"coalesce":true,"data":{"status":"paid"}}'
`, base, kafka, a.RedisURL(), auth, frontDoor)
}
