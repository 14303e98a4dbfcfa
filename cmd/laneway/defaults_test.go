package main

import (
	"flag"
	"io"
	"reflect"
	"testing"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/engine"
	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/embedded"
	"github.com/laneway/laneway/internal/inbound"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/connlimit"
	"github.com/laneway/laneway/partition"
)

// TestFlagDefaultsAreThePackageDefaults: what `serve` runs with when given
// nothing is, field by field, what each package takes for a zero field, so
// a default changed in one place cannot leave the flags (or the help that
// prints them) behind. A new flag with a default of its own fails here
// until its package's default is added to want.
func TestFlagDefaultsAreThePackageDefaults(t *testing.T) {
	got, _, err := parseServe(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// The topics as topics itself fills a zero Config in (names, sizes and
	// retentions); the replication factor has no flag.
	tc := topics.Config{}.WithDefaults()
	tc.ReplicationFactor = 0
	want := app.Config{
		EmbeddedKafkaAddr: embedded.DefaultKafkaAddr, DataDir: "laneway-data", // the command's own: app's zero is memory
		HTTPAddr: app.DefaultHTTPAddr, GroupPrefix: topics.DefaultPrefix, Topics: tc,
		HTTPLimits:             app.ServerLimits{ReadTimeout: app.DefaultReadTimeout, IdleTimeout: app.DefaultIdleTimeout, MaxHeaderBytes: app.DefaultMaxHeaderBytes},
		Conns:                  connlimit.Limits{Total: connlimit.DefaultTotal(), PerAddress: connlimit.DefaultPerAddress},
		InboundRateLimits:      inbound.RateLimits{PerAddress: inbound.DefaultPerAddressRate, PerSource: inbound.DefaultPerSourceRate},
		InboundRefusedKeepRate: inbound.DefaultRefusedKeepRate,
		FeedAuthLimit:          api.FeedAuthLimit{Failures: api.DefaultFeedAuthFailures, Window: api.DefaultFeedAuthWindow},
		AttemptTimeout:         deliver.DefaultTimeout,
		Retry:                  deliver.RetryPolicy{Base: deliver.DefaultRetryBase, Max: deliver.DefaultRetryMax, MaxAttempts: deliver.DefaultMaxAttempts, MaxAge: deliver.DefaultMaxAge},
		Breaker:                breaker.Config{Threshold: breaker.DefaultThreshold, FirstPause: breaker.DefaultFirstPause, MaxPause: breaker.DefaultMaxPause},
		CommitInterval:         engine.DefaultCommitInterval, InstanceBytes: engine.DefaultInstanceBytes, MaxInFlight: engine.DefaultMaxInFlight(),
		DisableAfter: partition.DefaultDisableAfter, ParkAfter: partition.DefaultParkAfter,
		LaneBuffer: partition.DefaultLaneBuffer, LaneBytes: partition.DefaultLaneBytes,
		SessionTimeout: app.DefaultSessionTimeout, SecretOverlap: api.DefaultSecretOverlap,
	}
	sameFields(t, "serve", got, want)

	demo, err := parseDemo(nil, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if demo.httpAddr != app.DefaultHTTPAddr || demo.kafkaAddr != embedded.DefaultKafkaAddr || demo.parkAfter != partition.DefaultParkAfter {
		t.Errorf("demo defaults to --http-addr %s --embedded-kafka-addr %s --park-after %s, not the packages' %s %s %s",
			demo.httpAddr, demo.kafkaAddr, demo.parkAfter, app.DefaultHTTPAddr, embedded.DefaultKafkaAddr, partition.DefaultParkAfter)
	}
	cf := &clientFlags{}
	cf.bind(flag.NewFlagSet("client", flag.ContinueOnError), false)
	if cf.api != "http://"+app.DefaultHTTPAddr {
		t.Errorf("the client's --api defaults to %s, not the server's address %s", cf.api, app.DefaultHTTPAddr)
	}
}

// sameFields reports each field of got that differs from want.
func sameFields(t *testing.T, cmd string, got, want app.Config) {
	t.Helper()
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		if a, b := g.Field(i).Interface(), w.Field(i).Interface(); !reflect.DeepEqual(a, b) {
			t.Errorf("%s: %s defaults to %+v, the package to %+v", cmd, g.Type().Field(i).Name, a, b)
		}
	}
}
