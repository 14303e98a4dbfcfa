package app_test

import (
	"cmp"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/lanewayapi"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// processRun is what a test of a real laneway process starts from: the
// binary, a receiver fleet and serve's arguments against the real broker.
type processRun struct {
	b         testenv.Backend
	bin, addr string
	args      []string
	fleet     *fleet.Fleet
	events    string // the run's events topic
}

// newProcessRun skips unless the real broker is there; extra flags follow
// the common ones (topics and groups of their own, loopback targets, a 6 s
// session timeout).
func newProcessRun(t *testing.T, name string, extra ...string) processRun {
	t.Helper()
	if testing.Short() {
		t.Skip("process test")
	}
	b, ok := testenv.RealKafka()
	if !ok {
		t.Skipf("needs the real broker: %s not set", testenv.KafkaEnv)
	}
	addr, err := lanewayapi.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	run := processRun{b: b, bin: buildLaneway(t), addr: addr}
	f, err := fleet.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	run.fleet = f
	ns := testenv.Unique(name)
	run.events = ns + ".events"
	run.args = append([]string{"serve", "--kafka-brokers", strings.Join(b.Brokers, ","), "--redis-url", b.RedisURL,
		"--http-addr", run.addr, "--topic-prefix", ns, "--group-prefix", ns, "--instance-id", ns, "--partitions", "4",
		"--allow-targets", "127.0.0.0/8", "--session-timeout", "6s", "--secrets-key-file", testenv.SecretsKeyFile(t),
		"--log-level", cmp.Or(os.Getenv("LANEWAY_TEST_LOG"), "warn"), "--log-format", "text"}, extra...)
	return run
}

func buildLaneway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "laneway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/laneway")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startProcess runs laneway and waits until /readyz answers 200.
func startProcess(t *testing.T, bin string, args []string, addr string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}
	})
	deadline := time.Now().Add(time.Minute)
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("laneway did not become ready: %v", err)
		}
		<-poll.C
	}
}
