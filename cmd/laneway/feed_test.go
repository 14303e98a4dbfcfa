package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const consumerToken = "lwf_cli-test"

// seen is one request the fake API received.
type seen struct {
	method, path, query, auth, body string
}

// fakeAPI answers the admin API's endpoint and feed-token routes for a
// pull endpoint ep_1, and its feed: two events, then reads that wait
// (reported on waiting) until the client leaves.
type fakeAPI struct {
	srv     *httptest.Server
	waiting chan struct{}
	mu      sync.Mutex
	seen    []seen
}

const pullEndpointJSON = `{"id":"ep_1","tenant":"acme","url":"","event_types":[],"max_concurrency":4,"payload":"full","mode":"pull",` +
	`"status":"active","paused":false,"disabled_reason":"","created_at":"2026-12-02T01:00:00Z","updated_at":"2026-12-02T01:00:00Z"`

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{waiting: make(chan struct{}, 4)}
	mux := http.NewServeMux()
	reply := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}
	}
	token := `{"id":"ft_2","token":"lwf_new-token","created_at":"2026-12-02T01:30:00Z"}`
	mux.Handle("POST /v1/endpoints", reply(201, pullEndpointJSON+`,"secret":"whsec_x"}`))
	mux.Handle("GET /v1/endpoints", reply(200, `{"data":[`+pullEndpointJSON+`}]}`))
	mux.Handle("GET /v1/endpoints/ep_1", reply(200, pullEndpointJSON+
		`,"feed":{"acked_cursor":"","start_cursor":"c0","end_cursor":"c9","lag":9,"oldest_unacked_age_seconds":2.5}}`))
	mux.Handle("POST /v1/endpoints/ep_1/feed-tokens", reply(201, token))
	mux.Handle("POST /v1/endpoints/ep_1/feed-tokens/ft_1/rotate", reply(201, token))
	mux.Handle("GET /v1/endpoints/ep_1/feed-tokens", reply(200,
		`{"data":[{"id":"ft_1","created_at":"2026-12-02T01:00:00Z","expires_at":"2026-12-02T02:00:00Z"},{"id":"ft_2","created_at":"2026-12-02T01:30:00Z"}]}`))
	mux.Handle("DELETE /v1/endpoints/ep_1/feed-tokens/ft_1", reply(204, ""))
	mux.Handle("POST /v1/feed/ep_1/ack", reply(200, `{"acked_cursor":"c3"}`))
	mux.HandleFunc("GET /v1/feed/ep_1", f.read)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), string(body)})
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) read(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case q.Get("cursor") == "c-old":
		w.WriteHeader(http.StatusGone)
		_, _ = w.Write([]byte(`{"error":"cursor is older than the retention","oldest_cursor":"c5"}`))
	case q.Get("cursor") == "":
		_, _ = w.Write([]byte(`{"events":[` +
			`{"sequence":2,"id":"evt-2","type":"order.updated","timestamp":"2026-12-02T01:02:03Z","entity":{"id":"order:1","revision":2},"data":{"note":"<b>&</b>"}},` +
			`{"sequence":3,"id":"evt-3","type":"order.updated","timestamp":"2026-12-02T01:02:04Z","entity":{"id":"order:1","revision":3}}` +
			`],"next_cursor":"c3"}`))
	case q.Get("wait") == "":
		_, _ = w.Write([]byte(`{"events":[],"next_cursor":"` + q.Get("cursor") + `"}`))
	default:
		f.waiting <- struct{}{}
		<-r.Context().Done()
	}
}

func (f *fakeAPI) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

// wantLines are the events the fake's feed starts with, as feed tail prints them.
const wantLines = `{"sequence":2,"id":"evt-2","type":"order.updated","timestamp":"2026-12-02T01:02:03Z","entity":{"id":"order:1","revision":2},"data":{"note":"<b>&</b>"}}
{"sequence":3,"id":"evt-3","type":"order.updated","timestamp":"2026-12-02T01:02:04Z","entity":{"id":"order:1","revision":3}}
`

