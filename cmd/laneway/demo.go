package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/embedded"
	"github.com/laneway/laneway/partition"
)

// demoConfig is everything `laneway demo` can be told.
type demoConfig struct {
	api, token, publicURL        string
	httpAddr, kafkaAddr, dataDir string
	parkAfter                    time.Duration
	fleetListen, fleetHost       string
	endpoints, fastConcurrency   int
	fastMin, fastMax             time.Duration
	slowDelay                    time.Duration
	slowConcurrency              int
	rate                         float64
	entities                     int
	coalesceShare                float64
	duration, reportEvery        time.Duration
	logLevel                     string

	// onReady, when set, is called once the endpoints exist and traffic
	// starts (tests use it to watch through the API).
	onReady func(demoInfo)
}

// demoInfo is what a running demo set up.
type demoInfo struct {
	API     string // base URL of the API in use
	SlowID  string // the slow customer's endpoint id
	FastIDs []string
}

const demoAbout = `Run Laneway on the embedded default with a simulated fleet of receivers, one of them
slow, and steady traffic; print where to watch. The slow customer's lane grows while the
others stay green.

With --api, no Laneway is started: the fleet listens on --fleet-listen, registers its
endpoints as http://<fleet-host>:<port>/ep/<name> through that API (reusing the ones an
earlier run created for the demo-* tenants) and publishes through it. Laneway must be allowed to reach the fleet
(serve --allow-targets).`

func demoFlags(fs *flag.FlagSet) *demoConfig {
	c := &demoConfig{}
	fs.StringVar(&c.api, "api", "", "use the Laneway API at this address instead of starting one (external mode)")
	fs.StringVar(&c.token, "token", "", "admin bearer token: sent to --api, or required by the embedded Laneway's API")
	fs.StringVar(&c.publicURL, "public-url", "", "API address to show in the printed URLs (default: the API address in use)")
	fs.StringVar(&c.httpAddr, "http-addr", app.DefaultHTTPAddr, "embedded mode: API and console listen address")
	fs.StringVar(&c.kafkaAddr, "embedded-kafka-addr", embedded.DefaultKafkaAddr, "embedded mode: listen address of the embedded Kafka")
	fs.StringVar(&c.dataDir, "data-dir", "", "embedded mode: directory the embedded Kafka persists to (empty: memory only)")
	fs.DurationVar(&c.parkAfter, "park-after", partition.DefaultParkAfter, "embedded mode: park a lane whose oldest pending delivery waited this long")
	fs.StringVar(&c.fleetListen, "fleet-listen", "127.0.0.1:0", "listen address of the receiver fleet")
	fs.StringVar(&c.fleetHost, "fleet-host", "", "host name Laneway reaches the fleet by (default: the --fleet-listen host, loopback for a wildcard)")
	fs.IntVar(&c.endpoints, "endpoints", 20, "healthy (fast) customers, each its own tenant and endpoint")
	fs.DurationVar(&c.fastMin, "fast-min", 5*time.Millisecond, "fastest answer of a healthy receiver")
	fs.DurationVar(&c.fastMax, "fast-max", 20*time.Millisecond, "slowest answer of a healthy receiver")
	fs.IntVar(&c.fastConcurrency, "fast-concurrency", 4, "max_concurrency of the healthy endpoints")
	fs.DurationVar(&c.slowDelay, "slow-delay", 3*time.Second, "how long the slow customer's receiver takes to answer (keep it under the attempt timeout, "+deliver.DefaultTimeout.String()+")")
	fs.IntVar(&c.slowConcurrency, "slow-concurrency", 4, "max_concurrency of the slow customer's endpoint")
	fs.Float64Var(&c.rate, "rate", 200, "events per second, spread evenly over the customers")
	fs.IntVar(&c.entities, "entities", 100, "entities (orders) per customer")
	fs.Float64Var(&c.coalesceShare, "coalesce-share", 0.5, "share of events that are coalescing state updates (order.updated); the rest are facts (payment.captured)")
	fs.DurationVar(&c.duration, "duration", 0, "stop after this long (0: run until interrupted)")
	fs.DurationVar(&c.reportEvery, "report-every", 5*time.Second, "how often to print the slow lane against the others")
	fs.StringVar(&c.logLevel, "log-level", "warn", "embedded mode: Laneway's log level (logs go to stderr as text)")
	return c
}

