package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/poll"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// The machine may be small and shared: generous deadlines, never sleeps.
const (
	stepTimeout = 60 * time.Second
	apiTimeout  = 90 * time.Second
	adminToken  = "console-e2e-821d17ee1a6158d5e46d3dc6686270bf"
)

// TestConsoleInBrowser drives the console in a real headless Chromium
// against a real Laneway (embedded Kafka and Redis), served as `laneway
// serve` serves it, on the API's own listener: sign in with the admin
// token, read the endpoints table, pause, resume and retune an endpoint,
// redrive its dead letter, follow a pull endpoint's feed consumer as it
// acknowledges, show a batch endpoint's sizes and how far its feed was
// sent (paused, then resumed), search events by time range, and follow
// webhooks through the inbound front door (a private capture URL; a
// verified, a refused and an unmapped request; re-verify and re-publish). Each effect is checked through the
// API, and screenshots are saved to $LANEWAY_ARTIFACTS (a temporary
// directory when unset).
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped in -short mode")
	}
	chrome := chromiumPath()
	if chrome == "" {
		t.Skip("no Chromium found (looked for $LANEWAY_CHROMIUM, chromium, chromium-browser, google-chrome): " +
			"install it with `apt-get install -y --no-install-recommends chromium` to run the console's browser test")
	}
	started := time.Now()

	// The receivers: A refuses the first delivery with 413 (a dead letter)
	// and accepts everything once told to; B accepts everything.
	recvA, recvB := newReceiver(http.StatusRequestEntityTooLarge), newReceiver(0)
	srvA, srvB := httptest.NewServer(recvA), httptest.NewServer(recvB)
	t.Cleanup(srvA.Close)
	t.Cleanup(srvB.Close)
	// The batch endpoint's receiver verifies and accepts every batch, and
	// keeps them.
	recvBatch := fleet.NewBatchReceiver(fleet.BatchConfig{Limit: 1 << 20})
	srvBatch := httptest.NewServer(recvBatch)
	t.Cleanup(srvBatch.Close)

	a := startLaneway(t)
	c := client{t: t, base: "http://" + a.HTTPAddr()}
	epA := c.createEndpoint(map[string]any{"tenant": "acme", "url": srvA.URL + "/hooks", "event_types": []string{"order.updated"}, "max_concurrency": 2})
	epB := c.createEndpoint(map[string]any{"tenant": "acme", "url": srvB.URL + "/hooks", "max_concurrency": 4})
	// A pull endpoint with thin payloads: both events are appended to its
	// feed, which no consumer has read yet.
	epP := c.createEndpoint(map[string]any{"tenant": "acme", "mode": "pull", "payload": "thin"})
	// A batch endpoint whose batch of two waits a minute to fill: both
	// events are appended to its feed and none sent until it is paused,
	// which holds them.
	epBatch, batchSecret := c.createEndpointSecret(map[string]any{"tenant": "acme", "mode": "batch", "url": srvBatch.URL + "/batches",
		"batch": map[string]any{"max_events": 10, "max_bytes": 65536, "max_wait_ms": 60000}})
	recvBatch.SetEndpoint(epBatch, batchSecret)
	c.publish(map[string]any{"id": "evt-console-1", "type": "order.updated", "tenant": "acme", "entity": "order:1", "revision": 1, "data": map[string]any{"status": "paid"}})
	c.publish(map[string]any{"id": "evt-console-2", "type": "customer.created", "tenant": "acme", "entity": "customer:9", "revision": 1, "data": map[string]any{"name": "Ada"}})

	c.eventually("a dead letter for "+epA, func() bool {
		var page struct{ Data []struct{ ID string } }
		c.getJSON("/v1/dead?endpoint_id="+epA, &page)
		return len(page.Data) == 1
	})
	c.eventually("endpoint B received both events", func() bool { return recvB.delivered("evt-console-1") && recvB.delivered("evt-console-2") })
	c.eventually("both events were appended to the pull endpoint's feed", func() bool {
		f := c.endpoint(epP).Feed
		return f != nil && f.Lag == 2
	})
	c.eventually("both events were appended to the batch endpoint's feed, none sent", func() bool {
		f := c.endpoint(epBatch).Feed
		return f != nil && f.Lag == 2 && f.AckedCursor == f.StartCursor
	})
	if code, out := c.do(http.MethodPost, "/v1/endpoints/"+epBatch+"/pause", nil); code != http.StatusOK {
		t.Fatalf("pause the batch endpoint: %d %s", code, out)
	}
	unsent := *c.endpoint(epBatch).Feed
	recvA.accept()

	consoleURL := c.base // app.Start mounts the console on the API's listener
	b := startBrowser(t, chrome)

	// Sign in: the API answers 401 until the console sends the token.
	b.do("open the console and sign in",
		chromedp.Navigate(consoleURL+"/#/endpoints"),
		chromedp.WaitVisible(chromedp.ID("token")),
	)
	b.shot("00-sign-in")
	b.do("sign in",
		chromedp.SendKeys(chromedp.ID("token"), adminToken),
		chromedp.Click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.CSS(rowSel(epA))),
		chromedp.WaitVisible(chromedp.CSS(rowSel(epB))),
		chromedp.WaitVisible(chromedp.CSS(`#summary .card`)),
		chromedp.WaitVisible(chromedp.CSS(rowSel(epP))),
		chromedp.WaitVisible(chromedp.CSS(rowSel(epBatch))),
	)
	// The table shows each endpoint's mode, and for the pull endpoint its
	// consumer's position: nothing acknowledged, both events behind.
	b.poll("the modes and the unacknowledged feed are shown", fmt.Sprintf(
		`document.querySelector(%[1]q)?.dataset.mode === 'push' && document.querySelector(%[1]q + ' td.mode')?.textContent === 'push' && `+
			`document.querySelector(%[1]q + ' td.feed') === null && `+
			`document.querySelector(%[2]q)?.dataset.mode === 'pull' && document.querySelector(%[2]q + ' td.mode')?.textContent === 'pull · thin' && `+
			`document.querySelector(%[2]q + ' td.feed[data-feed-lag="2"][data-feed-acked="false"]')?.textContent.startsWith('2 events · oldest ') && `+
			`document.querySelector(%[2]q + ' td.feed').textContent.endsWith('not acknowledged')`,
		rowSel(epA), rowSel(epP)))
	// The batch endpoint's row: its mode, its URL, and how far its feed
	// was sent: nothing yet, both events to send.
	b.poll("the batch endpoint's mode and unsent feed are shown", fmt.Sprintf(
		`document.querySelector(%[1]q)?.dataset.mode === 'batch' && document.querySelector(%[1]q + ' td.mode')?.textContent === 'batch' && `+
			`document.querySelector(%[1]q + ' .sub')?.textContent === %[2]q && `+
			`document.querySelector(%[1]q + ' td.feed[data-feed-lag="2"][data-feed-acked="true"] .feed-lag')?.textContent.startsWith('2 events to send · oldest ') && `+
			`document.querySelector(%[1]q + ' td.feed .sub')?.textContent === %[3]q`,
		rowSel(epBatch), srvBatch.URL+"/batches", "sent up to "+unsent.AckedCursor))
	b.shot("01-endpoints")

	// The endpoint page: last error, breaker, pause state.
	b.do("open endpoint A",
		chromedp.Click(chromedp.CSS(rowSel(epA)+" a")),
		chromedp.WaitVisible(chromedp.ID("pause")),
	)
	b.poll("the last error shows the 413", `(document.getElementById('last-error')?.textContent || '').includes('413')`)
	b.poll("the breaker is shown", `document.getElementById('endpoint-health').textContent.includes('closed')`)
	b.poll("a push endpoint shows its mode and URL, and no feed", fmt.Sprintf(
		`document.getElementById('feed-panel').hidden && document.getElementById('endpoint-config').textContent.includes('Modepush: POST to the URL') && `+
			`document.getElementById('endpoint-config').textContent.includes(%q)`, "URL"+srvA.URL+"/hooks"))
	b.shot("02-endpoint")

	b.do("pause", chromedp.Click(chromedp.ID("pause")), chromedp.WaitVisible(chromedp.ID("resume")),
		chromedp.WaitVisible(chromedp.CSS(`#endpoint-state [data-state="paused"]`)))
	c.eventually("the API shows A paused", func() bool { return c.endpoint(epA).Paused })
	b.shot("03-paused")

	b.do("resume", chromedp.Click(chromedp.ID("resume")), chromedp.WaitVisible(chromedp.ID("pause")))
	c.eventually("the API shows A resumed", func() bool { return !c.endpoint(epA).Paused })

	// End, then enough backspaces to empty the field, then the new limit:
	// the first keystroke marks the field as edited, so the 2 s refresh
	// leaves it alone.
	b.do("set max concurrency to 7",
		chromedp.SendKeys(chromedp.ID("concurrency"), kb.End+strings.Repeat(kb.Backspace, 5)+"7"))
	if v := run(b, "read the concurrency field", chromedp.Value(chromedp.ID("concurrency"))); v != "7" {
		t.Fatalf("concurrency field holds %q, want 7", v)
	}
	b.do("save the concurrency", chromedp.Click(chromedp.ID("save-concurrency")))
	c.eventually("the API shows max_concurrency 7", func() bool { return c.endpoint(epA).MaxConcurrency == 7 })
	b.poll("the page shows the new limit", `document.getElementById('endpoint-config').textContent.includes('Max concurrency7')`)
	b.shot("04-concurrency")

	// Dead letters: filter by endpoint, redrive, follow the job.
	b.do("search A's dead letters",
		chromedp.Click(chromedp.CSS(`a[data-nav="dead"]`)),
		chromedp.WaitVisible(chromedp.ID("dead-endpoint")),
		chromedp.SendKeys(chromedp.ID("dead-endpoint"), epA),
		chromedp.Click(chromedp.ID("dead-search")),
	)
	b.poll("one dead letter of A is listed", fmt.Sprintf(
		`location.hash.includes(%q) && document.querySelectorAll('#dead-body tr[data-letter-id]').length === 1 && document.getElementById('dead-body').textContent.includes('payload_too_large')`,
		"endpoint_id="+epA))
	b.shot("05-dead-letters")

	b.do("redrive all matching",
		chromedp.Click(chromedp.ID("redrive-all")),
		chromedp.WaitVisible(chromedp.CSS(`#redrive-progress[data-status="done"]`)),
	)
	jobID := run(b, "read the job id", chromedp.Text(chromedp.ID("redrive-job")))
	b.shot("06-redrive-done")
	var job struct {
		Status   string `json:"status"`
		Matched  int    `json:"matched"`
		Redriven int    `json:"redriven"`
		// AlreadyRedriven counts letters an earlier job sent.
		AlreadyRedriven int `json:"already_redriven"`
	}
	c.getJSON("/v1/redrives/"+url.PathEscape(jobID), &job)
	if job.Status != "done" || job.Matched != 1 || job.Redriven != 1 {
		t.Fatalf("GET /v1/redrives/%s: %+v, want done with 1 matched and 1 redriven", jobID, job)
	}
	c.eventually("the redriven delivery reached A", func() bool { return recvA.delivered("evt-console-1") })

	// The same letter ticked through the header's box: a job by id, which
	// finds it sent by the first job.
	b.do("select every letter shown", chromedp.Click(chromedp.ID("dead-select-all")))
	b.poll("the selection is counted", `document.getElementById('redrive-selected').textContent === 'Redrive selected (1)' && `+
		`!document.getElementById('redrive-selected').disabled`)
	b.do("redrive the selected letter", chromedp.Click(chromedp.ID("redrive-selected")))
	b.poll("a second job is done", fmt.Sprintf(`document.getElementById('redrive-job')?.textContent !== %q && `+
		`document.querySelector('#redrive-progress[data-status="done"]') !== null`, jobID))
	var byID struct {
		Status          string `json:"status"`
		Matched         int    `json:"matched"`
		AlreadyRedriven int    `json:"already_redriven"`
		Request         struct {
			IDs []string `json:"ids"`
		} `json:"request"`
	}
	c.getJSON("/v1/redrives/"+url.PathEscape(run(b, "read the second job id", chromedp.Text(chromedp.ID("redrive-job")))), &byID)
	if byID.Status != "done" || byID.Matched != 1 || byID.AlreadyRedriven != 1 || len(byID.Request.IDs) != 1 {
		t.Fatalf("redrive of the selected letter: %+v, want done with the one id matched and already redriven", byID)
	}

	// Events by time range. The page's own helper turns instants into the
	// browser's local time, whatever its zone.
	since, until := started.Add(-time.Minute), time.Now().Add(2*time.Minute)
	b.do("open events", chromedp.Click(chromedp.CSS(`a[data-nav="events"]`)), chromedp.WaitVisible(chromedp.ID("events-since")))
	b.searchEvents(since, until)
	b.poll("both events are listed", `document.querySelector('#events-body tr[data-event-id="evt-console-1"]') !== null && document.querySelector('#events-body tr[data-event-id="evt-console-2"]') !== null`)
	b.shot("07-events")
	b.searchEvents(started.Add(-3*time.Hour), started.Add(-2*time.Hour))
	b.poll("an earlier range lists nothing", `(document.querySelector('#events-body td.empty')?.textContent || '') === 'No events in this range.'`)

	// The endpoint page's resend button starts a new job; the letter was
	// redriven already, so it matches and is not sent twice.
	b.do("resend from the endpoint page",
		chromedp.Navigate(consoleURL+"/#/endpoints/"+epA),
		chromedp.WaitVisible(chromedp.ID("resend")),
		chromedp.Click(chromedp.ID("resend")),
		chromedp.WaitVisible(chromedp.CSS(`#redrive-progress[data-status="done"]`)),
	)
	b.shot("08-resend")
	resendID := run(b, "read the job id", chromedp.Text(chromedp.ID("redrive-job")))
	c.getJSON("/v1/redrives/"+url.PathEscape(resendID), &job)
	if resendID == jobID || job.Status != "done" || job.Matched != 1 || job.Redriven != 0 || job.AlreadyRedriven != 1 {
		t.Fatalf("resend job %s: %+v, want a new job, done, with 1 matched and already redriven", resendID, job)
	}
	if n := recvA.count("evt-console-1"); n != 1 {
		t.Errorf("A accepted evt-console-1 %d times, want once", n)
	}

	feedSteps(b, c, epP)
	batchSteps(b, c, epBatch, srvBatch.URL+"/batches", recvBatch, unsent)
	inboundSteps(t, b, c, recvB)

	b.checkConsole()
	t.Logf("browser test took %s; screenshots in %s", time.Since(started).Round(time.Second), b.dir)
}

