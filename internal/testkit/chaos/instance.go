package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/laneway/laneway/internal/testkit/lanewayapi"
)

// Instance is one laneway process. It keeps its name (--instance-id) and
// HTTP address across restarts, as a supervised process would.
type Instance struct {
	ID   string
	Addr string

	bin     string
	args    []string
	logPath string

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when cmd has been waited for
	stopping bool          // Kill or Stop is under way: an exit is expected
	starts   int
}

// BuildLaneway builds ./cmd/laneway of the repository at root into dir.
func BuildLaneway(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "laneway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/laneway")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/laneway: %w\n%s", err, out)
	}
	return bin, nil
}

// FreeAddr returns a loopback address nobody listens on now.
func FreeAddr() (string, error) { return lanewayapi.FreeAddr() }

// Start runs the process (its output appended to its log file) and waits
// until /readyz answers 200.
func (in *Instance) Start(ctx context.Context) error {
	in.mu.Lock()
	if in.cmd != nil {
		in.mu.Unlock()
		return fmt.Errorf("instance %s is already running", in.ID)
	}
	logf, err := os.OpenFile(in.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		in.mu.Unlock()
		return err
	}
	in.starts++
	in.stopping = false
	fmt.Fprintf(logf, "{\"chaos\":\"start %d of %s at %s\"}\n", in.starts, in.ID, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(in.bin, in.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr() // the process dies with the harness
	if err := cmd.Start(); err != nil {
		logf.Close()
		in.mu.Unlock()
		return fmt.Errorf("start %s: %w", in.ID, err)
	}
	exited := make(chan struct{})
	in.cmd, in.exited = cmd, exited
	in.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	return in.waitReady(ctx, exited)
}

func (in *Instance) waitReady(ctx context.Context, exited <-chan struct{}) error {
	err := lanewayapi.WaitReady(ctx, in.Addr, exited)
	switch {
	case errors.Is(err, lanewayapi.ErrExited):
		return fmt.Errorf("instance %s exited while starting (see %s)", in.ID, in.logPath)
	case err != nil:
		return fmt.Errorf("instance %s %v (see %s)", in.ID, err, in.logPath)
	}
	return nil
}

// Running reports whether the process is up.
func (in *Instance) Running() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.cmd != nil
}

// Kill sends SIGKILL and waits until the process is gone.
func (in *Instance) Kill() error {
	return in.signal(syscall.SIGKILL, time.Minute)
}

// Freeze stops the process with SIGSTOP, as a host freezes a VM or a
// container, or a long GC pause stops a process: it keeps its sockets and
// its memory and runs nothing until Thaw. Past its session timeout the
// group gives its partitions away while it still believes it owns them.
func (in *Instance) Freeze() error { return in.send(syscall.SIGSTOP) }

// Thaw continues a frozen process (SIGCONT).
func (in *Instance) Thaw() error { return in.send(syscall.SIGCONT) }

// send sends sig to a running process and returns at once.
func (in *Instance) send(sig syscall.Signal) error {
	in.mu.Lock()
	cmd := in.cmd
	in.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("instance %s is not running", in.ID)
	}
	return cmd.Process.Signal(sig)
}

// Dump sends SIGQUIT: the Go runtime writes every goroutine's stack to
// the instance's log and exits. For diagnosing a hang.
func (in *Instance) Dump() error {
	if err := in.signal(syscall.SIGQUIT, time.Minute); err != nil && !strings.Contains(err.Error(), "exited with") {
		return err
	}
	return nil
}

// Stop sends SIGTERM and waits up to timeout for a graceful exit, then
// kills. It reports an error if the process had to be killed or exited
// with a failure.
func (in *Instance) Stop(timeout time.Duration) error {
	return in.signal(syscall.SIGTERM, timeout)
}

func (in *Instance) signal(sig syscall.Signal, timeout time.Duration) error {
	in.mu.Lock()
	cmd, exited := in.cmd, in.exited
	in.stopping = true
	in.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	var err error
	select {
	case <-exited:
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-exited
		err = fmt.Errorf("instance %s did not exit within %v of %v; killed", in.ID, timeout, sig)
	}
	if err == nil && sig != syscall.SIGKILL && cmd.ProcessState != nil && !cmd.ProcessState.Success() {
		err = fmt.Errorf("instance %s exited with %v after %v", in.ID, cmd.ProcessState, sig)
	}
	in.mu.Lock()
	in.cmd, in.exited = nil, nil
	in.mu.Unlock()
	return err
}

// Exited reports an instance that died by itself (not by Kill or Stop).
// The dead process is forgotten, so Start can run it again.
func (in *Instance) Exited() error {
	in.mu.Lock()
	exited, cmd, stopping := in.exited, in.cmd, in.stopping
	in.mu.Unlock()
	if exited == nil || stopping {
		return nil
	}
	select {
	case <-exited:
		in.mu.Lock()
		if in.cmd == cmd {
			in.cmd, in.exited = nil, nil
		}
		in.mu.Unlock()
		return errors.New("instance " + in.ID + " exited by itself: " + cmd.ProcessState.String())
	default:
		return nil
	}
}
