// Command laneway-chaos runs Laneway's fault scenarios (package
// internal/testkit/chaos): real laneway processes against a Kafka broker and a Redis
// it starts itself (scripts/testenv.sh in a private directory), under a
// steady publishing load to verifying receivers, one kind of fault per
// scenario, then the independent order checker. It prints a summary per
// scenario and a Markdown table, and exits 1 if any scenario lost an event,
// broke the order of an entity or saw a bad signature (2 if the harness
// itself failed).
//
//	go run ./cmd/laneway-chaos                        # the default set, CI scale
//	go run ./cmd/laneway-chaos -scale large           # the default set, the large scale
//	go run ./cmd/laneway-chaos -scenarios kill9 -rate 500 -kills 20
//	go run ./cmd/laneway-chaos -scenarios pause-fail-resume   # an opt-in scenario, by name
//
// Run it from the repository root (or pass -root). Its logs and the checker's
// inputs stay in -work-dir: per scenario accepted.ndjson, receipts.ndjson,
// requests.ndjson, endpoints.json, the laneway logs, check.json and result.json; the
// checker can be run on them again with cmd/laneway-checkorder.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/laneway/laneway/internal/testkit/chaos"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("laneway-chaos", flag.ContinueOnError)
	// The preset gives every other flag its default, so it is read first.
	preset := presetArg(args)
	var cfg chaos.Config
	switch preset {
	case "ci":
		cfg = chaos.CIConfig()
	case "large":
		cfg = chaos.LargeConfig()
	default:
		fmt.Fprintf(os.Stderr, "laneway-chaos: -scale must be ci or large, not %q\n", preset)
		return 2
	}
	fs.String("scale", preset, "preset for every figure below: ci (small, minutes) or large")
	scenarios := fs.String("scenarios", "all", "comma-separated scenarios: "+strings.Join(chaos.Names(true), ", ")+
		"; all (the default set: every scenario but the opt-in ones) or every")
	root := fs.String("root", ".", "repository root (scripts/testenv.sh, ./cmd/laneway)")
	workDir := fs.String("work-dir", "", "where logs and reports go (default: a new directory under the system temp dir)")
	bin := fs.String("laneway", "", "laneway binary (default: built from -root)")
	envDir := fs.String("env-dir", "", "use the test env already up in this LANEWAY_TESTENV_DIR instead of starting one (it is not stopped)")
	jsonOut := fs.String("json", "", "also write every result to this JSON file")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "events/s published")
	fs.IntVar(&cfg.Entities, "entities", cfg.Entities, "entities (two tenants)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the event mix")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "load before the first fault")
	fs.DurationVar(&cfg.Tail, "tail", cfg.Tail, "load after the last fault")
	fs.IntVar(&cfg.Instances, "instances", cfg.Instances, "laneway processes (rolling uses at least 3)")
	fs.IntVar(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of the events, deliveries and parked topics")
	fs.IntVar(&cfg.Kills, "kills", cfg.Kills, "kill9: number of kill -9s")
	fs.DurationVar(&cfg.KillEvery, "kill-every", cfg.KillEvery, "kill9: time between kills")
	fs.DurationVar(&cfg.RollGap, "roll-gap", cfg.RollGap, "rolling: pause between two instances")
	fs.DurationVar(&cfg.BrokerDown, "broker-down", cfg.BrokerDown, "broker: time the broker stays down")
	fs.DurationVar(&cfg.Gap, "gap", cfg.Gap, "broker, redis: time between the two faults")
	fs.DurationVar(&cfg.RedisDown, "redis-down", cfg.RedisDown, "redis: time Redis stays down")
	fs.IntVar(&cfg.FlapCycles, "flap-cycles", cfg.FlapCycles, "flap: failing/healthy cycles")
	fs.DurationVar(&cfg.FlapFailing, "flap-failing", cfg.FlapFailing, "flap: a failing period")
	fs.DurationVar(&cfg.FlapHealthy, "flap-healthy", cfg.FlapHealthy, "flap: a healthy period")
	fs.DurationVar(&cfg.SessionTimeout, "session-timeout", cfg.SessionTimeout, "laneway --session-timeout")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", cfg.DrainTimeout, "how long the deliveries may take after publishing stops")
	fs.DurationVar(&cfg.LateAfter, "late-after", cfg.LateAfter, "a delivery later than this after its ack is late (recovery)")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "laneway --log-level")
	lanewayArgs := fs.String("laneway-args", "", "extra `laneway serve` flags for every instance, space-separated (e.g. --kafka-transaction-v2)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "laneway-chaos: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg.LanewayArgs = strings.Fields(*lanewayArgs)

	picked, err := chaos.SelectScenarios(*scenarios)
	if err != nil {
		fmt.Fprintln(os.Stderr, "laneway-chaos:", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := runAll(ctx, cfg, picked, *root, *workDir, *bin, *envDir)
	if len(results) > 0 {
		fmt.Printf("\n%s\n%s", chaos.Table(results), chaos.FaultTable(results))
		if *jsonOut != "" {
			b, _ := json.MarshalIndent(results, "", "  ")
			if werr := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); werr != nil {
				fmt.Fprintln(os.Stderr, "laneway-chaos:", werr)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "laneway-chaos:", err)
		return 2
	}
	for _, r := range results {
		if !r.Pass() {
			return 1
		}
	}
	return 0
}

// presetArg finds -scale's value in args ("ci" when absent).
func presetArg(args []string) string {
	for i, a := range args {
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "scale" || !strings.HasPrefix(a, "-") {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return "ci"
}

func runAll(ctx context.Context, cfg chaos.Config, picked []chaos.Scenario, root, workDir, bin, envDir string) ([]*chaos.Result, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "scripts", "testenv.sh")); err != nil {
		return nil, fmt.Errorf("%s is not the repository root (no scripts/testenv.sh); run from it or pass -root", root)
	}
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "laneway-chaos-"); err != nil {
			return nil, err
		}
	}
	cfg.Root, cfg.WorkDir, cfg.Bin = root, workDir, bin
	cfg.Logf = func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	cfg.Logf("work dir %s", workDir)
	if cfg.Bin == "" {
		if cfg.Bin, err = chaos.BuildLaneway(ctx, root, workDir); err != nil {
			return nil, err
		}
	}
	var env *chaos.Env
	if envDir != "" {
		env, err = chaos.AttachEnv(ctx, root, envDir, os.Stderr)
	} else {
		env, err = chaos.StartEnv(ctx, root, filepath.Join(workDir, "env"), os.Stderr)
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := env.Down(workDir); derr != nil {
			fmt.Fprintln(os.Stderr, "laneway-chaos: stopping the test env:", derr)
		}
	}()
	cfg.Logf("broker %v, redis %s", env.Brokers, env.RedisURL)
	var results []*chaos.Result
	var errs []error
	for _, sc := range picked {
		if ctx.Err() != nil {
			break
		}
		res, err := chaos.Run(ctx, env, cfg, sc)
		if res != nil {
			results = append(results, res)
			fmt.Fprint(os.Stderr, chaos.Summary(res))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sc.Name, err))
		}
	}
	return results, errors.Join(errs...)
}