func rowSel(id string) string { return fmt.Sprintf(`#endpoints-body tr[data-endpoint-id=%q]`, id) }

// chromiumPath finds a Chromium or Chrome binary.
func chromiumPath() string {
	if p := os.Getenv("LANEWAY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func startLaneway(t *testing.T) *app.App {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := app.Start(ctx, app.Config{
		HTTPAddr: "127.0.0.1:0", EmbeddedKafkaAddr: "127.0.0.1:0", AdminToken: adminToken,
		InstanceID: "console-e2e", Topics: topics.Config{Partitions: 2},
		AllowTargets:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Retry:          deliver.RetryPolicy{Base: 50 * time.Millisecond, Max: time.Second, MaxAttempts: 5, MaxAge: time.Hour},
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

// feedSteps reads the pull endpoint's feed as its consumer does (a consumer
// token, one event per page) and acknowledges it in two steps: the endpoint
// page shows the first acknowledged cursor, one event behind, and the
// endpoints table the second, caught up.
func feedSteps(b *browser, c client, id string) {
	c.t.Helper()
	code, out := c.do(http.MethodPost, "/v1/endpoints/"+id+"/feed-tokens", nil)
	var tok struct{ Token string }
	if code != http.StatusCreated || json.Unmarshal(out, &tok) != nil || tok.Token == "" {
		c.t.Fatalf("create a feed token: %d %s", code, out)
	}
	first := c.readFeed(id, tok.Token, "")
	c.ackFeed(id, tok.Token, first)

	b.do("open the pull endpoint",
		chromedp.Navigate(c.base+"/#/endpoints/"+id),
		chromedp.WaitVisible(chromedp.ID("feed-panel")),
	)
	b.poll("the page shows the acknowledged cursor, one event behind", fmt.Sprintf(
		`document.getElementById('endpoint-feed').dataset.acked === 'true' && `+
			`document.getElementById('feed-acked').textContent === %q && `+
			`document.getElementById('feed-lag').textContent === '1 event' && `+
			`document.getElementById('feed-oldest').textContent !== '—' && `+
			`document.getElementById('endpoint-config').textContent.includes('Modepull: a feed its consumer reads') && `+
			`document.getElementById('endpoint-config').textContent.includes(%q) && `+
			`document.getElementById('endpoint-health').textContent.includes('appended to the feed')`,
		first, "FeedGET /v1/feed/"+id))
	b.shot("08b-feed-consumer")

	second := c.readFeed(id, tok.Token, first)
	c.ackFeed(id, tok.Token, second)
	b.do("back to the endpoints", chromedp.Click(chromedp.CSS(`a[data-nav="endpoints"]`)), chromedp.WaitVisible(chromedp.CSS(rowSel(id))))
	b.poll("the table shows the consumer caught up at the new cursor", fmt.Sprintf(
		`document.querySelector(%q + ' td.feed[data-feed-lag="0"][data-feed-acked="true"]')?.textContent === %q`,
		rowSel(id), "caught upacked "+second))
}

// batchSteps opens the paused batch endpoint's page: its mode, URL and
// sizes, and its feed sent up to where it started, both events to send.
// Then the batch's wait is cut to nothing (0, kept as 1 ms) and the page's
// Resume button sends the batch: the page shows the new wait and
// everything sent, up to the feed's end, and the endpoints table the same.
func batchSteps(b *browser, c client, id, target string, recv *fleet.BatchReceiver, unsent feedView) {
	c.t.Helper()
	b.do("open the batch endpoint",
		chromedp.Navigate(c.base+"/#/endpoints/"+id),
		chromedp.WaitVisible(chromedp.ID("feed-panel")),
		chromedp.WaitVisible(chromedp.ID("resume")),
	)
	b.poll("the page shows the sizes and nothing sent, two events to send", fmt.Sprintf(
		`document.getElementById('feed-title').textContent === 'Batch sending' && `+
			`document.getElementById('endpoint-feed').dataset.mode === 'batch' && `+
			`document.getElementById('endpoint-feed').dataset.lag === '2' && `+
			`document.getElementById('feed-acked').textContent === %[1]q && `+
			`document.getElementById('feed-lag').textContent === '2 events to send' && `+
			`document.getElementById('feed-oldest').textContent !== '—' && `+
			`document.getElementById('endpoint-feed-note').textContent.includes('Paused: nothing is sent') && `+
			`document.getElementById('endpoint-config').textContent.includes('Modebatch: signed POSTs') && `+
			`document.getElementById('endpoint-config').textContent.includes(%[2]q) && `+
			`document.getElementById('batch-max-events').textContent === num(10) && `+
			`document.getElementById('batch-max-bytes').textContent === '64 KiB (' + num(65536) + ' bytes)' && `+
			`document.getElementById('batch-max-wait').textContent === num(60000) + ' ms' && `+
			`document.getElementById('endpoint-health').textContent.includes('appended to the feed')`,
		unsent.AckedCursor, "URL"+target))
	b.shot("08c-batch-paused")
	if st := recv.Stats(); st.Requests != 0 {
		c.t.Fatalf("the paused batch endpoint sent %d batches: %+v", st.Requests, st)
	}

	if code, out := c.do(http.MethodPatch, "/v1/endpoints/"+id, map[string]any{"batch": map[string]any{"max_wait_ms": 0}}); code != http.StatusOK {
		c.t.Fatalf("PATCH the batch wait: %d %s", code, out)
	}
	b.do("resume the batch endpoint", chromedp.Click(chromedp.ID("resume")), chromedp.WaitVisible(chromedp.ID("pause")))
	b.poll("the page shows the new wait and everything sent", fmt.Sprintf(
		`document.getElementById('batch-max-wait').textContent === '1 ms' && `+
			`document.getElementById('endpoint-feed').dataset.lag === '0' && `+
			`document.getElementById('feed-acked').textContent === %q && `+
			`document.getElementById('feed-lag').textContent === 'all sent' && `+
			`document.getElementById('feed-oldest').textContent === '—' && `+
			`!document.getElementById('endpoint-feed-note').textContent.includes('Paused')`,
		unsent.EndCursor))
	b.shot("08d-batch-sent")
	if st := recv.Stats(); st.Requests != 1 || st.Bad != 0 {
		c.t.Fatalf("the batch receiver took %d requests, %d bad (%s), want one good one", st.Requests, st.Bad, st.BadDetail)
	}
	got := recv.Accepted()
	if len(got) != 1 || len(got[0]) != 2 || got[0][0].Sequence != 1 || got[0][1].Sequence != 2 ||
		got[0][0].ID == got[0][1].ID || !strings.HasPrefix(got[0][0].ID, "evt-console-") || !strings.HasPrefix(got[0][1].ID, "evt-console-") {
		c.t.Fatalf("the batch receiver got %+v, want one batch of both events, sequences 1 and 2", got)
	}

	b.do("back to the endpoints", chromedp.Click(chromedp.CSS(`a[data-nav="endpoints"]`)), chromedp.WaitVisible(chromedp.CSS(rowSel(id))))
	b.poll("the table shows the batch endpoint's feed all sent", fmt.Sprintf(
		`document.querySelector(%q + ' td.feed[data-feed-lag="0"][data-feed-acked="true"]')?.textContent === %q`,
		rowSel(id), "all sentsent up to "+unsent.EndCursor))
}

// readFeed reads one event of a pull endpoint's feed from cursor with its
// consumer token and returns the cursor after it.
func (c client) readFeed(id, token, cursor string) string {
	c.t.Helper()
	q := url.Values{"limit": {"1"}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	code, out := c.doAs(token, http.MethodGet, "/v1/feed/"+id+"?"+q.Encode(), nil)
	var page struct {
		Events     []json.RawMessage `json:"events"`
		NextCursor string            `json:"next_cursor"`
	}
	if code != http.StatusOK || json.Unmarshal(out, &page) != nil || len(page.Events) != 1 || page.NextCursor == cursor {
		c.t.Fatalf("read the feed of %s from %q: %d %s", id, cursor, code, out)
	}
	return page.NextCursor
}

func (c client) ackFeed(id, token, cursor string) {
	c.t.Helper()
	code, out := c.doAs(token, http.MethodPost, "/v1/feed/"+id+"/ack", map[string]string{"cursor": cursor})
	var ack struct {
		AckedCursor string `json:"acked_cursor"`
	}
	if code != http.StatusOK || json.Unmarshal(out, &ack) != nil || ack.AckedCursor != cursor {
		c.t.Fatalf("acknowledge %s on %s: %d %s", cursor, id, code, out)
	}
}

// inboundSteps drives the inbound front door of a Standard Webhooks source
// with a private capture URL (a capture token): a signed request (verified
// and forwarded), a forged one (refused with 401 at the door and kept as
// metadata) and a signed one without an event type (stored whole, rejected
// unmapped by the verify stage). On the Inbound page it finds them, opens
// the refused one (nothing to replay), re-verifies the unmapped one
// (rejected again), re-publishes the verified one, then fixes the mapping
// and re-verifies every rejected request of the hour: the refusal is
// skipped, the unmapped request and its copy are verified (one forwarded,
// one a duplicate). Each job and copy is checked through the API.
func inboundSteps(t *testing.T, b *browser, c client, recvB *receiver) {
	code, out := c.do(http.MethodPost, "/v1/inbound/sources", map[string]any{"id": "partner", "kind": "standard", "tenant": "acme", "type_prefix": "partner."})
	var src struct{ Secret string }
	if code != http.StatusCreated || json.Unmarshal(out, &src) != nil || src.Secret == "" {
		t.Fatalf("create inbound source: %d %s", code, out)
	}
	code, out = c.do(http.MethodPost, "/v1/inbound/sources/partner/capture-token/rotate", nil)
	var tok struct {
		CaptureToken string `json:"capture_token"`
		CapturePath  string `json:"capture_path"`
	}
	if code != http.StatusOK || json.Unmarshal(out, &tok) != nil || tok.CaptureToken == "" {
		t.Fatalf("set the capture token: %d %s", code, out)
	}
	wh, err := standardwebhooks.NewWebhook(src.Secret)
	if err != nil {
		t.Fatal(err)
	}
	// Markup in the bodies must show as text, never become elements.
	good := []byte(`{"type":"order.paid","data":{"id":"ord_7","note":"<img src=x id=injected-img>"}}`)
	forged := []byte(`{"type":"order.paid","data":{"id":"ord_8","note":"<script id=injected-forged>alert(1)</script>"}}`)
	untyped := []byte(`{"kind":"order.refunded","data":{"id":"ord_9","note":"<script id=injected-script>alert(1)</script>"}}`)
	if code, _ := c.capture("partner", wh, "msg_good", good, good); code != http.StatusNotFound {
		t.Fatalf("POST /in/partner of a source with a capture token: %d, want 404", code)
	}
	validID := c.mustCapture(tok.CapturePath, wh, "msg_good", good, good)
	if code, _ := c.capture(tok.CapturePath, wh, "msg_forged", good, forged); code != http.StatusUnauthorized { // signed for another body
		t.Fatalf("POST of a forged request: %d, want 401", code)
	}
	untypedID := c.mustCapture(tok.CapturePath, wh, "msg_untyped", untyped, untyped)

	var valid inboundItem
	var refusedID string
	c.eventually("the API lists one verified, one refused and one unmapped request", func() bool {
		items := c.inboundItems("/v1/inbound/requests?source=partner")
		valid, refusedID = items[validID], ""
		for id, it := range items {
			if it.Reason == "bad_signature" {
				refusedID = id
			}
		}
		return len(items) == 3 && valid.Status == "verified" && refusedID != "" &&
			items[untypedID].Status == "rejected" && items[untypedID].Reason == "unmapped"
	})
	c.eventually("the verified webhook reached endpoint B as an event", func() bool { return recvB.delivered(valid.EventID) })

	b.do("open the inbound page",
		chromedp.Click(chromedp.CSS(`a[data-nav="inbound"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#inbound-sources-body tr[data-source-id="partner"]`)),
	)
	b.poll("the source shows its private capture path, not its token", fmt.Sprintf(
		`document.querySelector('#inbound-sources-body tr[data-source-id="partner"]').textContent.includes('POST /in/partner/{capture_token}') && `+
			`!document.body.textContent.includes(%q)`, tok.CaptureToken))
	b.poll("one verified and two rejected requests are listed", fmt.Sprintf(
		`document.querySelector('#inbound-body tr[data-request-id=%q][data-status="verified"]') !== null && `+
			`(document.querySelector('#inbound-body tr[data-request-id=%q][data-status="rejected"]')?.textContent || '').includes('bad_signature') && `+
			`(document.querySelector('#inbound-body tr[data-request-id=%q][data-status="rejected"]')?.textContent || '').includes('unmapped')`,
		validID, refusedID, untypedID))
	b.shot("09-inbound")

	b.do("filter the rejected requests of the source",
		chromedp.SetValue(chromedp.ID("inbound-source"), "partner"),
		chromedp.SetValue(chromedp.ID("inbound-status"), "rejected"),
		chromedp.Click(chromedp.ID("inbound-search")),
	)
	b.poll("only the two rejected ones are listed", fmt.Sprintf(
		`location.hash.includes('status=rejected') && location.hash.includes('source=partner') && `+
			`document.querySelectorAll('#inbound-body tr[data-request-id]').length === 2 && `+
			`document.querySelector('#inbound-body tr[data-request-id=%q]') !== null && `+
			`document.querySelector('#inbound-body tr[data-request-id=%q]') !== null`, refusedID, untypedID))

	// The refused request: its metadata and the body as text, nothing to replay.
	b.do("open the refused request",
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`#inbound-body tr[data-request-id=%q] a`, refusedID))),
		chromedp.WaitVisible(chromedp.ID("replay-reverify")),
	)
	b.poll("the page shows the refusal, the headers and the body as text, and offers no replay", fmt.Sprintf(
		`(document.getElementById('request-reason')?.textContent || '') === 'bad_signature' && `+
			`document.getElementById('request-meta').textContent.includes('/in/partner/{capture_token}') && `+
			`!document.body.textContent.includes(%q) && `+
			`document.querySelector('#request-headers tr[data-header="Webhook-Signature"]') !== null && `+
			`document.getElementById('request-body').textContent.includes('<script id=injected-forged>') && `+
			`document.getElementById('request-body').children.length === 0 && document.getElementById('injected-forged') === null && `+
			`document.getElementById('request-body-note').textContent.includes('refused at the door') && `+
			`document.getElementById('replay-reverify').disabled && document.getElementById('replay-republish').disabled && `+
			`document.getElementById('replay-note').textContent.includes('Refused at the door (bad_signature)')`, tok.CaptureToken))
	b.shot("10-inbound-refused")

	// The unmapped request was stored whole: re-verify it.
	b.do("open the unmapped request",
		chromedp.Navigate(c.base+"/#/inbound/requests/"+untypedID),
		chromedp.WaitVisible(chromedp.ID("replay-reverify")),
	)
	b.poll("the page shows the reason and the body as text", `(document.getElementById('request-reason')?.textContent || '') === 'unmapped' && `+
		`document.getElementById('request-body').textContent.includes('<script id=injected-script>') && `+
		`document.getElementById('request-body').children.length === 0 && document.getElementById('injected-script') === null && `+
		`!document.getElementById('replay-reverify').disabled`)
	b.shot("11-inbound-request")
	b.do("re-verify it",
		chromedp.Click(chromedp.ID("replay-reverify")),
		chromedp.WaitVisible(chromedp.CSS(`#replay-progress[data-status="done"]`)),
	)
	b.poll("the copy's outcome is shown", `document.getElementById('replay-outcomes')?.dataset.complete === 'true' && `+
		`document.querySelector('#replay-outcomes-body tr[data-status="rejected"]') !== null`)
	b.shot("12-inbound-reverify")
	reverify := c.replay(run(b, "read the job id", chromedp.Text(chromedp.ID("replay-job"))))
	if reverify.Status != "done" || reverify.Matched != 1 || reverify.Replayed != 1 || reverify.Request.Action != "reverify" ||
		len(reverify.Request.IDs) != 1 || reverify.Request.IDs[0] != untypedID {
		t.Fatalf("re-verify job: %+v", reverify)
	}
	copies := c.inboundItems("/v1/inbound/requests?job=" + url.QueryEscape(reverify.ID))
	if len(copies) != 1 {
		t.Fatalf("re-verify job %s: %d copies listed, want 1", reverify.ID, len(copies))
	}
	for _, it := range copies {
		if it.ReplayOf != untypedID || it.Status != "rejected" || it.Reason != "unmapped" {
			t.Fatalf("re-verified copy %+v: want a rejected copy of %s (the mapping is unchanged)", it, untypedID)
		}
	}

	// Re-publish the verified one: forwarded again, with the same event id.
	b.do("re-publish the verified request",
		chromedp.Navigate(c.base+"/#/inbound/requests/"+validID),
		chromedp.WaitVisible(chromedp.ID("replay-republish")),
	)
	b.poll("its body shows the markup as text", `document.getElementById('request-body').textContent.includes('<img src=x id=injected-img>') && `+
		`document.getElementById('injected-img') === null && (document.getElementById('request-status')?.textContent || '') === 'verified'`)
	b.do("click re-publish",
		chromedp.Click(chromedp.ID("replay-republish")),
		chromedp.WaitVisible(chromedp.CSS(`#replay-progress[data-status="done"]`)),
	)
	b.poll("the copy was verified and forwarded", `document.getElementById('replay-outcomes')?.dataset.complete === 'true' && `+
		`document.querySelector('#replay-outcomes-body tr[data-status="verified"]') !== null`)
	b.shot("13-inbound-republish")
	republish := c.replay(run(b, "read the job id", chromedp.Text(chromedp.ID("replay-job"))))
	if republish.Status != "done" || republish.Replayed != 1 || republish.Request.Action != "republish" {
		t.Fatalf("re-publish job: %+v", republish)
	}
	copies = c.inboundItems("/v1/inbound/requests?job=" + url.QueryEscape(republish.ID))
	for _, it := range copies {
		if len(copies) != 1 || it.ReplayOf != validID || it.Status != "verified" || it.EventID != valid.EventID {
			t.Fatalf("re-published copies %+v: want one verified copy of %s with event id %s", copies, validID, valid.EventID)
		}
	}

	// Fix the mapping, then re-verify every rejected request of the source
	// decided in the last hour: the refusal (skipped: only metadata), the
	// unmapped request and its copy (now verified; one is a duplicate).
	if code, out := c.do(http.MethodPatch, "/v1/inbound/sources/partner", map[string]any{"type_field": "kind"}); code != http.StatusOK {
		t.Fatalf("PATCH the type field: %d %s", code, out)
	}
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	b.do("re-verify the rejected requests of the last hour",
		chromedp.Navigate(c.base+"/#/inbound?"+url.Values{"source": {"partner"}, "status": {"rejected"}, "since": {since}}.Encode()),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#inbound-body tr[data-request-id=%q]`, untypedID))),
		chromedp.WaitEnabled(chromedp.ID("replay-all")),
		chromedp.Click(chromedp.ID("replay-all")),
		chromedp.WaitVisible(chromedp.CSS(`#replay-progress[data-status="done"]`)),
	)
	b.poll("the two copies were verified, one forwarded and one a duplicate", `document.getElementById('replay-outcomes')?.dataset.complete === 'true' && `+
		`document.querySelectorAll('#replay-outcomes-body tr[data-status="verified"]').length === 1 && `+
		`document.querySelectorAll('#replay-outcomes-body tr[data-status="duplicate"]').length === 1`)
	b.shot("14-inbound-replay-range")
	byRange := c.replay(run(b, "read the job id", chromedp.Text(chromedp.ID("replay-job"))))
	if byRange.Status != "done" || byRange.Matched != 3 || byRange.Replayed != 2 || byRange.Skipped != 1 || byRange.Request.Action != "reverify" ||
		byRange.Request.Source != "partner" || byRange.Request.Status != "rejected" || len(byRange.Request.IDs) != 0 {
		t.Fatalf("range job: %+v, want 3 matched: 2 replayed and the refusal skipped", byRange)
	}
	var forwarded inboundItem
	for _, it := range c.inboundItems("/v1/inbound/requests?job=" + url.QueryEscape(byRange.ID)) {
		if it.Status == "verified" {
			forwarded = it
		}
	}
	c.eventually("the re-verified webhook reached endpoint B", func() bool { return forwarded.EventID != "" && recvB.delivered(forwarded.EventID) })
}

