package app_test

// The engine integration tests' kit: the helpers more than one test file
// uses to run Laneway, feed it and watch it. A helper only one test uses
// stays beside that test.
//
//	kit_test.go            running an app (appConfig, startApp, startWith,
//	                       scenario, shareCluster, testLogger) and its admin
//	                       API (apiClient, endpoint status, dead letters and
//	                       redrives through the API)
//	kit_events_test.go     events in (envelope, publishTo, publish,
//	                       publishEvents) and dead letters out (readDeadLetters)
//	kit_receivers_test.go  the receivers (internal/testkit/fleet): a fleet's
//	                       subscriptions and the checks of what it received,
//	                       and a Recorder, which records failed requests too
//	kit_wait_test.go       waiting on the engine: deliveries, endpoint state,
//	                       consumer groups; reading its metrics (once: a test
//	                       waits on the engine's events, app.Config.OnEvent)
//	kit_process_test.go    a real laneway process against the real broker

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/ops/deadletter"
	"github.com/laneway/laneway/internal/ops/jobs"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// appConfig is the config the tests run Laneway with on backend b: topics,
// groups and an instance id of its own, named from prefix.
func appConfig(t *testing.T, b testenv.Backend, prefix string) app.Config {
	t.Helper()
	ns := testenv.Unique(prefix)
	cfg := app.Config{
		KafkaBrokers: b.Brokers, RedisURL: b.RedisURL, HTTPAddr: "127.0.0.1:0",
		Secrets:        app.SecretsConfig{Ring: testenv.SecretsRing(t)},
		Topics:         topicsOf(ns, 4),
		GroupPrefix:    ns,
		InstanceID:     ns,
		AllowTargets:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Retry:          deliver.RetryPolicy{Base: 50 * time.Millisecond, Max: time.Second, MaxAttempts: 5, MaxAge: time.Hour},
		CommitInterval: 200 * time.Millisecond,
		// Small enough that the end-to-end burst parks lanes, so ordering
		// and exactly-the-subscribed checks cover the parked path too.
		LaneBuffer: 500,
		Logger:     testenv.Logger(),
	}
	if b.Name == testenv.Embedded.Name {
		cfg.EmbeddedKafkaAddr = "127.0.0.1:0"
	}
	return cfg
}

// topicsOf names every topic of a run after ns.
func topicsOf(ns string, partitions int32) topics.Config {
	return topics.Config{
		Events: ns + ".events", Deliveries: ns + ".deliveries", Parked: ns + ".parked",
		Dead: ns + ".dead", Endpoints: ns + ".endpoints", Inbound: ns + ".inbound", Sources: ns + ".sources", FeedPrefix: ns + ".feed.", BatchPrefix: ns + ".batch.",
		Partitions: partitions,
	}
}

// startApp runs a Laneway on backend b with topics and groups of its own.
func startApp(t *testing.T, b testenv.Backend, tweak func(*app.Config)) *app.App {
	t.Helper()
	cfg := appConfig(t, b, "e2e")
	if tweak != nil {
		tweak(&cfg)
	}
	return startWith(t, cfg)
}

// startWith runs a Laneway on cfg until the test ends.
func startWith(t *testing.T, cfg app.Config) *app.App {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := app.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start laneway: %v", err)
	}
	t.Cleanup(func() { stopApp(t, a) })
	return a
}

// stopApp stops a as a shutdown does, logging rather than failing on what
// the stops report: several tests stop an instance whose Kafka or Redis is
// already gone. A second stop does nothing.
func stopApp(t *testing.T, a *app.App) {
	t.Helper()
	if err := a.Stop(context.Background()); err != nil {
		t.Logf("stopping laneway: %v", err)
	}
}

// shareCluster makes c an instance of a cluster of several: the events,
// deliveries, parked, dead and endpoints topics and the groups are ns's,
// the instance is ns-instance.
func shareCluster(c *app.Config, ns, instance string) {
	c.Topics.Events, c.Topics.Deliveries, c.Topics.Parked = ns+".events", ns+".deliveries", ns+".parked"
	c.Topics.Dead, c.Topics.Endpoints = ns+".dead", ns+".endpoints"
	c.GroupPrefix, c.InstanceID = ns, ns+"-"+instance
}