func parseDemo(args []string, getenv func(string) string, stderr io.Writer) (*demoConfig, error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := demoFlags(fs)
	fs.Usage = func() { printCLIDefaults(fs, stderr, "demo [flags]", demoAbout, cliEnvName) }
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("demo takes no arguments, got %q", fs.Args())
	}
	if err := applyCLIEnv(fs, getenv, cliEnvName); err != nil {
		return nil, err
	}
	switch {
	case cfg.endpoints < 1:
		return nil, errors.New("--endpoints must be at least 1")
	case cfg.rate <= 0:
		return nil, errors.New("--rate must be positive")
	case cfg.entities < 1:
		return nil, errors.New("--entities must be at least 1")
	case cfg.coalesceShare < 0 || cfg.coalesceShare > 1:
		return nil, errors.New("--coalesce-share must be between 0 and 1")
	case cfg.fastMin < 0 || cfg.fastMax < cfg.fastMin:
		return nil, errors.New("--fast-min must be at most --fast-max")
	case cfg.slowDelay < 0 || cfg.reportEvery <= 0 || cfg.duration < 0:
		return nil, errors.New("--slow-delay, --duration and --report-every must not be negative")
	case cfg.fastConcurrency < 1 || cfg.slowConcurrency < 1:
		return nil, errors.New("--fast-concurrency and --slow-concurrency must be at least 1")
	}
	return cfg, nil
}

func demo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseDemo(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	return runDemo(ctx, cfg, stdout, stderr)
}

// runDemo runs the demo until ctx ends or cfg.duration has passed.
func runDemo(ctx context.Context, cfg *demoConfig, stdout, stderr io.Writer) error {
	fleet, err := startDemoFleet(cfg.fleetListen)
	if err != nil {
		return fmt.Errorf("receiver fleet: %w", err)
	}
	defer fleet.Close() // after Laneway stops, so that its last attempts find the receivers
	host, err := fleetHost(cfg, fleet)
	if err != nil {
		return err
	}

	base, mode := cfg.api, "external"
	var a *app.App
	if cfg.api == "" {
		if a, err = startDemoLaneway(ctx, cfg, host, stderr); err != nil {
			return err
		}
		defer func() {
			if err := a.Stop(context.Background()); err != nil {
				fmt.Fprintln(stderr, "laneway demo: stopping:", err)
			}
		}()
		base, mode = "http://"+a.HTTPAddr(), "embedded"
	}
	c, err := client.New(base, cfg.token, client.WithTimeout(15*time.Second), client.WithUserAgent("laneway-demo"))
	if err != nil {
		return err
	}
	info, receivers, err := registerDemoEndpoints(ctx, c, cfg, fleet, host, stdout)
	if err != nil {
		return err
	}
	public := strings.TrimSuffix(cfg.publicURL, "/")
	if public == "" {
		public = strings.TrimSuffix(c.Base(), "/")
	}
	printDemoBanner(stdout, cfg, mode, public, a, fleet, host)

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, cfg.duration)
		defer cancel()
	}
	tenants := make([]string, 0, len(receivers))
	for _, r := range receivers {
		tenants = append(tenants, demoTenant(r.name))
	}
	tr := &traffic{c: c, tenants: tenants, entities: cfg.entities, coalesceShare: cfg.coalesceShare, rate: cfg.rate, workers: 16}
	trafficDone := make(chan struct{})
	go func() {
		defer close(trafficDone)
		tr.run(runCtx)
	}()
	if cfg.onReady != nil {
		cfg.onReady(info)
	}

	rep := &demoReporter{c: c, info: info, fleet: fleet, traffic: tr, start: time.Now(), w: stdout}
	tick := time.NewTicker(cfg.reportEvery)
	defer tick.Stop()
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case <-tick.C:
			if runCtx.Err() == nil {
				rep.report(ctx)
			}
		}
	}
	<-trafficDone
	reason := "interrupted"
	if ctx.Err() == nil {
		reason = fmt.Sprintf("--duration %s reached", cfg.duration)
	}
	fmt.Fprintf(stdout, "\nDemo stopped (%s): published %d events (%d failed, %d skipped because the API lagged).\n",
		reason, tr.sent.Load(), tr.failed.Load(), tr.skipped.Load())
	if e := tr.lastError(); e != "" {
		fmt.Fprintf(stdout, "Last publish error: %s\n", e)
	}
	bad := int64(0)
	for _, r := range receivers {
		bad += r.badSigs.Load()
	}
	if bad > 0 {
		fmt.Fprintf(stdout, "Receivers refused %d deliveries with a bad signature.\n", bad)
	}
	if mode == "embedded" {
		fmt.Fprintln(stdout, "Stopping Laneway…")
	}
	return nil
}

