package validate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape is one /metrics body of a real `laneway serve` and the metric
// family names it exposed (histograms and summaries also expose their
// _bucket/_sum/_count series names).
type scrape struct {
	body   []byte
	series map[string]bool // every series name a PromQL selector may use
}

var (
	scrapeOnce sync.Once
	scraped    *scrape
	scrapeErr  error
)

// lanewayScrape starts `laneway serve` once per test binary (embedded Kafka
// and Redis, loopback only), drives traffic through it until every metric the
// deploy artifacts use has been exposed, and returns the last scrape.
//
// Per-label metrics (deliveries by outcome, dead letters by reason, parks
// by reason) and the per-endpoint and per-partition gauges only appear once
// something happened, so the traffic is shaped to make all of it happen: a
// healthy receiver, a failing one (retries, dead letters, breaker), one
// answering 413 (dead letter) and a slow one (parked).
func lanewayScrape(t *testing.T, want []string) *scrape {
	t.Helper()
	bin, err := lanewayBinary()
	if err != nil {
		t.Fatal(err)
	}
	scrapeOnce.Do(func() { scraped, scrapeErr = runScrape(bin, want) })
	if scrapeErr != nil {
		t.Fatalf("scrape a real Laneway: %v", scrapeErr)
	}
	return scraped
}

func runScrape(bin string, want []string) (ret *scrape, retErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	slow := make(chan struct{})
	var servers []*httptest.Server
	defer func() {
		close(slow) // release the slow receiver's handlers, then close the receivers
		for _, srv := range servers {
			srv.Close()
		}
	}()
	receivers := map[string]http.HandlerFunc{
		"ok":      func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
		"failing": func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
		"too-large": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		},
		"slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-slow:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusNoContent)
		},
	}
	urls := map[string]string{}
	for name, h := range receivers {
		srv := httptest.NewServer(h)
		servers = append(servers, srv)
		urls[name] = srv.URL + "/" + name
	}

	const token = "validate-test-6386c35ac434954161491c11498f4a0f"
	dir, err := os.MkdirTemp("", "laneway-validate-scrape-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tokenFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return nil, err
	}
	// Embedded Kafka and Redis (no --kafka-brokers, no --redis-url), with
	// short retries, a breaker that opens after two failures and lanes
	// parked after 300ms, so that every outcome happens within seconds.
	p, err := startServe(bin, dir,
		"--embedded-kafka-addr", "127.0.0.1:0",
		"--data-dir", filepath.Join(dir, "data"),
		"--admin-token-file", tokenFile,
		"--instance-id", "validate",
		"--partitions", "2",
		"--allow-targets", "127.0.0.0/8",
		"--attempt-timeout", "1s",
		"--retry-base", "20ms", "--retry-max", "100ms", "--max-attempts", "3", "--max-age", "1h",
		"--commit-interval", "100ms",
		"--breaker-threshold", "2", "--breaker-pause", "1m",
		"--park-after", "300ms",
	)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := p.stop(30 * time.Second); err != nil && retErr == nil {
			ret, retErr = nil, err
		}
	}()
	if err := p.waitReady(ctx); err != nil {
		return nil, err
	}
	base := p.base

	post := func(path string, body any) error {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("POST %s: %s %s", path, resp.Status, out)
		}
		return nil
	}
	for _, name := range []string{"ok", "failing", "too-large", "slow"} {
		if err := post("/v1/endpoints", map[string]any{
			"tenant": "acme", "url": urls[name], "max_concurrency": 1,
		}); err != nil {
			return nil, err
		}
	}
	// An invalid event on the events topic is not possible through the API
	// (it validates), so invalid_event dead letters are not produced here;
	// the metric family is the same.
	for i := range 20 {
		if err := post("/v1/events", map[string]any{
			"type": "order.updated", "tenant": "acme", "entity": fmt.Sprintf("order:%d", i%5),
			"revision": i + 1, "data": map[string]any{"n": i},
		}); err != nil {
			return nil, err
		}
	}

	var last *scrape
	var missing []string
	for {
		s, err := get(ctx, base+"/metrics")
		if err == nil {
			last = s
			missing = missing[:0]
			for _, name := range want {
				if !s.series[name] {
					missing = append(missing, name)
				}
			}
			if len(missing) == 0 {
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			if last == nil {
				return nil, fmt.Errorf("no scrape of %s/metrics: %v", base, err)
			}
			return nil, fmt.Errorf("these metric names are used by the deploy artifacts but a running Laneway never exposed them: %s\n(exposed: %s)",
				strings.Join(missing, ", "), strings.Join(last.names(), ", "))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, url string) (*scrape, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	s := &scrape{body: body, series: map[string]bool{}}
	for name, f := range families {
		if len(f.GetMetric()) == 0 {
			continue
		}
		s.series[name] = true
		switch f.GetType().String() {
		case "HISTOGRAM":
			s.series[name+"_bucket"] = true
			s.series[name+"_sum"] = true
			s.series[name+"_count"] = true
		case "SUMMARY":
			s.series[name+"_sum"] = true
			s.series[name+"_count"] = true
		}
	}
	return s, nil
}

func (s *scrape) names() []string {
	out := make([]string, 0, len(s.series))
	for n := range s.series {
		out = append(out, n)
	}
	sort.Strings(out)
	return slices.Compact(out)
}