// scenario starts a receiver fleet and a Laneway on b; both stop when the
// test ends, Laneway first, so its last attempts still find the receivers.
func scenario(t *testing.T, b testenv.Backend, tweak func(*app.Config)) (*fleet.Fleet, *app.App, apiClient) {
	t.Helper()
	f, err := fleet.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	a := startApp(t, b, tweak)
	return f, a, newAPI(t, a.HTTPAddr())
}

// apiClient calls the admin API of the Laneway at base.
type apiClient struct {
	t    *testing.T
	base string
}

// newAPI is the client of the admin API listening on addr.
func newAPI(t *testing.T, addr string) apiClient { return apiClient{t: t, base: "http://" + addr} }

func (c apiClient) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

type createdEndpoint struct {
	ID     string `json:"id"`
	Secret string `json:"secret"`
}

func (c apiClient) createEndpoint(body map[string]any) createdEndpoint {
	c.t.Helper()
	code, out := c.do("POST", "/v1/endpoints", body)
	if code != http.StatusCreated {
		c.t.Fatalf("create endpoint: %d %s", code, out)
	}
	var ep createdEndpoint
	if err := json.Unmarshal(out, &ep); err != nil || ep.ID == "" || ep.Secret == "" {
		c.t.Fatalf("create endpoint response %s: %v", out, err)
	}
	return ep
}

// endpointStatus is the endpoint's status as GET /v1/endpoints/{id} shows
// it, "" while that instance does not know the endpoint (404).
func endpointStatus(t *testing.T, api apiClient, id string) string {
	t.Helper()
	code, out := api.do("GET", "/v1/endpoints/"+id, nil)
	if code == http.StatusNotFound {
		return ""
	}
	if code != http.StatusOK {
		t.Fatalf("GET endpoint: %d %s", code, out)
	}
	var ep struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &ep); err != nil {
		t.Fatalf("GET endpoint: %v: %s", err, out)
	}
	return ep.Status
}

// waitForAPIStatus polls the API until the endpoint has status want.
func waitForAPIStatus(t *testing.T, api apiClient, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		got := endpointStatus(t, api, id)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint %s status %q, want %q", id, got, want)
		}
		<-poll.C
	}
}

// waitDeadLetters pages through GET /v1/dead until the endpoint has want
// dead letters.
func waitDeadLetters(t *testing.T, api apiClient, endpointID string, want int) []deadletter.Letter {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var all []deadletter.Letter
		cursor := ""
		for {
			q := url.Values{"endpoint_id": {endpointID}, "limit": {"100"}, "cursor": {cursor}}
			code, out := api.do("GET", "/v1/dead?"+q.Encode(), nil)
			if code != http.StatusOK {
				t.Fatalf("GET /v1/dead: %d %s", code, out)
			}
			var page deadletter.Page
			if err := json.Unmarshal(out, &page); err != nil {
				t.Fatal(err)
			}
			all = append(all, page.Items...)
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		if len(all) >= want {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d dead letters for %s, want %d", len(all), endpointID, want)
		}
		time.Sleep(100 * time.Millisecond) // polling the API: dead letters have no change feed
	}
}

// startRedrive asks the API to redrive the endpoint's dead letters.
func startRedrive(t *testing.T, api apiClient, endpointID string) deadletter.Job {
	t.Helper()
	code, out := api.do("POST", "/v1/dead/redrive", map[string]any{"endpoint_id": endpointID})
	if code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("redrive: %d %s", code, out)
	}
	var job deadletter.Job
	if err := json.Unmarshal(out, &job); err != nil || job.ID == "" {
		t.Fatalf("redrive response %s: %v", out, err)
	}
	return job
}

// waitRedrive polls redrive job id until it no longer runs.
func waitRedrive(t *testing.T, api apiClient, id string) deadletter.Job {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, out := api.do("GET", "/v1/redrives/"+id, nil)
		var job deadletter.Job
		if code != http.StatusOK || json.Unmarshal(out, &job) != nil {
			t.Fatalf("GET /v1/redrives/%s: %d %s", id, code, out)
		}
		if job.Status != jobs.StatusRunning {
			return job
		}
		if time.Now().After(deadline) {
			t.Fatalf("redrive %s still running: %+v", id, job)
		}
		time.Sleep(50 * time.Millisecond) // polling the job's progress
	}
}