// fleetHost is the host Laneway reaches the fleet by.
func fleetHost(cfg *demoConfig, f *demoFleet) (string, error) {
	if cfg.fleetHost != "" {
		return cfg.fleetHost, nil
	}
	ap, err := netip.ParseAddrPort(f.ln.Addr().String())
	if err != nil {
		return "", err
	}
	if ip := ap.Addr(); !ip.IsUnspecified() {
		return ip.Unmap().String(), nil
	}
	return "127.0.0.1", nil
}

// startDemoLaneway starts Laneway on the embedded default, allowed to
// deliver to loopback and to the fleet's host.
func startDemoLaneway(ctx context.Context, cfg *demoConfig, host string, stderr io.Writer) (*app.App, error) {
	logger, err := newLogger(logFlags{level: cfg.logLevel, format: "text"}, stderr)
	if err != nil {
		return nil, err
	}
	allow := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("--fleet-host %q: %w", host, err)
	}
	for _, ip := range ips {
		ip = ip.Unmap()
		allow = append(allow, netip.PrefixFrom(ip, ip.BitLen()))
	}
	a, err := app.Start(ctx, app.Config{
		HTTPAddr: cfg.httpAddr, EmbeddedKafkaAddr: cfg.kafkaAddr, DataDir: cfg.dataDir,
		AdminToken: cfg.token, AllowTargets: allow, ParkAfter: cfg.parkAfter,
		InstanceID: "laneway-demo", Logger: logger,
	})
	if err != nil {
		return nil, fmt.Errorf("start Laneway: %w", err)
	}
	return a, nil
}

const slowName = "slowmart"

func demoTenant(name string) string { return "demo-" + name }

// registerDemoEndpoints creates the demo's endpoints, or reuses those an
// earlier run created for the same URLs, and gives each receiver its secret.
func registerDemoEndpoints(ctx context.Context, c *client.Client, cfg *demoConfig, f *demoFleet, host string, stdout io.Writer) (demoInfo, []*receiver, error) {
	info := demoInfo{API: c.Base()}
	existing, err := waitForAPI(ctx, c, stdout)
	if err != nil {
		return info, nil, err
	}
	// One endpoint per demo tenant: an earlier run's is reused (its URL
	// updated if the fleet moved), so restarts do not pile endpoints up.
	byTenant := map[string]client.Endpoint{}
	for _, e := range existing.Data { // sorted by id: the first one wins
		if _, dup := byTenant[e.Tenant]; !dup && strings.HasPrefix(e.Tenant, "demo-") {
			byTenant[e.Tenant] = e
		}
	}
	base := "http://" + net.JoinHostPort(host, strconv.Itoa(f.Port())) + "/ep/"
	var receivers []*receiver
	for i := range cfg.endpoints + 1 {
		name, slow, conc := fmt.Sprintf("shop-%02d", i+1), false, cfg.fastConcurrency
		r := (*receiver)(nil)
		if i == cfg.endpoints {
			name, slow, conc = slowName, true, cfg.slowConcurrency
			r = f.add(name, true, cfg.slowDelay, cfg.slowDelay)
		} else {
			r = f.add(name, false, cfg.fastMin, cfg.fastMax)
		}
		id, secret, err := ensureDemoEndpoint(ctx, c, byTenant[demoTenant(name)], demoTenant(name), base+name, conc)
		if err != nil {
			return info, nil, fmt.Errorf("endpoint for %s: %w", name, err)
		}
		if err := r.verifier.SetSecret(secret); err != nil {
			return info, nil, fmt.Errorf("endpoint for %s: secret: %w", name, err)
		}
		if slow {
			info.SlowID = id
		} else {
			info.FastIDs = append(info.FastIDs, id)
		}
		receivers = append(receivers, r)
	}
	return info, receivers, nil
}