func TestEndpointsCreateModePull(t *testing.T) {
	f := newFakeAPI(t)
	cli := newCLI(t, f.srv.URL)
	out := cli.ok("endpoints", "create", "--tenant", "acme", "--mode", "pull")
	mustContain(t, out, "mode", "pull", "endpoints feed-tokens create ep_1")
	if strings.Contains(out, "url ") || strings.Contains(out, "Keep the secret") {
		t.Fatalf("a pull endpoint shows a url or the push hint:\n%s", out)
	}
	if got := f.requests(); len(got) != 1 || got[0].body != `{"tenant":"acme","mode":"pull"}` {
		t.Fatalf("requests %+v, want one POST without url", got)
	}
	mustContain(t, cli.fails("endpoints", "create", "--tenant", "acme", "--mode", "pull", "--url", "https://x"), "--url cannot be given with --mode pull")
	mustContain(t, cli.fails("endpoints", "create", "--tenant", "acme", "--mode", "poll"), `--mode must be push, pull or batch, not "poll"`)
	mustContain(t, cli.fails("endpoints", "create", "--tenant", "acme"), "--url are required")
	mustContain(t, cli.fails("endpoints", "create", "--mode", "pull"), "--tenant is required")
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests, want the refused commands to send none", n)
	}

	out = cli.ok("endpoints", "get", "ep_1")
	mustContain(t, out, "feed:", "acked_cursor", "the consumer has acknowledged nothing", "end_cursor", "c9", "lag", "oldest_unacked_age", "2.5s")
	out = cli.ok("endpoints", "list")
	mustContain(t, out, "MODE", "pull")
}

func TestFeedTokensCommands(t *testing.T) {
	f := newFakeAPI(t)
	cli := newCLI(t, f.srv.URL)
	out := cli.ok("endpoints", "feed-tokens", "create", "ep_1")
	mustContain(t, out, "ft_2", "lwf_new-token", "Keep the token", "laneway feed tail ep_1", feedTokenEnv)
	var tok struct{ ID, Token string }
	cli.jsonOf(&tok, "endpoints", "feed-tokens", "create", "ep_1")
	if tok.ID != "ft_2" || tok.Token != "lwf_new-token" {
		t.Fatalf("create -o json = %+v", tok)
	}
	out = cli.ok("endpoints", "feed-tokens", "list", "ep_1")
	mustContain(t, out, "ID", "EXPIRES_AT", "ft_1", "2026-12-02T02:00:00Z", "ft_2", "never")
	mustContain(t, cli.ok("endpoints", "feed-tokens", "rotate", "ep_1", "ft_1", "--overlap", "1h"), "lwf_new-token", "ft_1 stays valid for 1h0m0s")
	mustContain(t, cli.ok("endpoints", "feed-tokens", "rotate", "ep_1", "ft_1"), "ft_1 is revoked")
	mustContain(t, cli.ok("endpoints", "feed-tokens", "revoke", "ep_1", "ft_1"), "revoked feed token ft_1 of ep_1")
	mustContain(t, cli.fails("endpoints", "feed-tokens", "rotate", "ep_1"), "usage: laneway endpoints feed-tokens rotate <id> <token-id>")

	want := []seen{
		{method: "POST", path: "/v1/endpoints/ep_1/feed-tokens"},
		{method: "POST", path: "/v1/endpoints/ep_1/feed-tokens"},
		{method: "GET", path: "/v1/endpoints/ep_1/feed-tokens"},
		{method: "POST", path: "/v1/endpoints/ep_1/feed-tokens/ft_1/rotate", body: `{"overlap_seconds":3600}`},
		{method: "POST", path: "/v1/endpoints/ep_1/feed-tokens/ft_1/rotate"},
		{method: "DELETE", path: "/v1/endpoints/ep_1/feed-tokens/ft_1"},
	}
	got := f.requests()
	if len(got) != len(want) {
		t.Fatalf("requests %+v, want %+v", got, want)
	}
	for i, w := range want {
		w.auth = "Bearer " + testToken
		if got[i] != w {
			t.Errorf("request %d = %+v, want %+v", i, got[i], w)
		}
	}
}

