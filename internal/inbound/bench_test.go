package inbound

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// BenchmarkCapture measures the front door under concurrent load: ACK
// latency (p50, p99, max, as the sender sees it, HTTP included) and the
// capture rate, with up to `conc` senders on keep-alive connections posting
// pre-signed ~1 KiB Stripe events. It runs on the real broker when
// LANEWAY_TEST_KAFKA_BROKERS is set, else on kfake.
//
//   - closed: every sender posts its next request as soon as the last one
//     is answered: the maximum capture rate (latency there is queueing:
//     conc / rate).
//   - rate=R: requests are due at R per second whatever the answers (open
//     loop); latency counts from when a request was due, so queueing
//     behind a slow answer is not hidden.
//
// verify=true runs the verify stage in the same process (sharing the CPU)
// and also reports the rate at which captures were verified and forwarded.
//
//	scripts/testenv.sh up; eval "$(scripts/testenv.sh env)"
//	go test ./inbound/ -run '^$' -bench Capture -benchtime 20000x
//	scripts/testenv.sh down
func BenchmarkCapture(b *testing.B) {
	backend := testenv.Kfake(b)
	if real, ok := testenv.RealKafka(); ok {
		backend = real
	}
	for _, verify := range []bool{false, true} {
		for _, load := range []struct {
			conc int
			rate float64 // 0: closed loop
		}{{16, 0}, {64, 0}, {64, 1000}, {64, 2000}} {
			mode := "closed"
			if load.rate > 0 {
				mode = fmt.Sprintf("rate=%.0f", load.rate)
			}
			b.Run(fmt.Sprintf("%s/verify=%v/%s/conc=%d", backend.Name, verify, mode, load.conc), func(b *testing.B) {
				benchCapture(b, backend, load.conc, load.rate, verify)
			})
		}
	}
}

func benchCapture(b *testing.B, backend testenv.Backend, conc int, rate float64, verify bool) {
	f := newFixture(b, backend)
	reg := prometheus.NewRegistry()
	s := f.service(func(c *Config) { c.CaptureOnly = !verify; c.Registerer = reg }, nil)
	c := server(b, s)
	c.createSource(map[string]any{"id": "stripe", "kind": "stripe", "tenant": "acme", "secret": "whsec_bench"})

	// Pre-signed requests, so the senders only send.
	const distinct = 512
	pad := bytes.Repeat([]byte("x"), 900)
	type req struct {
		body []byte
		h    http.Header
	}
	reqs := make([]req, distinct)
	for i := range reqs {
		body := fmt.Appendf(nil, `{"id":"evt_%d","type":"invoice.paid","data":{"object":{"id":"in_%d","pad":"%s"}}}`, i, i%50, pad)
		reqs[i] = req{body, stripeHeaders("whsec_bench", time.Now(), body)}
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}}
	send := func(r req) (time.Duration, error) {
		hr, _ := http.NewRequest(http.MethodPost, c.base+"/in/stripe", bytes.NewReader(r.body))
		hr.Header = r.h.Clone()
		start := time.Now()
		resp, err := hc.Do(hr)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read to the end, or the connection is not reused
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return 0, fmt.Errorf("status %d", resp.StatusCode)
		}
		return time.Since(start), nil
	}
	// Warm up connections, metadata and the producer.
	for i := range conc {
		if _, err := send(reqs[i]); err != nil {
			b.Fatal(err)
		}
	}

	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				var due time.Time
				if rate > 0 {
					due = start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
					if wait := time.Until(due); wait > 0 {
						time.Sleep(wait)
					}
				}
				d, err := send(reqs[i%distinct])
				if err != nil {
					failed.Store(err)
					return
				}
				if rate > 0 {
					d = time.Since(due) // from when it was due: queueing counts
				}
				latencies[i] = d
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[min(len(latencies)-1, int(p*float64(len(latencies))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(latencies[len(latencies)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "captures/s")
	b.ReportMetric(0, "ns/op")
	if verify {
		total := int64(b.N + conc)
		deadline := time.After(5 * time.Minute)
		for {
			totals, changed := s.verifier.progress()
			if decidedAtLeast(total)(totals) {
				break
			}
			select {
			case <-changed:
			case <-deadline:
				b.Fatalf("only %v of %d captures decided", totals, total)
			}
		}
		b.ReportMetric(float64(total)/time.Since(start).Seconds(), "verified/s")
		mean, p99 := histogramStats(b, reg, "laneway_inbound_verify_delay_seconds")
		b.ReportMetric(mean*1000, "verify-delay-mean-ms")
		b.ReportMetric(p99*1000, "verify-delay-p99<=ms")
	}
}

// histogramStats returns the mean of a histogram (all series summed) and
// the upper bound of the bucket holding its 99th percentile.
func histogramStats(b *testing.B, reg *prometheus.Registry, name string) (mean, p99 float64) {
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var count uint64
	var sum float64
	buckets := map[float64]uint64{}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			h := m.GetHistogram()
			count += h.GetSampleCount()
			sum += h.GetSampleSum()
			for _, bk := range h.GetBucket() {
				buckets[bk.GetUpperBound()] += bk.GetCumulativeCount()
			}
		}
	}
	if count == 0 {
		return 0, 0
	}
	bounds := slices.Sorted(maps.Keys(buckets))
	p99 = math.Inf(1)
	for _, ub := range bounds {
		if float64(buckets[ub]) >= 0.99*float64(count) {
			p99 = ub
			break
		}
	}
	return sum / float64(count), p99
}