// waitForAPI lists the endpoints, retrying for a minute while the API is
// not reachable yet (a Laneway started alongside the demo).
func waitForAPI(ctx context.Context, c *client.Client, stdout io.Writer) (client.EndpointList, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	told := false
	for {
		l, err := c.ListEndpoints(ctx, client.ListEndpointsOptions{})
		var ae *client.APIError
		if err == nil || errors.As(err, &ae) && ae.StatusCode != 503 {
			return l, err // an API answer other than "retry" is final
		}
		if !told {
			fmt.Fprintf(stdout, "Waiting for the Laneway API at %s (%v)…\n", c.Base(), err)
			told = true
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return l, fmt.Errorf("the Laneway API at %s did not answer: %w", c.Base(), err)
		case <-t.C:
		}
	}
}

func ensureDemoEndpoint(ctx context.Context, c *client.Client, old client.Endpoint, tenant, url string, conc int) (id, secret string, err error) {
	if old.ID == "" {
		ep, err := c.CreateEndpoint(ctx, client.NewEndpoint{Tenant: tenant, URL: url, MaxConcurrency: conc})
		return ep.ID, ep.Secret, err
	}
	var u client.EndpointUpdate
	if old.URL != url {
		u.URL = &url
	}
	if old.MaxConcurrency != conc {
		u.MaxConcurrency = &conc
	}
	if old.Status != "active" {
		active := "active"
		u.Status = &active
	}
	if u != (client.EndpointUpdate{}) {
		if _, err := c.UpdateEndpoint(ctx, old.ID, u); err != nil {
			return "", "", err
		}
	}
	if old.Paused {
		if _, err := c.ResumeEndpoint(ctx, old.ID); err != nil {
			return "", "", err
		}
	}
	s, err := c.RevealSecret(ctx, old.ID)
	if err != nil {
		return "", "", err
	}
	if len(s.Secrets) == 0 {
		return "", "", errors.New("the endpoint has no valid secret")
	}
	return old.ID, s.Secrets[0].Secret, nil
}

