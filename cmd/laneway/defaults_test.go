package main

import (
	"flag"
	"io"
	"testing"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/embedded"
	"github.com/laneway/laneway/internal/inbound"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/partition"
)

// serveOnlyDefaults are the serve flags whose defaults are the command's
// own policy, declared nowhere else: a zero Config field means something
// else (DataDir: memory) or there is no Config field (the logger's).
var serveOnlyDefaults = map[string]bool{"data-dir": true, "log-level": true, "log-format": true}

// TestFlagDefaultsAreThePackageDefaults: what `serve` and `demo` run with
// when given nothing is what each package takes for a zero field, so a
// default changed in one place cannot leave the flags (or the help that
// prints them) behind. Every serve flag with a default must be listed.
func TestFlagDefaultsAreThePackageDefaults(t *testing.T) {
	cfg, _, err := parseServe(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	serve := map[string][2]any{ // flag: parsed value, package default
		"embedded-kafka-addr":       {cfg.EmbeddedKafkaAddr, embedded.DefaultKafkaAddr},
		"http-addr":                 {cfg.HTTPAddr, app.DefaultHTTPAddr},
		"http-read-timeout":         {cfg.HTTPLimits.ReadTimeout, app.DefaultReadTimeout},
		"http-idle-timeout":         {cfg.HTTPLimits.IdleTimeout, app.DefaultIdleTimeout},
		"http-max-header-bytes":     {cfg.HTTPLimits.MaxHeaderBytes, app.DefaultMaxHeaderBytes},
		"inbound-rate-per-address":  {cfg.InboundRateLimits.PerAddress, inbound.DefaultPerAddressRate},
		"inbound-rate-per-source":   {cfg.InboundRateLimits.PerSource, inbound.DefaultPerSourceRate},
		"inbound-refused-keep-rate": {cfg.InboundRefusedKeepRate, inbound.DefaultRefusedKeepRate},
		"topic-prefix":              {cfg.Topics.Events, topics.Config{}.WithPrefix(topics.DefaultPrefix).Events},
		"group-prefix":              {cfg.GroupPrefix, topics.DefaultPrefix},
		"partitions":                {cfg.Topics.Partitions, int32(topics.DefaultPartitions)},
		"events-retention":          {cfg.Topics.EventsRetention, topics.DefaultEventsRetention},
		"deliveries-retention":      {cfg.Topics.DeliveriesRetention, topics.DefaultDeliveriesRetention},
		"dead-retention":            {cfg.Topics.DeadRetention, topics.DefaultDeadRetention},
		"inbound-retention":         {cfg.Topics.InboundRetention, topics.DefaultInboundRetention},
		"feed-retention":            {cfg.Topics.FeedRetention, topics.DefaultFeedRetention},
		"attempt-timeout":           {cfg.AttemptTimeout, deliver.DefaultTimeout},
		"retry-base":                {cfg.Retry.Base, deliver.DefaultRetryBase},
		"retry-max":                 {cfg.Retry.Max, deliver.DefaultRetryMax},
		"max-attempts":              {cfg.Retry.MaxAttempts, deliver.DefaultMaxAttempts},
		"max-age":                   {cfg.Retry.MaxAge, deliver.DefaultMaxAge},
		"commit-interval":           {cfg.CommitInterval, engine.DefaultCommitInterval},
		"breaker-threshold":         {cfg.Breaker.Threshold, breaker.DefaultThreshold},
		"breaker-pause":             {cfg.Breaker.FirstPause, breaker.DefaultFirstPause},
		"breaker-max-pause":         {cfg.Breaker.MaxPause, breaker.DefaultMaxPause},
		"disable-after":             {cfg.DisableAfter, partition.DefaultDisableAfter},
		"session-timeout":           {cfg.SessionTimeout, app.DefaultSessionTimeout},
		"park-after":                {cfg.ParkAfter, partition.DefaultParkAfter},
		"lane-buffer":               {cfg.LaneBuffer, partition.DefaultLaneBuffer},
		"lane-bytes":                {cfg.LaneBytes, int64(partition.DefaultLaneBytes)},
		"instance-bytes":            {cfg.InstanceBytes, int64(engine.DefaultInstanceBytes)},
		"max-inflight":              {cfg.MaxInFlight, engine.DefaultMaxInFlight()},
		"secret-overlap":            {cfg.SecretOverlap, api.DefaultSecretOverlap},
	}
	checkDefaults(t, "serve", serve)
	// The topics as a whole: the flags give what a zero topics.Config
	// would take, names and sizes alike.
	if got, want := cfg.Topics.WithDefaults(), (topics.Config{}).WithDefaults(); got != want {
		t.Errorf("serve's topics = %+v, want topics' defaults %+v", got, want)
	}

	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	serveFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		switch f.DefValue {
		case "", "0", "0s", "false":
			return
		}
		if _, ok := serve[f.Name]; !ok && !serveOnlyDefaults[f.Name] {
			t.Errorf("serve --%s has the default %s: add it here beside the package constant it must equal", f.Name, f.DefValue)
		}
	})

	demo, err := parseDemo(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	checkDefaults(t, "demo", map[string][2]any{
		"http-addr":           {demo.httpAddr, app.DefaultHTTPAddr},
		"embedded-kafka-addr": {demo.kafkaAddr, embedded.DefaultKafkaAddr},
		"park-after":          {demo.parkAfter, partition.DefaultParkAfter},
	})

	cf := &clientFlags{}
	cf.bind(flag.NewFlagSet("client", flag.ContinueOnError), false)
	checkDefaults(t, "client", map[string][2]any{"api": {cf.api, "http://" + app.DefaultHTTPAddr}})
}

func checkDefaults(t *testing.T, cmd string, flags map[string][2]any) {
	t.Helper()
	for name, v := range flags {
		if v[0] != v[1] {
			t.Errorf("%s --%s defaults to %v (%T), the package to %v (%T)", cmd, name, v[0], v[0], v[1], v[1])
		}
	}
}
