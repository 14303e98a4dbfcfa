package main

import (
	"bufio"
	"context"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
)

// metricsSnapshot is one gather of Laneway's registry, by family name.
type metricsSnapshot map[string][]*dto.Metric

func snapshot(g prometheus.Gatherer) metricsSnapshot {
	families, _ := g.Gather() // a partial gather is still worth reporting
	s := metricsSnapshot{}
	for _, f := range families {
		s[f.GetName()] = f.GetMetric()
	}
	return s
}

func metricValue(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	}
	return 0
}

// value is the series of family name labelled label=value (0 if absent:
// Laneway stops reporting an endpoint once its lane is idle).
func (s metricsSnapshot) value(name, label, value string) float64 {
	for _, m := range s[name] {
		if hasLabel(m.GetLabel(), label, value) {
			return metricValue(m)
		}
	}
	return 0
}

// sum adds up every series of family name.
func (s metricsSnapshot) sum(name string) float64 {
	total := 0.0
	for _, m := range s[name] {
		total += metricValue(m)
	}
	return total
}

// byLabel maps each series of family name by the value of label.
func (s metricsSnapshot) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range s[name] {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += metricValue(m)
			}
		}
	}
	return out
}

// sampler calls fn every interval (and once at once) until stopped.
type sampler struct {
	stop func()
}

func startSampler(every time.Duration, fn func(now time.Time)) sampler {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		fn(time.Now())
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				fn(now)
			}
		}
	})
	return sampler{stop: sync.OnceFunc(func() {
		close(done)
		wg.Wait()
	})}
}

// memory is the process's memory at one moment.
type memory struct {
	RSSMB float64 `json:"rss_mb"`
	// PeakRSSMB is the kernel's high-water mark of RSS (VmHWM) so far: it
	// catches a peak that falls between two samples.
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	HeapInuseMB float64 `json:"heap_inuse_mb"`
	Goroutines  int     `json:"goroutines"`
}

func readMemory() memory {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	rss, _ := readStatusKB("VmRSS")
	peak, _ := readStatusKB("VmHWM")
	return memory{RSSMB: mb(rss), PeakRSSMB: mb(peak), HeapInuseMB: mb(int64(m.HeapInuse)), Goroutines: runtime.NumGoroutine()}
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// readStatusKB reads a size field of /proc/self/status (Linux only), in bytes.
func readStatusKB(field string) (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := parseStatusKB(sc.Text(), field); ok {
			return v, true
		}
	}
	return 0, false
}

// parseStatusKB reads a "VmRSS:   123456 kB" line of /proc/<pid>/status
// if it is the named field.
func parseStatusKB(line, field string) (int64, bool) {
	rest, ok := strings.CutPrefix(line, field+":")
	if !ok {
		return 0, false
	}
	fields := strings.Fields(rest)
	if len(fields) != 2 || fields[1] != "kB" {
		return 0, false
	}
	kb, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil || kb < 0 {
		return 0, false
	}
	return kb << 10, true
}

// offsetSample is a consumer group's committed offsets and the partitions'
// end offsets at one moment.
type offsetSample struct {
	at        time.Time
	committed map[int32]int64 // absent: nothing committed yet
	end       map[int32]int64
}

func sampleOffsets(ctx context.Context, adm *kadm.Client, group, topic string) (offsetSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := offsetSample{at: time.Now(), committed: map[int32]int64{}, end: map[int32]int64{}}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return s, err
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return s, err
	}
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil && o.At >= 0 {
			s.committed[o.Partition] = o.At
		}
	})
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil {
			s.end[o.Partition] = o.Offset
		}
	})
	return s, nil
}

// partitionProgress says how a partition's committed offset moved over a
// run of offset samples.
type partitionProgress struct {
	Partition      int32 `json:"partition"`
	FirstCommitted int64 `json:"first_committed"`
	FinalCommitted int64 `json:"final_committed"`
	FinalEnd       int64 `json:"final_end"`
	// CaughtUp: the final commit is at the end. The deliveries topic is
	// written in transactions, so its last offset is a commit marker that
	// no consumer sees: a caught-up commit is end-1 (or end).
	CaughtUp bool `json:"caught_up"`
	// MaxTrailSeconds is how far, in time, the commit fell behind the log:
	// at each sample, the time since the log's end was where the commit is
	// now (0 when caught up). It stays small while the commit keeps up,
	// even if the commit moves only a little at a time, and grows by the
	// sampling interval per sample while something holds it back.
	MaxTrailSeconds float64 `json:"max_trail_seconds"`
	Moved           bool    `json:"moved"`
}

// trail is how long ago the log's end of partition p was at or below
// committed, as seen at the last of samples: the time since the most recent
// earlier sample whose end the commit has reached. When the commit is below
// even the first sample's end, the time since the first sample is a lower
// bound.
func trail(p int32, samples []offsetSample, committed int64) time.Duration {
	now := samples[len(samples)-1]
	if committed >= now.end[p]-1 {
		return 0
	}
	for j := len(samples) - 2; j >= 0; j-- {
		if samples[j].end[p] <= committed+1 {
			return now.at.Sub(samples[j].at)
		}
	}
	return now.at.Sub(samples[0].at)
}

// firstCommit is how long after the first sample any partition first had
// a committed offset; 0 when none ever had.
func firstCommit(samples []offsetSample) time.Duration {
	for _, s := range samples {
		for _, c := range s.committed {
			if c >= 0 {
				return s.at.Sub(samples[0].at)
			}
		}
	}
	return 0
}

// commitProgress summarises offset samples per partition.
func commitProgress(samples []offsetSample) []partitionProgress {
	if len(samples) == 0 {
		return nil
	}
	parts := map[int32]bool{}
	for _, s := range samples {
		for p := range s.end {
			parts[p] = true
		}
	}
	out := make([]partitionProgress, 0, len(parts))
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		out = append(out, progressOf(p, samples))
	}
	return out
}

func progressOf(p int32, samples []offsetSample) partitionProgress {
	committedAt := func(s offsetSample) int64 {
		if c, ok := s.committed[p]; ok {
			return c
		}
		return -1
	}
	last := samples[len(samples)-1]
	pp := partitionProgress{Partition: p, FirstCommitted: committedAt(samples[0]),
		FinalCommitted: committedAt(last), FinalEnd: last.end[p]}
	pp.CaughtUp = pp.FinalCommitted >= pp.FinalEnd-1
	pp.Moved = pp.FinalCommitted != pp.FirstCommitted
	for i, si := range samples {
		pp.MaxTrailSeconds = max(pp.MaxTrailSeconds, trail(p, samples[:i+1], committedAt(si)).Seconds())
	}
	return pp
}