func printDemoBanner(w io.Writer, cfg *demoConfig, mode, public string, a *app.App, f *demoFleet, host string) {
	auth := ""
	if cfg.token != "" {
		auth = ` -H "Authorization: Bearer $LANEWAY_ADMIN_TOKEN"`
	}
	fmt.Fprintf(w, "\nLaneway demo is running")
	if a != nil {
		store := "in memory"
		if cfg.dataDir != "" {
			store = "persisted to " + cfg.dataDir
		}
		fmt.Fprintf(w, " on the embedded default (Kafka %s and Redis in-process, %s).\n", strings.Join(a.Brokers(), ","), store)
	} else {
		fmt.Fprintf(w, " against %s (%s mode: no Laneway started here).\n", public, mode)
	}
	fleetURL := "http://" + net.JoinHostPort(host, strconv.Itoa(f.Port())) + "/ep/…"
	fmt.Fprintf(w, `
  Console:  %[1]s/
  API:      %[1]s
  Fleet:    %[2]s (listening on %[3]s)
            %[4]d customers answer in %[5]s–%[6]s (max_concurrency %[7]d);
            %[8]s answers in %[9]s with max_concurrency %[10]d: it can take %.1[11]f deliveries/s
  Traffic:  %.0[12]f events/s over %[13]d customers × %[14]d orders (%.0[15]f%% coalescing state updates),
            about %.1[16]f/s for each customer

Open the console and watch %[8]s's lane grow while the others stay green. Or ask the API:
  curl -s%[17]s '%[1]s/v1/endpoints?sort=oldest_pending_age&limit=5'
  curl -s%[17]s %[1]s/v1/health
  laneway endpoints list --api %[1]s --sort oldest_pending_age --limit 5

Every %[18]s: the slow lane against the others (Ctrl-C to stop).
`, public, fleetURL, f.ln.Addr(), cfg.endpoints, cfg.fastMin, cfg.fastMax, cfg.fastConcurrency,
		demoTenant(slowName), cfg.slowDelay, cfg.slowConcurrency, float64(cfg.slowConcurrency)/max(cfg.slowDelay.Seconds(), 0.001),
		cfg.rate, cfg.endpoints+1, cfg.entities, cfg.coalesceShare*100, cfg.rate/float64(cfg.endpoints+1), auth, cfg.reportEvery)
}

// demoReporter prints one line per interval: the slow endpoint's oldest
// pending age against the others', read from the API, and the healthy
// receivers' latency p99 measured by the fleet.
type demoReporter struct {
	c       *client.Client
	info    demoInfo
	fleet   *demoFleet
	traffic *traffic
	start   time.Time
	w       io.Writer

	lastSent int64
	lastAt   time.Time
}

func (r *demoReporter) report(ctx context.Context) {
	now := time.Now()
	sent := r.traffic.sent.Load()
	since := r.lastAt
	if since.IsZero() {
		since = r.start
	}
	rate := float64(sent-r.lastSent) / max(now.Sub(since).Seconds(), 0.001)
	r.lastSent, r.lastAt = sent, now
	lat := r.fleet.takeLatencies()
	p99 := "-"
	if d, err := percentile(lat, 0.99); err == nil {
		p99 = d.Round(time.Millisecond).String()
	}
	prefix := fmt.Sprintf("[%5s] published %d (%.0f/s)", now.Sub(r.start).Round(time.Second), sent, rate)

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	l, err := r.c.ListEndpoints(ctx, client.ListEndpointsOptions{})
	if err != nil {
		fmt.Fprintf(r.w, "%s | API: %v\n", prefix, err)
		return
	}
	fast := map[string]bool{}
	for _, id := range r.info.FastIDs {
		fast[id] = true
	}
	var slow client.EndpointHealth
	var othersOldest float64
	var othersDelivered int64
	for _, e := range l.Data {
		if e.Health == nil {
			continue
		}
		switch {
		case e.ID == r.info.SlowID:
			slow = *e.Health
		case fast[e.ID]:
			othersOldest = max(othersOldest, e.Health.OldestPendingAgeSeconds)
			othersDelivered += e.Health.PerMinute.Delivered
		}
	}
	state := fmt.Sprintf("%d pending, %d in flight", slow.Pending, slow.InFlight)
	if slow.ParkedReason != "" || slow.Parked > 0 {
		state = fmt.Sprintf("PARKED (%s), %d in the parked topic, %d pending, %d in flight", orDash(slow.ParkedReason), slow.Parked, slow.Pending, slow.InFlight)
	}
	fmt.Fprintf(r.w, "%s | %s: oldest pending %s, %s | %d others: oldest pending %s, p99 %s, %d delivered in the last minute\n",
		prefix, demoTenant(slowName), fmtSeconds(slow.OldestPendingAgeSeconds), state,
		len(r.info.FastIDs), fmtSeconds(othersOldest), p99, othersDelivered)
}
