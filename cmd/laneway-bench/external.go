package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/lanewayapi"
)

// external is Laneway running as `laneway serve` in a child process
// (-laneway-bin), as it runs in production: its CPU and allocations are then
// its own, apart from the harness's receiver, publisher and raw baseline.
type external struct {
	cmd    *exec.Cmd
	exited chan struct{}
	dir    string // the run's secrets key file
	name   string
	cfg    config
	addr   string
}

// startExternal starts the child and waits until it answers /readyz.
func startExternal(ctx context.Context, cfg config, name string, stderr io.Writer) (*external, error) {
	if len(cfg.KafkaBrokers) == 0 || cfg.RedisURL == "" {
		return nil, errors.New("-laneway-bin needs -kafka-brokers and -redis-url: the child process cannot share this process's embedded Kafka")
	}
	dir, err := os.MkdirTemp("", "laneway-bench-")
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(dir, "secrets.key")
	addr, err := lanewayapi.FreeAddr()
	if err == nil {
		_, _, err = secretbox.EnsureKeyFile(keyFile)
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	e := &external{exited: make(chan struct{}), dir: dir, name: name, cfg: cfg, addr: addr}
	e.cmd = exec.Command(cfg.LanewayBin, e.args(keyFile)...)
	e.cmd.Stdout, e.cmd.Stderr = stderr, stderr
	if err := e.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", cfg.LanewayBin, err)
	}
	go func() { _ = e.cmd.Wait(); close(e.exited) }()
	if err := e.awaitReady(ctx); err != nil {
		_ = e.Stop(context.Background()) // the readiness error says more
		return nil, err
	}
	return e, nil
}

// args are serve's flags for the run: the in-process settings of
// startLaneway, as flags.
func (e *external) args(keyFile string) []string {
	c := e.cfg
	args := []string{"serve",
		"--kafka-brokers", strings.Join(c.KafkaBrokers, ","), "--redis-url", c.RedisURL, "--http-addr", e.addr,
		"--topic-prefix", e.name, "--group-prefix", e.name, "--instance-id", e.name,
		"--partitions", strconv.Itoa(c.Partitions), "--allow-targets", "127.0.0.0/8",
		"--secrets-key-file", keyFile, "--log-level", strings.ToLower(c.LogLevel.String()),
	}
	for flag, d := range map[string]time.Duration{"--park-after": c.ParkAfter, "--attempt-timeout": c.AttemptTimeout} {
		if d > 0 {
			args = append(args, flag, d.String())
		}
	}
	for flag, n := range map[string]int64{"--lane-buffer": int64(c.LaneBuffer), "--lane-bytes": c.LaneBytes, "--max-inflight": int64(c.MaxInFlight)} {
		if n > 0 {
			args = append(args, flag, strconv.FormatInt(n, 10))
		}
	}
	return args
}

// awaitReady waits until the child answers /readyz; an error names the
// binary and whether it exited or only did not become ready.
func (e *external) awaitReady(ctx context.Context) error {
	if err := lanewayapi.WaitReady(ctx, e.addr, e.exited); err != nil {
		return fmt.Errorf("%s serve %w", e.cfg.LanewayBin, err)
	}
	return nil
}

func (e *external) Brokers() []string       { return e.cfg.KafkaBrokers }
func (e *external) HTTPAddr() string        { return e.addr }
func (e *external) PID() int                { return e.cmd.Process.Pid }
func (e *external) DeliveriesGroup() string { return topics.GroupsFor(e.name).Deliveries }
func (e *external) Topics() topics.Config {
	return topics.Config{Partitions: int32(e.cfg.Partitions)}.WithPrefix(e.name)
}

// Registry reads the child's /metrics.
func (e *external) Registry() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		resp, err := http.Get("http://" + e.addr + "/metrics")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		parsed, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			return nil, err
		}
		out := make([]*dto.MetricFamily, 0, len(parsed))
		for _, mf := range parsed {
			out = append(out, mf)
		}
		return out, nil
	})
}

// Stop interrupts the child as Ctrl-C would (serve drains and commits) and
// kills it if it has not exited within a minute, or when ctx ends.
func (e *external) Stop(ctx context.Context) error {
	defer os.RemoveAll(e.dir)
	_ = e.cmd.Process.Signal(os.Interrupt)
	select {
	case <-e.exited:
		return nil
	case <-ctx.Done():
	case <-time.After(time.Minute):
	}
	_ = e.cmd.Process.Kill()
	<-e.exited
	return errors.New("laneway did not exit after an interrupt: killed")
}