// receiver answers every delivery with status until accept is called, then
// with 204, and counts the deliveries of each event it accepted.
type receiver struct {
	status   atomic.Int32
	mu       sync.Mutex
	accepted map[string]int
}

func newReceiver(status int) *receiver {
	r := &receiver{accepted: map[string]int{}}
	r.status.Store(int32(status))
	return r
}

func (r *receiver) accept() { r.status.Store(0) }

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_, _ = io.Copy(io.Discard, req.Body)
	if s := r.status.Load(); s != 0 {
		http.Error(w, "payload refused by the test receiver", int(s))
		return
	}
	r.mu.Lock()
	r.accepted[req.Header.Get("webhook-id")]++
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) delivered(eventID string) bool { return r.count(eventID) > 0 }

func (r *receiver) count(eventID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.accepted[eventID]
}

// client calls the API with the admin token.
type client struct {
	t    *testing.T
	base string
}

func (c client) do(method, path string, body any) (int, []byte) {
	c.t.Helper()
	return c.doAs(adminToken, method, path, body)
}

// doAs calls the API with another bearer token (a feed's consumer token).
func (c client) doAs(token, method, path string, body any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

func (c client) getJSON(path string, v any) {
	c.t.Helper()
	code, out := c.do(http.MethodGet, path, nil)
	if code != http.StatusOK {
		c.t.Fatalf("GET %s: %d %s", path, code, out)
	}
	if err := json.Unmarshal(out, v); err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
}

func (c client) createEndpoint(body map[string]any) string {
	c.t.Helper()
	id, _ := c.createEndpointSecret(body)
	return id
}

// createEndpointSecret creates an endpoint and returns its id and
// signing secret.
func (c client) createEndpointSecret(body map[string]any) (id, secret string) {
	c.t.Helper()
	code, out := c.do(http.MethodPost, "/v1/endpoints", body)
	var ep struct{ ID, Secret string }
	if code != http.StatusCreated || json.Unmarshal(out, &ep) != nil || ep.ID == "" {
		c.t.Fatalf("create endpoint: %d %s", code, out)
	}
	return ep.ID, ep.Secret
}

func (c client) publish(env map[string]any) {
	c.t.Helper()
	if code, out := c.do(http.MethodPost, "/v1/events", env); code != http.StatusAccepted {
		c.t.Fatalf("publish: %d %s", code, out)
	}
}

// capture posts body to a capture path ("partner" means /in/partner)
// with a Standard Webhooks signature made over signed, and returns the
// status and the request id of a 202.
func (c client) capture(path string, wh *standardwebhooks.Webhook, msgID string, signed, body []byte) (int, string) {
	c.t.Helper()
	if !strings.HasPrefix(path, "/") {
		path = "/in/" + path
	}
	now := time.Now()
	sig, err := wh.Sign(msgID, now, signed)
	if err != nil {
		c.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", msgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ ID string }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out.ID
}

// mustCapture is capture that wants a 202.
func (c client) mustCapture(path string, wh *standardwebhooks.Webhook, msgID string, signed, body []byte) string {
	c.t.Helper()
	code, id := c.capture(path, wh, msgID, signed, body)
	if code != http.StatusAccepted || id == "" {
		c.t.Fatalf("POST %s: %d", path, code)
	}
	return id
}

type inboundItem struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	EventID  string `json:"event_id"`
	ReplayOf string `json:"replay_of"`
}

// inboundItems lists every page of an inbound listing, by request id.
func (c client) inboundItems(path string) map[string]inboundItem {
	c.t.Helper()
	out := map[string]inboundItem{}
	cursor := ""
	for {
		var page struct {
			Data       []inboundItem `json:"data"`
			NextCursor string        `json:"next_cursor"`
		}
		p := path
		if cursor != "" {
			p += "&cursor=" + url.QueryEscape(cursor)
		}
		c.getJSON(p, &page)
		for _, it := range page.Data {
			out[it.ID] = it
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

type replayJob struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Request struct {
		Action string   `json:"action"`
		IDs    []string `json:"ids"`
		Source string   `json:"source"`
		Status string   `json:"status"`
	} `json:"request"`
	Matched  int `json:"matched"`
	Replayed int `json:"replayed"`
	Skipped  int `json:"skipped"`
}

func (c client) replay(id string) replayJob {
	c.t.Helper()
	var job replayJob
	c.getJSON("/v1/inbound/replays/"+url.PathEscape(id), &job)
	return job
}

type endpointView struct {
	Paused         bool      `json:"paused"`
	MaxConcurrency int       `json:"max_concurrency"`
	Feed           *feedView `json:"feed"`
}

// feedView is a pull or batch endpoint's feed block.
type feedView struct {
	AckedCursor string `json:"acked_cursor"`
	StartCursor string `json:"start_cursor"`
	EndCursor   string `json:"end_cursor"`
	Lag         int64  `json:"lag"`
}

func (c client) endpoint(id string) endpointView {
	c.t.Helper()
	var ep endpointView
	c.getJSON("/v1/endpoints/"+id, &ep)
	return ep
}

// eventually polls cond every 100ms until it holds or the deadline passes.
func (c client) eventually(what string, cond func() bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), apiTimeout)
	defer cancel()
	if poll.Until(ctx, 100*time.Millisecond, cond) != nil {
		c.t.Fatalf("timed out after %s waiting until %s", apiTimeout, what)
	}
}

// browser is one headless Chromium tab.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string

	mu       sync.Mutex
	messages []chromedp.ConsoleMessage
}

