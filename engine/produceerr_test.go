package engine

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A produce the broker refuses for its timestamp (INVALID_TIMESTAMP: the
// record is stamped more than log.message.timestamp.after.max.ms ahead of
// the broker's clock, on a CreateTime topic) is retried like any failure,
// but never lands until the clock or the topic is fixed: it is logged at
// ERROR with that cause and the fix, and counted by topic. Other failures
// are left to the caller's log. kfake enforces no timestamp limit, so the
// refusal is injected here rather than provoked.
func TestRefusedTimestampIsLoggedAndCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	if n := refusedSeries(t, reg); n != 2 {
		t.Fatalf("before any refusal %d series of laneway_produce_timestamp_refused_total, want parked and dead, for the alert", n)
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	rec := &kgo.Record{Topic: "laneway.dead", Timestamp: time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)}

	if noteProduceFailure(log, m, produceDead, rec, errors.New("broker not available")) {
		t.Fatal("an ordinary produce failure was taken for a refused timestamp")
	}
	if !noteProduceFailure(log, m, produceDead, rec, fmt.Errorf("produce: %w", kerr.InvalidTimestamp)) {
		t.Fatal("INVALID_TIMESTAMP was not recognised")
	}
	var counted dto.Metric
	if err := m.timestampRefused.WithLabelValues(produceDead).Write(&counted); err != nil {
		t.Fatal(err)
	}
	if got := counted.GetCounter().GetValue(); got != 1 {
		t.Fatalf("laneway_produce_timestamp_refused_total{kind=dead} = %v, want 1", got)
	}
	out := logs.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "topic=laneway.dead") ||
		!strings.Contains(out, "clock") || !strings.Contains(out, "LogAppendTime") {
		t.Fatalf("want one ERROR line naming the topic, the clock and the fix, got:\n%s", out)
	}
	if !noteProduceFailure(log, nil, produceDead, rec, kerr.InvalidTimestamp) {
		t.Fatal("without metrics the refusal is still recognised")
	}
}

// refusedSeries is how many series reg exposes of the refusal counter.
func refusedSeries(t *testing.T, reg *prometheus.Registry) int {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "laneway_produce_timestamp_refused_total" {
			return len(f.GetMetric())
		}
	}
	return 0
}
