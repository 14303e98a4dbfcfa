package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// rawResult is the plain net/http baseline.
type rawResult struct {
	Requests    int     `json:"requests"`
	Errors      int64   `json:"errors"`
	Concurrency int     `json:"concurrency"`
	BodyBytes   int     `json:"body_bytes"`
	Seconds     float64 `json:"seconds"`
	PerSecond   float64 `json:"requests_per_second"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
}

// rawBaseline POSTs body to url n times from workers goroutines sharing one
// keep-alive client: what this machine does with net/http alone, to put
// Laneway's figure in proportion.
func rawBaseline(ctx context.Context, url string, n, workers int, body []byte) (rawResult, error) {
	tr := &http.Transport{
		// The default of 2 idle connections per host would make most
		// workers dial a new connection for every request.
		MaxIdleConns: workers, MaxIdleConnsPerHost: workers, IdleConnTimeout: 30 * time.Second,
		DisableCompression: true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	var next, errs atomic.Int64
	durations := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := postOnce(ctx, client, url, body); err != nil {
					errs.Add(1)
					continue
				}
				durations[w] = append(durations[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return rawResult{}, fmt.Errorf("raw baseline: %w", err)
	}
	if errs.Load() == int64(n) {
		return rawResult{}, fmt.Errorf("raw baseline: all %d requests failed", n)
	}
	all := slices.Concat(durations...)
	slices.Sort(all)
	return rawResult{
		Requests: n, Errors: errs.Load(), Concurrency: workers, BodyBytes: len(body),
		Seconds: elapsed.Seconds(), PerSecond: float64(len(all)) / elapsed.Seconds(),
		P50Ms: ms(percentile(all, 50)), P99Ms: ms(percentile(all, 99)),
	}, nil
}

// postOnce posts body to the receiver with net/http alone: the baseline
// measures net/http, so no client of Laneway's API comes between.
func postOnce(ctx context.Context, client *http.Client, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	// Reading to EOF lets the connection go back to the pool.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// percentile is the nearest-rank p-th percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
