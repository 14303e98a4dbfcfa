package app_test

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/laneway/laneway/breaker"
	"github.com/laneway/laneway/deliver"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/deadtopic"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// Chaos receiver entities: each response class gets an entity of its own on
// one endpoint, and the receiver picks its behaviour by entity.
const (
	chaosOK       = "chaos:2xx"
	chaos500      = "chaos:500"
	chaosHang     = "chaos:hang"
	chaosReset    = "chaos:reset"
	chaosRedirect = "chaos:301"
	chaosGone     = "chaos:410"
	chaosTooLarge = "chaos:413"
	chaos429      = "chaos:429"
	chaos503Date  = "chaos:503-date"
)

// TestChaosReceiver drives one endpoint through every response class of the
// delivery contract, each on an entity of its own, and checks the outcome
// and the number of attempts of each: 2xx is delivered at once; 500, a hang
// past the attempt timeout, a connection reset and a 301 are retried until
// MaxAttempts and dead-lettered as max_attempts (the redirect target is never
// contacted); 413 is dead-lettered at once as payload_too_large; 429 with
// Retry-After in seconds and 503 with Retry-After as an HTTP date wait at
// least that long although the retry base is tiny, and then succeed; 410
// dead-letters its delivery as gone and disables the endpoint (sequenced
// last, so that the other classes are not cut short as endpoint_disabled).
func TestChaosReceiver(t *testing.T) {
	const (
		maxAttempts     = 3
		attemptTimeout  = 400 * time.Millisecond
		retryAfterSecs  = 2
		retryAfterDate  = 3 * time.Second
		timeoutErrorMsg = "no response within"
	)
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		a := startApp(t, b, func(c *app.Config) {
			// Tiny backoff: any wait of a second or more comes from Retry-After.
			// Max stays above the Retry-After figures, since it caps them too.
			c.Retry = deliver.RetryPolicy{Base: 20 * time.Millisecond, Min: 20 * time.Millisecond, Max: 10 * time.Second,
				MaxAttempts: maxAttempts, MaxAge: time.Hour}
			c.AttemptTimeout = attemptTimeout
			// Up to a dozen failures in a row across the classes: keep the
			// breaker out of the way.
			c.Breaker = breaker.Config{Threshold: 1000, FirstPause: time.Minute}
		})
		api := newAPI(t, a.HTTPAddr())

		var dateMu sync.Mutex
		var retryDate time.Time // the HTTP date the 503 named
		var rc *fleet.Recorder
		rc = startRecorder(t, func(w http.ResponseWriter, r *http.Request, rq *fleet.Request) {
			if r.URL.Path != "/hook" {
				w.WriteHeader(http.StatusOK) // the redirect target: must never be reached
				return
			}
			switch rq.Entity {
			case chaosOK:
				w.WriteHeader(http.StatusOK)
				return
			case chaos500:
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write([]byte("boom"))
				return
			case chaosHang:
				// No response until the client gives up (or the test ends).
				select {
				case <-r.Context().Done():
				case <-rc.Closing():
				}
				return
			case chaosReset:
				resetConnection(t, w)
				return
			case chaosRedirect:
				w.Header().Set("Location", rc.URL("/moved"))
				w.WriteHeader(http.StatusMovedPermanently)
				return
			case chaosGone:
				w.WriteHeader(http.StatusGone)
				return
			case chaosTooLarge:
				w.WriteHeader(http.StatusRequestEntityTooLarge)
				return
			case chaos429:
				if rq.Attempt == 1 {
					w.Header().Set("Retry-After", strconv.Itoa(retryAfterSecs))
					w.WriteHeader(http.StatusTooManyRequests)
					return
				}
				w.WriteHeader(http.StatusOK)
				return
			case chaos503Date:
				if rq.Attempt == 1 {
					// HTTP dates have whole seconds: the wait asked for is
					// between retryAfterDate-1s and retryAfterDate.
					date := time.Now().Add(retryAfterDate).UTC().Truncate(time.Second)
					dateMu.Lock()
					retryDate = date
					dateMu.Unlock()
					w.Header().Set("Retry-After", date.Format(http.TimeFormat))
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				w.WriteHeader(http.StatusOK)
				return
			}
			w.WriteHeader(http.StatusBadRequest)
		})
		ep := api.createEndpoint(map[string]any{"tenant": "chaos", "url": rc.URL("/hook"), "max_concurrency": 10})
		setSecret(t, rc, ep.Secret)
		waitForAPIStatus(t, api, ep.ID, "active")

		// Every class but 410, which disables the endpoint: it comes last.
		first := []string{chaosOK, chaos500, chaosHang, chaosReset, chaosRedirect, chaosTooLarge, chaos429, chaos503Date}
		var values [][]byte
		for _, entity := range first {
			values = append(values, envelope(eventIDOf(entity), "chaos", entity, 1))
		}
		publishTo(t, a.Brokers(), a.Topics().Events, values)

		dead := map[string]string{ // entity -> reason
			chaos500: event.ReasonMaxAttempts, chaosHang: event.ReasonMaxAttempts, chaosReset: event.ReasonMaxAttempts,
			chaosRedirect: event.ReasonMaxAttempts, chaosTooLarge: event.ReasonTooLarge,
		}
		dlr := deadtopic.Follow(t, a.Brokers(), a.Topics().Dead)
		dlr.Until(t, time.Minute, "the dead letters of 500, hang, reset, 301 and 413", func(dls []event.DeadLetter) bool {
			return len(deadLettersByEntity(dls, ep.ID, dead)) == len(dead)
		})
		delivered := []string{chaosOK, chaos429, chaos503Date}
		waitRecorded(t, rc, time.Minute, "2xx for 2xx, 429 and 503", func() bool {
			got := rc.Delivered()
			for _, entity := range delivered {
				if _, ok := got[eventIDOf(entity)]; !ok {
					return false
				}
			}
			return true
		})

		seen := func(entity string) []fleet.Request {
			return rc.Requests(func(rq fleet.Request) bool { return rq.Path == "/hook" && rq.Entity == entity })
		}
		statuses := func(reqs []fleet.Request) []int {
			var out []int
			for _, rq := range reqs {
				out = append(out, rq.Status)
			}
			return out
		}
		expectStatuses := func(entity string, want ...int) []fleet.Request {
			t.Helper()
			reqs := seen(entity)
			if got := statuses(reqs); !slices.Equal(got, want) {
				t.Errorf("%s: receiver saw statuses %v, want %v", entity, got, want)
			}
			return reqs
		}

		// 2xx: one attempt, delivered.
		expectStatuses(chaosOK, 200)
		// 500 and 301: MaxAttempts attempts, then max_attempts; the 301 is
		// never followed.
		expectStatuses(chaos500, 500, 500, 500)
		expectStatuses(chaosRedirect, 301, 301, 301)
		// A hang: every attempt is abandoned at the attempt timeout.
		expectStatuses(chaosHang, 0, 0, 0)
		// 413: dead at once.
		expectStatuses(chaosTooLarge, 413)

		// A connection reset is retried, up to MaxAttempts by Laneway's count
		// (the dead letter's, checked below). The receiver sees at least that
		// many requests, possibly more: deliver.Sender sends an
		// Idempotency-Key, so net/http resends a request at once, within the
		// same attempt, when a connection it holds as reused (idle in its
		// pool) is reset before any response byte. How many of the pool's
		// connections an attempt runs through is up to net/http.
		resets := seen(chaosReset)
		for _, rq := range resets {
			if rq.Status != 0 {
				t.Errorf("%s: a request was answered %d", chaosReset, rq.Status)
			}
		}
		if len(resets) < maxAttempts {
			t.Errorf("%s: receiver saw %d requests, want at least the %d attempts", chaosReset, len(resets), maxAttempts)
		}
		t.Logf("%s: %d requests for %d attempts (net/http resends on reused keep-alive connections)",
			chaosReset, len(resets), maxAttempts)

		// 429 with Retry-After: 2 and 503 with an HTTP date: the retry waits
		// for it although the backoff alone would be ~20 ms, then succeeds.
		if reqs := expectStatuses(chaos429, 429, 200); len(reqs) == 2 {
			if gap := reqs[1].At.Sub(reqs[0].At); gap < retryAfterSecs*time.Second {
				t.Errorf("%s: retried after %v, Retry-After asked for %ds", chaos429, gap, retryAfterSecs)
			} else {
				t.Logf("%s: retried after %v (Retry-After: %d)", chaos429, gap, retryAfterSecs)
			}
		}
		if reqs := expectStatuses(chaos503Date, 503, 200); len(reqs) == 2 {
			dateMu.Lock()
			date := retryDate
			dateMu.Unlock()
			gap := reqs[1].At.Sub(reqs[0].At)
			if reqs[1].At.Before(date) || gap < retryAfterDate-time.Second {
				t.Errorf("%s: retried at %s, %v after the 503; Retry-After named %s",
					chaos503Date, reqs[1].At.UTC().Format(time.RFC3339Nano), gap, date.Format(http.TimeFormat))
			} else {
				t.Logf("%s: retried after %v (Retry-After: %s)", chaos503Date, gap, date.Format(http.TimeFormat))
			}
		}

		// The dead letters: reason, attempts by Laneway's count, last error.
		letters := deadLettersByEntity(dlr.Letters(), ep.ID, dead)
		lastError := map[string]string{
			chaos500: "500", chaosHang: timeoutErrorMsg, chaosReset: "", chaosRedirect: "redirects are not followed",
			chaosTooLarge: "413",
		}
		for entity, dl := range letters {
			if dl.Delivery != nil {
				t.Logf("%s: dead letter %s after %d attempts: %s", entity, dl.Reason, dl.Delivery.Attempts, dl.Delivery.LastError)
			}
			want := maxAttempts
			if entity == chaosTooLarge {
				want = 1
			}
			if dl.Delivery == nil {
				t.Errorf("%s: dead letter without its delivery: %+v", entity, dl)
				continue
			}
			if dl.Delivery.Attempts != want {
				t.Errorf("%s: dead letter counts %d attempts, want %d", entity, dl.Delivery.Attempts, want)
			}
			if dl.Delivery.LastError == "" || !strings.Contains(dl.Delivery.LastError, lastError[entity]) {
				t.Errorf("%s: dead letter last error %q, want it to mention %q", entity, dl.Delivery.LastError, lastError[entity])
			}
			if len(dl.Delivery.Data) == 0 || dl.Delivery.EventID != eventIDOf(entity) {
				t.Errorf("%s: dead letter lacks the payload: %+v", entity, dl.Delivery)
			}
		}
		if got := endpointStatus(t, api, ep.ID); got != "active" {
			t.Fatalf("endpoint status %q before the 410, want active", got)
		}

		// 410, last: the delivery is dead as gone after one attempt and the
		// endpoint is disabled.
		publishTo(t, a.Brokers(), a.Topics().Events, [][]byte{envelope(eventIDOf(chaosGone), "chaos", chaosGone, 1)})
		dead[chaosGone] = event.ReasonGone
		dlr.Until(t, time.Minute, "the 410's dead letter", func(dls []event.DeadLetter) bool {
			return len(deadLettersByEntity(dls, ep.ID, dead)) == len(dead)
		})
		if dl := deadLettersByEntity(dlr.Letters(), ep.ID, dead)[chaosGone]; dl.Delivery == nil || dl.Delivery.Attempts != 1 ||
			!strings.Contains(dl.Delivery.LastError, "410") {
			t.Errorf("%s: dead letter %+v, want 1 attempt and the 410 as last error", chaosGone, dl.Delivery)
		}
		expectStatuses(chaosGone, 410)
		waitForAPIStatus(t, api, ep.ID, "disabled")

		// Nothing else was dead-lettered for the endpoint: its letters are
		// keyed by endpoint id, so all of them sit in one partition in
		// write order, and the 410's was written last.
		var mine []event.DeadLetter
		for _, dl := range dlr.Letters() {
			if dl.EndpointID == ep.ID {
				mine = append(mine, dl)
			}
		}
		if len(mine) != len(dead) {
			t.Errorf("%d dead letters for the endpoint, want %d: %s", len(mine), len(dead), deadtopic.Describe(mine))
		}
		if moved := rc.Requests(func(rq fleet.Request) bool { return rq.Path == "/moved" }); len(moved) != 0 {
			t.Errorf("the redirect target was contacted %d times", len(moved))
		}
		if _, bad, _ := rc.Stats(); bad != 0 {
			t.Errorf("%d requests failed signature verification", bad)
		}
	})
}

func eventIDOf(entity string) string { return "evt-" + strings.ReplaceAll(entity, ":", "-") }

// deadLettersByEntity picks, from dls, the dead letter of each entity in want
// for endpoint id whose reason is the one wanted.
func deadLettersByEntity(dls []event.DeadLetter, id string, want map[string]string) map[string]event.DeadLetter {
	out := map[string]event.DeadLetter{}
	for _, dl := range dls {
		if dl.EndpointID != id || dl.Delivery == nil {
			continue
		}
		if reason, ok := want[dl.Delivery.Entity]; ok && reason == dl.Reason {
			out[dl.Delivery.Entity] = dl
		}
	}
	return out
}

// resetConnection takes the connection over and resets it (SO_LINGER 0),
// so the client reads ECONNRESET instead of a response.
func resetConnection(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}
