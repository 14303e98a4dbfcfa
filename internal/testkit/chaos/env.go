package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Env is a Kafka broker and a Redis of the harness's own, started and
// stopped by scripts/testenv.sh in a private state directory: the broker and
// Redis scenarios stop and restart them, which a shared test environment
// must never see.
type Env struct {
	Root     string // repository root: scripts/testenv.sh lives there
	Dir      string // LANEWAY_TESTENV_DIR of this environment
	Brokers  []string
	RedisURL string
	// Out receives the script's own messages (nil: discarded).
	Out io.Writer
	// owned is true when this Env started the services (and Down stops them).
	owned bool
}

// StartEnv runs `scripts/testenv.sh up` in dir (which must not exist or be
// empty) and returns the running environment.
func StartEnv(ctx context.Context, root, dir string, out io.Writer) (*Env, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	e := &Env{Root: root, Dir: dir, Out: out, owned: true}
	if _, err := e.script(ctx, 5*time.Minute, "up"); err != nil {
		// up stops what it started when it fails; make sure of it.
		_ = e.Down()
		return nil, err
	}
	return e, e.readEnv(ctx)
}

// AttachEnv uses an environment that `scripts/testenv.sh up` already started
// in dir; Down leaves it running.
func AttachEnv(ctx context.Context, root, dir string, out io.Writer) (*Env, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	e := &Env{Root: root, Dir: dir, Out: out}
	return e, e.readEnv(ctx)
}

func (e *Env) readEnv(ctx context.Context) error {
	b, err := e.script(ctx, time.Minute, "env")
	if err != nil {
		return err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if !ok {
			continue
		}
		switch k {
		case "LANEWAY_TEST_KAFKA_BROKERS":
			e.Brokers = strings.Split(v, ",")
		case "LANEWAY_TEST_REDIS_URL":
			e.RedisURL = v
		}
	}
	if len(e.Brokers) == 0 || e.RedisURL == "" {
		return fmt.Errorf("testenv in %s: no brokers or redis url in %q", e.Dir, b)
	}
	return nil
}

// script runs scripts/testenv.sh with args against this environment's
// state directory and returns its standard output.
func (e *Env) script(ctx context.Context, timeout time.Duration, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{filepath.Join(e.Root, "scripts", "testenv.sh")}, args...)...)
	cmd.Dir = e.Root
	cmd.Env = append(os.Environ(), "LANEWAY_TESTENV_DIR="+e.Dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if e.Out != nil && stderr.Len() > 0 {
		_, _ = e.Out.Write(stderr.Bytes())
	}
	if err != nil {
		return stdout.Bytes(), fmt.Errorf("testenv.sh %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	return stdout.Bytes(), nil
}

// Down stops the broker and Redis if this Env started them. Their logs are
// copied to keepLogs first, when it is not empty.
func (e *Env) Down(keepLogs ...string) error {
	if !e.owned {
		return nil
	}
	for _, dst := range keepLogs {
		for _, name := range []string{"kafka.log", "redis.log"} {
			if b, err := os.ReadFile(filepath.Join(e.Dir, name)); err == nil {
				_ = os.WriteFile(filepath.Join(dst, "env-"+name), b, 0o644)
			}
		}
	}
	_, err := e.script(context.Background(), 2*time.Minute, "down")
	return err
}

// KafkaStop stops the broker: SIGTERM (a controlled shutdown) or, with
// kill, SIGKILL.
func (e *Env) KafkaStop(ctx context.Context, kill bool) error {
	args := []string{"kafka-stop"}
	if kill {
		args = append(args, "--kill")
	}
	_, err := e.script(ctx, 2*time.Minute, args...)
	return err
}

// KafkaStart starts the broker again on its ports and data directory and
// waits until it answers metadata, group and transaction requests.
func (e *Env) KafkaStart(ctx context.Context) error {
	_, err := e.script(ctx, 5*time.Minute, "kafka-start")
	return err
}

// RedisStop stops Redis (SIGTERM, or SIGKILL with kill). It keeps nothing:
// the test Redis has no persistence, so a restart is an empty Redis.
func (e *Env) RedisStop(ctx context.Context, kill bool) error {
	args := []string{"redis-stop"}
	if kill {
		args = append(args, "--kill")
	}
	_, err := e.script(ctx, time.Minute, args...)
	return err
}

// RedisStart starts Redis again on its port.
func (e *Env) RedisStart(ctx context.Context) error {
	_, err := e.script(ctx, time.Minute, "redis-start")
	return err
}

// FlushAll empties every Redis database.
func (e *Env) FlushAll(ctx context.Context) error {
	opts, err := redis.ParseURL(e.RedisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	return rdb.FlushAll(ctx).Err()
}

// RedisKeys counts the keys of the Redis database in use (for reports).
func (e *Env) RedisKeys(ctx context.Context) (int64, error) {
	opts, err := redis.ParseURL(e.RedisURL)
	if err != nil {
		return 0, err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	return rdb.DBSize(ctx).Result()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
