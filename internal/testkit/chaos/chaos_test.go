package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestScenarios runs every fault scenario at CI scale: real laneway
// processes against a Kafka broker and a Redis of the test's own (the
// broker and Redis scenarios stop them, which the shared test services must
// never see). Each must end with 0 lost and 0 order violations.
//
// It runs where the real services are (LANEWAY_TEST_KAFKA_BROKERS is set by
// scripts/testenv.sh test, which also means Kafka's jars and redis-server
// are installed). LANEWAY_CHAOS_SCENARIOS=kill9,flap runs only those, and
// names opt-in scenarios too (not in the default set: see Scenario.OptIn),
// e.g. LANEWAY_CHAOS_SCENARIOS=pause-fail-resume; "every" runs every
// scenario, opt-in ones included;
// LANEWAY_CHAOS_LANEWAY_ARGS adds laneway serve flags (for example
// --kafka-transaction-v2, which brings back F2/F3 of docs/reliability.md).
// LANEWAY_CHAOS_KEEP=dir keeps every scenario's logs in dir; a failing
// scenario's logs are kept in any case (the path is logged).
// LANEWAY_CHAOS_BIN=path runs that laneway binary instead of building
// ./cmd/laneway (to try another build against the scenarios).
func TestScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("fault scenarios")
	}
	if _, ok := testenv.RealKafka(); !ok {
		t.Skipf("needs the real services: %s not set (run through scripts/testenv.sh test)", testenv.KafkaEnv)
	}
	scenarios, err := SelectScenarios(os.Getenv("LANEWAY_CHAOS_SCENARIOS"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := CIConfig()
	cfg.Root = root
	cfg.WorkDir = t.TempDir()
	if keep := os.Getenv("LANEWAY_CHAOS_KEEP"); keep != "" {
		cfg.WorkDir = keep
	}
	cfg.Logf = t.Logf
	cfg.LanewayArgs = strings.Fields(os.Getenv("LANEWAY_CHAOS_LANEWAY_ARGS"))

	started := time.Now()
	if cfg.Bin = os.Getenv("LANEWAY_CHAOS_BIN"); cfg.Bin == "" {
		if cfg.Bin, err = BuildLaneway(ctx, root, cfg.WorkDir); err != nil {
			t.Fatal(err)
		}
	}
	env, err := StartEnv(ctx, root, filepath.Join(cfg.WorkDir, "env"), testLogWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Down(); err != nil {
			t.Errorf("stopping the private broker and Redis: %v", err)
		}
	})
	t.Logf("private broker %v and Redis %s up, laneway built, in %v", env.Brokers, env.RedisURL, time.Since(started).Round(time.Millisecond))

	var results []*Result
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			cfg.Logf = t.Logf
			res, err := Run(ctx, env, cfg, sc)
			if res != nil {
				results = append(results, res)
				t.Log("\n" + Summary(res))
			}
			if err != nil {
				t.Fatalf("harness: %v", err)
			}
			if !res.Pass() {
				keep := keepLogs(t, res.Dir, env)
				t.Errorf("scenario %s failed: %s (logs kept in %s)", sc.Name, res.Check.String(), keep)
			}
		})
	}
	t.Logf("all scenarios in %v\n%s\n%s", time.Since(started).Round(time.Second), Table(results), FaultTable(results))
}

// keepLogs copies a failed scenario's directory out of the test's temporary
// directory, with the broker's and Redis's logs.
func keepLogs(t *testing.T, dir string, env *Env) string {
	dst, err := os.MkdirTemp("", "laneway-chaos-"+filepath.Base(dir)+"-")
	if err != nil {
		t.Logf("keeping logs: %v", err)
		return dir
	}
	if err := os.CopyFS(dst, os.DirFS(dir)); err != nil {
		t.Logf("keeping logs: %v", err)
	}
	for _, name := range []string{"kafka.log", "redis.log"} {
		if b, err := os.ReadFile(filepath.Join(env.Dir, name)); err == nil {
			_ = os.WriteFile(filepath.Join(dst, "env-"+name), b, 0o644)
		}
	}
	return dst
}

type testLogWriter struct{ t *testing.T }

func (w testLogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
