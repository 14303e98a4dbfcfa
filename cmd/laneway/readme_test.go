package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/testkit/lanewayapi"
)

// repoRoot is where the README's commands run.
const repoRoot = "../.."

// readmeQuickstart returns the commands of the README's first code block
// (its first screen), without their comments.
func readmeQuickstart(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "```sh\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("README has no sh code block")
	}
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		if cmd = strings.TrimSpace(cmd); cmd != "" {
			cmds = append(cmds, cmd)
		}
	}
	return cmds
}

// TestReadmeCommands runs what the README tells a newcomer to run: the
// build, and `serve` on the embedded default followed by the two curl
// commands it prints. The test command itself is what CI runs (.ci/run).
func TestReadmeCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	cmds := readmeQuickstart(t)
	if len(cmds) != 2 || cmds[0] != "go run ./cmd/laneway serve" || cmds[1] != "make test" {
		t.Fatalf("README's first screen gives %q; this test (and CI) expect the run and test commands", cmds)
	}
	ci, err := os.ReadFile(filepath.Join(repoRoot, ".ci/run"))
	if err != nil || !bytes.Contains(ci, []byte("\n"+cmds[1]+"\n")) {
		t.Fatalf(".ci/run does not run the README's test command %q", cmds[1])
	}
	t.Run("build", func(t *testing.T) {
		readme, _ := os.ReadFile(filepath.Join(repoRoot, "README.md"))
		if !bytes.Contains(readme, []byte("`make build`")) {
			t.Fatal("README no longer mentions `make build`")
		}
		out := filepath.Join(t.TempDir(), "laneway")
		shell(t, "make build BIN="+out)
		if info, err := os.Stat(out); err != nil || info.Size() == 0 {
			t.Fatalf("make build produced no binary: %v", err)
		}
	})
	t.Run("serve embedded", func(t *testing.T) { runServeAndItsCurls(t, cmds[0]) })
}

func shell(t *testing.T, command string) []byte {
	t.Helper()
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	return out
}

// runServeAndItsCurls starts the README's serve command on free ports (set
// through its LANEWAY_* variables), waits until it is ready, runs the curl
// commands it prints and stops it with SIGTERM.
func runServeAndItsCurls(t *testing.T, command string) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed")
	}
	httpAddr, err1 := lanewayapi.FreeAddr()
	kafkaAddr, err2 := lanewayapi.FreeAddr()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "exec "+command)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "LANEWAY_HTTP_ADDR="+httpAddr, "LANEWAY_EMBEDDED_KAFKA_ADDR="+kafkaAddr,
		"LANEWAY_DATA_DIR="+t.TempDir(), "LANEWAY_LOG_LEVEL=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // go run's child is stopped with it
	// Written by exec's copier while we read it.
	var stdout lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() (err error) {
		once.Do(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			err = cmd.Wait()
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	waitHTTPReady(t, "http://"+httpAddr+"/readyz")
	curls := printedCurls(stdout.String())
	if len(curls) != 2 {
		t.Fatalf("serve printed %d curl commands, want 2:\n%s", len(curls), stdout.String())
	}
	for _, c := range curls {
		out := shell(t, strings.Replace(c, "curl -s", "curl -sS -f", 1))
		t.Logf("%s\n→ %s", c, out)
	}
	// `go run` itself dies of the signal; the binary it started shuts down
	// gracefully (internal/app/shutdown_test.go proves what that means). What must
	// not happen is hanging.
	done := make(chan error, 1)
	go func() { done <- stop() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("serve did not exit within a minute of SIGTERM")
	}
}

func printedCurls(out string) []string {
	var curls []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "curl ") {
			curls = append(curls, line)
		}
	}
	return curls
}

func waitHTTPReady(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // go run compiles first
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered 200", url)
		case <-tick.C:
		}
	}
}
