package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/admin/client"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/poll"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

const testToken = "cli-test-00900eed4bb8e0bcf56f564bc1b2eb93"

// startLaneway runs Laneway on the embedded default, in memory, with the
// admin token, delivering to loopback.
func startLaneway(t *testing.T) *app.App {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := app.Start(ctx, app.Config{
		HTTPAddr: "127.0.0.1:0", EmbeddedKafkaAddr: "127.0.0.1:0", DataDir: "",
		AdminToken:     testToken,
		AllowTargets:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Retry:          deliver.RetryPolicy{Base: 50 * time.Millisecond, Max: time.Second, MaxAttempts: 3, MaxAge: time.Hour},
		CommitInterval: 200 * time.Millisecond,
		Logger:         testenv.Logger(),
	})
	if err != nil {
		t.Fatalf("start laneway: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Stop(context.Background()); err != nil {
			t.Logf("stopping laneway: %v", err)
		}
	})
	return a
}

// cliRunner runs `laneway` commands in-process with LANEWAY_API and
// LANEWAY_ADMIN_TOKEN set, as a user's shell would.
type cliRunner struct {
	t   *testing.T
	env map[string]string
}

func newCLI(t *testing.T, base string) *cliRunner {
	r := &cliRunner{t: t, env: map[string]string{"LANEWAY_API": base, "LANEWAY_ADMIN_TOKEN": testToken}}
	old := getenv
	getenv = func(k string) string { return r.env[k] }
	t.Cleanup(func() { getenv = old })
	return r
}

func (r *cliRunner) exec(stdin string, args ...string) (string, error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, args, strings.NewReader(stdin), &out, &errOut)
	return out.String() + errOut.String(), err
}

// ok runs a command that must succeed and returns its output.
func (r *cliRunner) ok(args ...string) string {
	r.t.Helper()
	return r.okIn("", args...)
}