// feedCLI runs `laneway feed ...` with the admin and the consumer tokens
// in the environment, as a shell holding both would.
func feedCLI(t *testing.T, f *fakeAPI) *cliRunner {
	cli := newCLI(t, f.srv.URL)
	cli.env[feedTokenEnv] = consumerToken
	return cli
}

func TestFeedTailFollowsUntilInterrupted(t *testing.T) {
	f := newFakeAPI(t)
	feedCLI(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"feed", "tail", "ep_1", "--limit", "50"}, nil, &stdout, &stderr) }()
	select {
	case <-f.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("feed tail never long-polled for more")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("feed tail = %v, want a clean stop", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("feed tail did not stop")
	}
	if stdout.String() != wantLines {
		t.Fatalf("printed\n%s\nwant\n%s", stdout.String(), wantLines)
	}
	mustContain(t, stderr.String(), "next cursor: c3 (go on with --cursor c3)")
	got := f.requests()
	if len(got) != 2 || got[0].query != "limit=50&wait=25s" || got[1].query != "cursor=c3&limit=50&wait=25s" {
		t.Fatalf("requests %+v, want two reads and no ack", got)
	}
	for _, r := range got {
		if r.auth != "Bearer "+consumerToken {
			t.Fatalf("a feed read sent %q, want the consumer token only", r.auth)
		}
	}
}

func TestFeedTailOnceWithAck(t *testing.T) {
	f := newFakeAPI(t)
	cli := feedCLI(t, f)
	out, err := cli.exec("", "feed", "tail", "ep_1", "--once", "--ack")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, wantLines) || !strings.Contains(out, "next cursor: c3") {
		t.Fatalf("output:\n%s", out)
	}
	got := f.requests()
	if len(got) != 2 || got[0].query != "limit=100" || got[1].path != "/v1/feed/ep_1/ack" || got[1].body != `{"cursor":"c3"}` {
		t.Fatalf("requests %+v, want one read without wait, then the ack of c3", got)
	}
	out = cli.ok("feed", "tail", "ep_1", "--once", "--cursor", "c3", "--ack")
	if strings.Contains(out, "sequence") || !strings.Contains(out, "next cursor: c3") || len(f.requests()) != 3 {
		t.Fatalf("an empty page printed %q and sent %d requests, want no event and no ack", out, len(f.requests()))
	}
}

func TestFeedTailRefusals(t *testing.T) {
	f := newFakeAPI(t)
	cli := feedCLI(t, f)
	mustContain(t, cli.fails("feed", "tail", "ep_1", "--cursor", "c-old"), "oldest retained cursor is c5", "laneway feed tail ep_1 --cursor c5")
	mustContain(t, cli.fails("feed", "tail", "ep_1", "--token", testToken), "not a feed consumer token")
	mustContain(t, cli.fails("feed", "tail", "ep_1", "-o", "json"), "flag provided but not defined: -o")
	mustContain(t, cli.fails("feed", "tail"), "usage: laneway feed tail <id>")
	delete(cli.env, feedTokenEnv)
	mustContain(t, cli.fails("feed", "tail", "ep_1"), "no consumer token", feedTokenEnv)
	mustContain(t, cli.fails("feed", "frobnicate"), `unknown command "feed frobnicate"`)
}

// TestHelpCommandsAreDocumented checks that docs/cli.md shows every client
// command, and the top-level help every group.
func TestHelpCommandsAreDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	var top bytes.Buffer
	if err := run(context.Background(), []string{"--help"}, nil, &top, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*group{endpointsGroup(), deadGroup(), eventsGroup(), feedGroup()} {
		if !strings.Contains(top.String(), "\n  "+g.name+" ") {
			t.Errorf("laneway --help does not list %q", g.name)
		}
		var help bytes.Buffer
		g.usage(&help)
		for _, c := range g.cmds {
			if !bytes.Contains(doc, []byte("laneway "+c.name+" ")) {
				t.Errorf("docs/cli.md does not show `laneway %s`", c.name)
			}
			if !strings.Contains(help.String(), c.synopsis) {
				t.Errorf("laneway %s --help does not list %q", g.name, c.synopsis)
			}
		}
	}
	if !bytes.Contains(doc, []byte("laneway publish")) {
		t.Error("docs/cli.md does not show `laneway publish`")
	}
}
