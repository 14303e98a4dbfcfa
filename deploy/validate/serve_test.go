package validate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This module reaches Laneway only through its binary, `laneway serve`, as
// a deployment does: it imports none of the main module's packages.

var (
	lanewayOnce sync.Once
	lanewayBin  string
	lanewayErr  error
)

// lanewayBinary builds ./cmd/laneway of the repository once per test binary
// (an ordinary build, which the build cache keeps cheap; dockerBuild is the
// image's build from a copy of the Docker build context).
func lanewayBinary() (string, error) {
	lanewayOnce.Do(func() {
		dir, err := os.MkdirTemp("", "laneway-validate-bin-")
		if err != nil {
			lanewayErr = err
			return
		}
		tempDirs = append(tempDirs, dir)
		bin := filepath.Join(dir, "laneway")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/laneway")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			lanewayErr = fmt.Errorf("go build ./cmd/laneway: %w\n%s", err, out)
			return
		}
		lanewayBin = bin
	})
	return lanewayBin, lanewayErr
}

// freeAddr returns a loopback address nobody listens on now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// serveProc is one running `laneway serve`, its output in a log file.
type serveProc struct {
	cmd     *exec.Cmd
	base    string // http://<--http-addr>
	logPath string
	exited  chan struct{} // closed once the process has exited
	waitErr error         // its exit status, once exited is closed
}

// startServe runs `bin serve --http-addr <free loopback port> args...` with
// its output in dir/serve.log. The environment's LANEWAY_* variables are
// left out so that only args configure it.
func startServe(bin, dir string, args ...string) (*serveProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, append([]string{"serve", "--http-addr", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr() // the process dies with the test binary
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LANEWAY_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start laneway serve: %w", err)
	}
	p := &serveProc{cmd: cmd, base: "http://" + addr, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// errExited is waitReady's error when the process exited before it was
// ready.
var errExited = errors.New("laneway serve exited before it was ready")

// waitReady polls /readyz until it answers 200, the process exits
// (errExited, wrapped with its status and output) or ctx is done.
func (p *serveProc) waitReady(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%w (%v):\n%s", errExited, p.waitErr, p.output())
		case <-ctx.Done():
			return fmt.Errorf("%s/readyz not ready (last: %s): %w\n%s", p.base, last, ctx.Err(), p.output())
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM and waits up to timeout for the process to exit, then
// kills it. It reports an error if it had to be killed or exited with a
// failure.
func (p *serveProc) stop(timeout time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("laneway serve did not exit within %v of SIGTERM; killed:\n%s", timeout, p.output())
	}
	if p.waitErr != nil {
		return fmt.Errorf("laneway serve exited with %v after SIGTERM:\n%s", p.waitErr, p.output())
	}
	return nil
}

// output is the end of what the process wrote.
func (p *serveProc) output() string {
	const limit = 8 << 10
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	if len(b) > limit {
		b = append([]byte("..."), b[len(b)-limit:]...)
	}
	return string(b)
}

// checkTokenRefused runs `bin serve` with file as the content of its
// --admin-token-file, as a Pod mounting that Secret key does, and fails the
// test unless serve refuses to start for that token.
func checkTokenRefused(t *testing.T, bin, file string) {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokenFile, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := startServe(bin, dir,
		"--admin-token-file", tokenFile,
		"--embedded-kafka-addr", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stop(30 * time.Second) }) // before t.TempDir's cleanup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = p.waitReady(ctx)
	switch {
	case err == nil:
		t.Errorf("laneway serve started with the admin token file %q: it must be refused at start\n%s", file, p.output())
	case !errors.Is(err, errExited):
		t.Errorf("laneway serve with the admin token file %q neither refused it nor became ready: %v", file, err)
	case p.waitErr == nil || !strings.Contains(p.output(), "--admin-token-file "+tokenFile+": "):
		t.Errorf("laneway serve exited with the admin token file %q, but not refusing it: %v", file, err)
	}
}