func (r *cliRunner) okIn(stdin string, args ...string) string {
	r.t.Helper()
	out, err := r.exec(stdin, args...)
	if err != nil {
		r.t.Fatalf("laneway %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// fails runs a command that must fail and returns its error text.
func (r *cliRunner) fails(args ...string) string {
	r.t.Helper()
	out, err := r.exec("", args...)
	if err == nil {
		r.t.Fatalf("laneway %s succeeded:\n%s", strings.Join(args, " "), out)
	}
	return err.Error()
}

// jsonOf runs a command with -o json and decodes its one document.
func (r *cliRunner) jsonOf(v any, args ...string) {
	r.t.Helper()
	r.jsonIn("", v, args...)
}

func (r *cliRunner) jsonIn(stdin string, v any, args ...string) {
	r.t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := run(ctx, append(args, "-o", "json"), strings.NewReader(stdin), &out, io.Discard); err != nil {
		r.t.Fatalf("laneway %s -o json: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(v); err != nil {
		r.t.Fatalf("laneway %s -o json: not JSON: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	if dec.More() {
		r.t.Fatalf("laneway %s -o json printed more than one document", strings.Join(args, " "))
	}
}

func mustContain(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}

// eventually polls cond every 100ms until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if poll.Until(ctx, 100*time.Millisecond, cond) != nil {
		t.Fatalf("timed out after %s waiting for %s", within, what)
	}
}

// receiver counts deliveries and answers with a fixed status.
type testReceiver struct {
	srv  *httptest.Server
	hits atomic.Int64
	mu   sync.Mutex
	ents map[string]int
}

func newReceiver(t *testing.T, status int) *testReceiver {
	r := &testReceiver{ents: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var p struct {
			Entity struct{ ID string } `json:"entity"`
		}
		_ = json.NewDecoder(req.Body).Decode(&p)
		r.mu.Lock()
		r.ents[p.Entity.ID]++
		r.mu.Unlock()
		r.hits.Add(1)
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *testReceiver) got(entity string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ents[entity] > 0
}

var idLine = regexp.MustCompile(`(?m)^id\s+(ep_\S+)$`)

func TestCLIAgainstARunningLaneway(t *testing.T) {
	a := startLaneway(t)
	base := "http://" + a.HTTPAddr()
	cli := newCLI(t, base)
	api, err := client.New(base, testToken)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := newReceiver(t, http.StatusNoContent)
	tooLarge := newReceiver(t, http.StatusRequestEntityTooLarge)
	start := time.Now()

	// create: table shows the secret once; json is the API's document.
	out := cli.ok("endpoints", "create", "--tenant", "acme", "--url", good.srv.URL+"/hooks",
		"--event-types", "order.updated,order.created", "--max-concurrency", "2")
	mustContain(t, out, "tenant", "acme", "event_types", "order.updated,order.created", "secret", "whsec_", "Keep the secret")
	m := idLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no id line:\n%s", out)
	}
	goodID := m[1]
	firstSecret := regexp.MustCompile(`(?m)^secret\s+(whsec_\S+)$`).FindStringSubmatch(out)[1]
	var dead client.Endpoint
	cli.jsonOf(&dead, "endpoints", "create", "--tenant", "acme", "--url", tooLarge.srv.URL, "--event-types", "order.updated")
	if !strings.HasPrefix(dead.ID, "ep_") || !strings.HasPrefix(dead.Secret, "whsec_") || dead.MaxConcurrency != 4 {
		t.Fatalf("create -o json = %+v", dead)
	}
	var other client.Endpoint
	cli.jsonOf(&other, "endpoints", "create", "--tenant", "globex", "--url", good.srv.URL+"/globex")

	// The API's error body reaches the user, field included, and the command fails.
	msg := cli.fails("endpoints", "create", "--tenant", "acme", "--url", good.srv.URL, "--max-concurrency", "-1")
	mustContain(t, msg, "400", "max_concurrency", "(field: max_concurrency)")
	mustContain(t, cli.fails("endpoints", "get", "ep_missing"), "404", "endpoint not found")
	mustContain(t, cli.fails("endpoints", "list", "--token", "wrong"), "401", "missing or invalid bearer token")
	mustContain(t, cli.fails("endpoints", "create", "--tenant", "acme"), "--url are required")
	mustContain(t, cli.fails("endpoints", "list", "-o", "yaml"), "-o must be table or json")

	t.Run("list and get", func(t *testing.T) {
		out := cli.ok("endpoints", "list", "--tenant", "acme")
		mustContain(t, out, "ID", "TENANT", "MAX_CONC", "OLDEST_PENDING", "BREAKER", goodID, dead.ID)
		if strings.Contains(out, other.ID) {
			t.Fatalf("--tenant acme listed globex's endpoint:\n%s", out)
		}
		var l client.EndpointList
		cli.jsonOf(&l, "endpoints", "list")
		if len(l.Data) != 3 {
			t.Fatalf("list -o json: %d endpoints, want 3", len(l.Data))
		}
		cli.jsonOf(&l, "endpoints", "list", "--sort", "oldest_pending_age", "--limit", "1")
		if len(l.Data) != 1 || l.Data[0].Health == nil {
			t.Fatalf("--sort oldest_pending_age --limit 1 = %+v", l.Data)
		}
		mustContain(t, cli.fails("endpoints", "list", "--sort", "newest"), "(field: sort)")

		out = cli.ok("endpoints", "get", goodID) // positional first, flags from the environment
		mustContain(t, out, "id", goodID, "max_concurrency", "2", "health:", "oldest_pending_age", "breaker", "closed")
		var e client.Endpoint
		cli.jsonOf(&e, "endpoints", "get", "-o", "json", goodID) // flags before the argument too
		if e.ID != goodID || e.Health == nil || e.Secret != "" {
			t.Fatalf("get -o json = %+v", e)
		}
	})

	t.Run("update", func(t *testing.T) {
		out := cli.ok("endpoints", "update", goodID, "--max-concurrency", "8", "--event-types", "order.updated,order.created,order.deleted")
		mustContain(t, out, "max_concurrency", "8", "order.updated,order.created,order.deleted")
		var e client.Endpoint
		cli.jsonOf(&e, "endpoints", "update", other.ID, "--url", good.srv.URL+"/moved", "--event-types", "")
		if e.URL != good.srv.URL+"/moved" || len(e.EventTypes) != 0 {
			t.Fatalf("update -o json = %+v", e)
		}
		got, err := api.GetEndpoint(ctx, goodID)
		if err != nil || got.MaxConcurrency != 8 || len(got.EventTypes) != 3 {
			t.Fatalf("after update: %+v, %v", got, err)
		}
		cli.ok("endpoints", "update", other.ID, "--status", "disabled")
		if got, _ := api.GetEndpoint(ctx, other.ID); got.Status != "disabled" {
			t.Fatalf("status = %q, want disabled", got.Status)
		}
		cli.ok("endpoints", "update", other.ID, "--status", "active")
		mustContain(t, cli.fails("endpoints", "update", goodID), "nothing to change")
		mustContain(t, cli.fails("endpoints", "update", goodID, "--status", "sleeping"), "(field: status)")
	})

	t.Run("pause and resume", func(t *testing.T) {
		mustContain(t, cli.ok("endpoints", "pause", goodID), "paused", "yes")
		if got, _ := api.GetEndpoint(ctx, goodID); !got.Paused {
			t.Fatal("pause did not pause")
		}
		var e client.Endpoint
		cli.jsonOf(&e, "endpoints", "resume", goodID)
		if e.Paused {
			t.Fatal("resume -o json still paused")
		}
		if got, _ := api.GetEndpoint(ctx, goodID); got.Paused {
			t.Fatal("resume did not resume")
		}
	})

	t.Run("rotate secret", func(t *testing.T) {
		out := cli.ok("endpoints", "rotate-secret", goodID, "--overlap", "1h")
		mustContain(t, out, "SECRET", "EXPIRES_AT", "never (current)", firstSecret)
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, firstSecret) {
				exp, err := time.Parse(time.RFC3339, strings.TrimSpace(strings.TrimPrefix(line, firstSecret)))
				if err != nil || exp.Before(time.Now().Add(50*time.Minute)) || exp.After(time.Now().Add(61*time.Minute)) {
					t.Fatalf("old secret's expiry %q (%v), want about an hour from now", line, err)
				}
			}
		}
		var s client.Secrets
		cli.jsonOf(&s, "endpoints", "secret", goodID)
		if len(s.Secrets) != 2 || s.Secrets[0].ExpiresAt != nil || s.Secrets[1].Secret != firstSecret || s.Secrets[1].ExpiresAt == nil {
			t.Fatalf("secrets after rotation = %+v", s)
		}
	})

	t.Run("publish", func(t *testing.T) {
		ndjson := `{"type":"order.updated","tenant":"acme","entity":"order:1","revision":1,"data":{"status":"paid"}}
{"type":"order.updated","tenant":"acme","entity":"order:2","revision":1,"data":{"status":"paid"}}

{"type":"order.created","tenant":"acme","entity":"order:3","revision":1}
{"tenant":"acme","entity":"order:4"}
not json
`
		out, err := cli.exec(ndjson, "publish")
		if err == nil || !strings.Contains(err.Error(), "2 of 5 events failed") {
			t.Fatalf("publish with bad lines: err %v\n%s", err, out)
		}
		mustContain(t, out, "LINE", "STATUS", "3 accepted, 0 duplicate, 2 failed", "line is not valid JSON", "invalid event")
		for _, l := range []string{"1", "2", "4"} {
			if !regexp.MustCompile(`(?m)^` + l + `\s+accepted\s+\S+`).MatchString(out) {
				t.Fatalf("line %s not accepted:\n%s", l, out)
			}
		}
		if !regexp.MustCompile(`(?m)^5\s+failed`).MatchString(out) || !regexp.MustCompile(`(?m)^6\s+failed`).MatchString(out) {
			t.Fatalf("lines 5 and 6 not failed:\n%s", out)
		}

		single := "{\n  \"type\": \"order.updated\",\n  \"tenant\": \"acme\",\n  \"entity\": \"order:5\",\n  \"revision\": 1\n}\n"
		var res struct {
			Data                         []publishResult `json:"data"`
			Accepted, Duplicates, Failed int
		}
		cli.jsonIn(single, &res, "publish", "--idempotency-key", "order-5-1")
		if len(res.Data) != 1 || res.Data[0].Status != "accepted" || res.Accepted != 1 {
			t.Fatalf("publish -o json = %+v", res)
		}
		out = cli.okIn(single, "publish", "--idempotency-key", "order-5-1")
		mustContain(t, out, "duplicate", res.Data[0].ID, "0 accepted, 1 duplicate, 0 failed")
		if _, err := cli.exec(ndjson, "publish", "--idempotency-key", "k"); err == nil || !strings.Contains(err.Error(), "exactly one JSON event") {
			t.Fatalf("--idempotency-key with NDJSON: %v", err)
		}
		eventually(t, 20*time.Second, "deliveries of order:1, 2, 3 and 5", func() bool {
			return good.got("order:1") && good.got("order:2") && good.got("order:3") && good.got("order:5")
		})
	})

	t.Run("events list", func(t *testing.T) {
		mustContain(t, cli.fails("events", "list", "--tenant", "acme"), "--since is required")
		out := cli.ok("events", "list", "--since", "5m", "--tenant", "acme")
		mustContain(t, out, "ID", "TYPE", "ENTITY", "ACCEPTED_AT", "order:1", "order:2", "order:3", "order:5", "order.created")
		var page struct {
			Data []client.Event `json:"data"`
			Next string         `json:"next_cursor"`
		}
		cli.jsonOf(&page, "events", "list", "--since", start.Add(-time.Minute).UTC().Format(time.RFC3339), "--tenant", "acme", "--all", "--limit", "1")
		if len(page.Data) != 4 || page.Next != "" {
			t.Fatalf("events list --all --limit 1: %d events, next %q; want the 4 accepted", len(page.Data), page.Next)
		}
		cli.jsonOf(&page, "events", "list", "--since", "5m", "--entity", "order:2")
		if len(page.Data) != 1 || page.Data[0].Entity != "order:2" {
			t.Fatalf("--entity order:2 = %+v", page.Data)
		}
	})

	t.Run("dead letters and redrive", func(t *testing.T) {
		// order:1, 2 and 5 are order.updated: the 413 endpoint got them and
		// dead-lettered each at once.
		var letters client.DeadPage
		eventually(t, 20*time.Second, "three dead letters", func() bool {
			p, err := api.ListDead(ctx, client.DeadQuery{EndpointID: dead.ID})
			letters = p
			return err == nil && len(p.Data) >= 3
		})
		out := cli.ok("dead", "list", "--endpoint", dead.ID, "--since", "10m")
		mustContain(t, out, "ID", "REASON", "DEAD_AT", "ENTITY", "payload_too_large", "order:1", "order:2", "order:5")
		var all struct {
			Data []client.DeadLetter `json:"data"`
			Next string              `json:"next_cursor"`
		}
		cli.jsonOf(&all, "dead", "list", "--reason", "payload_too_large", "--all", "--limit", "1")
		if len(all.Data) != 3 || all.Next != "" {
			t.Fatalf("dead list --all --limit 1: %d letters, next %q", len(all.Data), all.Next)
		}
		cli.jsonOf(&all, "dead", "list", "--endpoint", goodID)
		if len(all.Data) != 0 {
			t.Fatalf("the good endpoint has dead letters: %+v", all.Data)
		}

		// A range redrive, following the job with plain progress lines (stdout is no terminal).
		before := tooLarge.hits.Load()
		out = cli.ok("dead", "redrive", "--endpoint", dead.ID, "--since", "10m")
		mustContain(t, out, "started", "matched 3, redriven 3")
		if !regexp.MustCompile(`(?m)^redrive \S+ done: matched 3, redriven 3, skipped 0`).MatchString(out) {
			t.Fatalf("no final done line:\n%s", out)
		}
		if !regexp.MustCompile(`(?m)^redrive \S+: (running|done), \d+/3, redriven`).MatchString(out) {
			t.Fatalf("no progress lines:\n%s", out)
		}
		eventually(t, 20*time.Second, "the redriven deliveries to reach the receiver", func() bool {
			return tooLarge.hits.Load() >= before+3
		})

		// By ids, drawn as a bar.
		ids := letters.Data[0].ID + "," + letters.Data[1].ID
		out = cli.ok("dead", "redrive", "--ids", ids, "--progress", "bar")
		// (The range redrive's deliveries died again under the same ids, so
		// the ids match those new letters too.)
		mustContain(t, out, "\r[", "] 2/2 100%", "done: matched ", ", redriven 2,")
		// The same request again finds the job instead of starting one.
		var job client.RedriveJob
		cli.jsonOf(&job, "dead", "redrive", "--ids", ids)
		if job.Status != client.RedriveDone || job.Redriven != 2 {
			t.Fatalf("repeated redrive -o json = %+v", job)
		}
		mustContain(t, cli.fails("dead", "redrive"), "give --ids, or --endpoint")
		mustContain(t, cli.fails("dead", "redrive", "--ids", "x", "--endpoint", dead.ID), "cannot be combined")
	})

	t.Run("help", func(t *testing.T) {
		out := cli.ok("--help")
		mustContain(t, out, "serve", "demo", "endpoints", "publish", "dead", "events")
		mustContain(t, cli.ok("endpoints"), "rotate-secret", "LANEWAY_ADMIN_TOKEN")
		out = cli.ok("dead", "redrive", "--help")
		mustContain(t, out, "--api (env LANEWAY_API", "--token (env LANEWAY_ADMIN_TOKEN", "-o (env LANEWAY_OUTPUT", "--progress (default auto)")
		mustContain(t, cli.fails("endpoints", "frobnicate"), `unknown command "endpoints frobnicate"`)
	})
}
