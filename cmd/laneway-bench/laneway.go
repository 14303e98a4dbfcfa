package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/benchrecv"
)

// laneway is the service under test, in this process or a child process
// (-laneway-bin).
type laneway struct {
	app  service
	name string // prefix of this run's topics and groups
	cfg  config
}

// service is what the benchmark uses of Laneway.
type service interface {
	Brokers() []string
	Topics() topics.Config
	HTTPAddr() string
	DeliveriesGroup() string
	Registry() prometheus.Gatherer
	// PID is Laneway's own process when it runs apart from the
	// benchmark, 0 in this process.
	PID() int
	Stop(ctx context.Context) error
}

// inProcess is Laneway in the benchmark's own process.
type inProcess struct{ *app.App }

func (a inProcess) Registry() prometheus.Gatherer { return a.App.Registry() }
func (a inProcess) PID() int                      { return 0 }

// uniqueName names this run's topics and groups so that runs against a
// shared broker never see each other's data or join each other's groups.
func uniqueName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s-%s", prefix, os.Getpid(), strconv.FormatInt(time.Now().Unix(), 36), hex.EncodeToString(b[:]))
}

// startLaneway starts Laneway in this process with the settings the flags
// (or the scenario's defaults) chose; zero values keep Laneway's defaults.
func startLaneway(ctx context.Context, cfg config, stderr io.Writer) (*laneway, error) {
	// A key of the run's own: the run's topics do not outlive it.
	benchRing, err := secretbox.NewRing(secretbox.NewKey("bench"))
	if err != nil {
		return nil, err
	}
	name := uniqueName("bench")
	if cfg.LanewayBin != "" {
		e, err := startExternal(ctx, cfg, name, stderr)
		if err != nil {
			return nil, err
		}
		return &laneway{app: e, name: name, cfg: cfg}, nil
	}
	acfg := app.Config{
		KafkaBrokers: cfg.KafkaBrokers, RedisURL: cfg.RedisURL, HTTPAddr: "127.0.0.1:0",
		Secrets: app.SecretsConfig{Ring: benchRing},
		// Every topic under the run's name, pull endpoints' feeds included.
		Topics:      topics.Config{Partitions: int32(cfg.Partitions)}.WithPrefix(name),
		GroupPrefix: name, InstanceID: name,
		AllowTargets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Logger:       lanewayLogger(stderr, cfg.LogLevel),
		ParkAfter:    cfg.ParkAfter, LaneBuffer: cfg.LaneBuffer, AttemptTimeout: cfg.AttemptTimeout,
		LaneBytes: cfg.LaneBytes, MaxInFlight: cfg.MaxInFlight,
	}
	if len(cfg.KafkaBrokers) == 0 {
		acfg.EmbeddedKafkaAddr = "127.0.0.1:0"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	a, err := app.Start(ctx, acfg)
	if err != nil {
		return nil, fmt.Errorf("start laneway: %w", err)
	}
	return &laneway{app: inProcess{a}, name: name, cfg: cfg}, nil
}

// stop stops Laneway within timeout and, on a real broker, deletes what the
// run created there. A stop that hangs is reported, not waited for: the
// process is about to exit anyway.
func (l *laneway) stop(timeout time.Duration, warn io.Writer) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := l.app.Stop(context.Background()); err != nil {
			fmt.Fprintln(warn, "laneway-bench: warning:", err)
		}
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		fmt.Fprintf(warn, "laneway-bench: warning: laneway did not stop within %s\n", timeout)
	}
	if len(l.cfg.KafkaBrokers) > 0 && !l.cfg.KeepTopics {
		l.deleteRunState(warn)
	}
}

func (l *laneway) deleteRunState(warn io.Writer) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(l.cfg.KafkaBrokers...))
	if err != nil {
		fmt.Fprintln(warn, "laneway-bench: warning: cleanup:", err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	listed, err := adm.ListTopics(ctx)
	var mine []string
	for _, t := range listed.Names() {
		if strings.HasPrefix(t, l.name+".") {
			mine = append(mine, t)
		}
	}
	if err == nil && len(mine) > 0 {
		_, err = adm.DeleteTopics(ctx, mine...)
	}
	if err != nil {
		fmt.Fprintln(warn, "laneway-bench: warning: deleting topics:", err)
	}
	if _, err := adm.DeleteGroups(ctx, topics.GroupsFor(l.name).All()...); err != nil {
		fmt.Fprintln(warn, "laneway-bench: warning: deleting groups:", err)
	}
}

// endpointSpec is what the benchmark decides about endpoint n.
type endpointSpec struct {
	tenant         string
	maxConcurrency int
}

// createEndpoints creates endpoints 0..count-1 through the API, a few at a
// time (each create waits for the config topic round trip), and returns
// their ids.
func (l *laneway) createEndpoints(ctx context.Context, recv *benchrecv.Receiver, count int, spec func(n int) endpointSpec) ([]string, error) {
	api, err := l.api()
	if err != nil {
		return nil, err
	}
	ids := make([]string, count)
	err = forEachParallel(ctx, count, func(ctx context.Context, n int) (err error) {
		ids[n], err = createEndpoint(ctx, api, recv, n, spec(n))
		return err
	})
	return ids, err
}

// api is a client of Laneway's API, without a token: the benchmark's
// Laneway has no admin token.
func (l *laneway) api() (*client.Client, error) { return client.New(l.app.HTTPAddr(), "") }

// forEachParallel calls fn for 0..count-1, eight at a time (each API
// create waits for the config topic's round trip), and stops at the first
// error, which it returns.
func forEachParallel(ctx context.Context, count int, fn func(ctx context.Context, n int) error) error {
	const parallel = 8
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan int)
	var wg sync.WaitGroup
	for range parallel {
		wg.Go(func() {
			for n := range work {
				if err := fn(ctx, n); err != nil {
					cancel(err)
				}
			}
		})
	}
	for n := 0; n < count && ctx.Err() == nil; n++ {
		select {
		case work <- n:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return context.Cause(ctx)
}

func createEndpoint(ctx context.Context, api *client.Client, recv *benchrecv.Receiver, n int, spec endpointSpec) (string, error) {
	var created struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	body := map[string]any{"tenant": spec.tenant, "url": recv.URL(n), "max_concurrency": spec.maxConcurrency}
	if err := postJSON(ctx, api, "/v1/endpoints", body, &created); err != nil {
		return "", fmt.Errorf("create endpoint %d: %w", n, err)
	}
	return created.ID, recv.SetSecret(n, created.Secret)
}

// postJSON posts body as JSON to the API's path and decodes the answer
// into out.
func postJSON(ctx context.Context, api *client.Client, path string, body, out any) error {
	_, err := api.Call(ctx, http.MethodPost, path, nil, body, nil, out)
	return err
}