func startBrowser(t *testing.T, chrome string) *browser {
	t.Helper()
	dir := os.Getenv("LANEWAY_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome),
		chromedp.WindowSize(1440, 900),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, dir: dir}

	// The first Do starts the browser, bound to the context it gets, so it
	// gets no deadline of its own: a watchdog bounds it instead.
	started := make(chan struct{})
	go func() {
		select {
		case <-started:
		case <-time.After(2 * time.Minute):
			cancel()
		}
	}()
	err := chromedp.Do(ctx)
	close(started)
	if err != nil {
		t.Fatalf("start %s: %v", chrome, err)
	}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.messages = append(b.messages, m)
			b.mu.Unlock()
		}
	}()
	return b
}

// do runs steps within stepTimeout; on failure it saves a screenshot and
// the page's text and fails the test.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

func run[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}

// poll waits until the JavaScript expression is truthy in the page.
func (b *browser) poll(what, expr string) {
	b.t.Helper()
	b.do(what, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(stepTimeout), chromedp.WithPollingInterval(100*time.Millisecond)))
}

func (b *browser) searchEvents(since, until time.Time) {
	b.t.Helper()
	local := func(t time.Time) string {
		return run(b, "format a time", chromedp.Evaluate[string](fmt.Sprintf("toLocalInput(new Date(%d))", t.UnixMilli())))
	}
	b.do(fmt.Sprintf("search events from %s to %s", since.Format(time.TimeOnly), until.Format(time.TimeOnly)),
		chromedp.SetValue(chromedp.ID("events-since"), local(since)),
		chromedp.SetValue(chromedp.ID("events-until"), local(until)),
		chromedp.Click(chromedp.ID("events-search")),
	)
}

func (b *browser) shot(name string) {
	b.t.Helper()
	png := run(b, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

func (b *browser) fail(what string, err error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if png, serr := chromedp.Run(ctx, chromedp.FullScreenshot(100)); serr == nil {
		path := filepath.Join(b.dir, "failure.png")
		if os.WriteFile(path, png, 0o644) == nil {
			b.t.Logf("screenshot of the failure: %s", path)
		}
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	b.logConsole()
	b.t.Fatalf("%s: %v\npage:\n%s", what, err, text)
}

func (b *browser) logConsole() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.messages {
		b.t.Logf("browser console: %s", m)
	}
}

// checkConsole fails on script errors and CSP violations; the 401s before
// sign-in are expected.
func (b *browser) checkConsole() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	bad := 0
	for _, m := range b.messages {
		text := m.String()
		if m.IsException() || strings.Contains(text, "Content Security Policy") || strings.Contains(text, "Uncaught") {
			b.t.Errorf("browser console: %s", text)
			bad++
		}
	}
	b.t.Logf("browser console: %d messages, %d script errors or CSP violations", len(b.messages), bad)
}
