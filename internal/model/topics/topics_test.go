package topics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/poll"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestConfigTopicsForgetSupersededValuesWithinHours: the compacted config
// topics (which hold sealed secrets) are created with the settings that
// compact a replaced or deleted value away within hours.
func TestConfigTopicsForgetSupersededValuesWithinHours(t *testing.T) {
	eachBackend(t, "topics", func(ctx context.Context, t *testing.T, adm *kadm.Client, c topics.Config) {
		if err := topics.Ensure(ctx, adm, c); err != nil {
			t.Fatal(err)
		}
		checkCompacted(ctx, t, adm, c.Endpoints, c.Sources)
	})
}

// eachBackend runs fn as a subtest on kfake and, when configured, the real
// broker, with an admin client and topics named after prefix.
func eachBackend(t *testing.T, prefix string, fn func(ctx context.Context, t *testing.T, adm *kadm.Client, c topics.Config)) {
	bs := testenv.Kafkas(t)
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			fn(ctx, t, kadm.NewClient(cl), topics.Config{Partitions: 1}.WithPrefix(testenv.Unique(prefix)).WithDefaults())
		})
	}
}

// checkCompacted fails t unless every topic named holds CompactedConfigs.
// A real broker shows an altered config a moment after the controller
// accepted it, so the check waits (up to 15 s) for the drift to go.
func checkCompacted(ctx context.Context, t *testing.T, adm *kadm.Client, names ...string) {
	t.Helper()
	var drift []string
	wait, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	poll.Until(wait, 50*time.Millisecond, func() bool {
		drift = settingsDrift(ctx, t, adm, names...)
		return len(drift) == 0
	})
	for _, d := range drift {
		t.Error(d)
	}
}

// settingsDrift describes names and lists each setting that differs from
// CompactedConfigs.
func settingsDrift(ctx context.Context, t *testing.T, adm *kadm.Client, names ...string) []string {
	t.Helper()
	described, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	var drift []string
	for _, rc := range described {
		if rc.Err != nil {
			t.Fatalf("%s: %v", rc.Name, rc.Err)
		}
		got := map[string]string{}
		for _, cfg := range rc.Configs {
			got[cfg.Key] = cfg.MaybeValue()
		}
		for k, want := range topics.CompactedConfigs {
			if got[k] != want {
				drift = append(drift, fmt.Sprintf("%s: %s = %q, want %q", rc.Name, k, got[k], want))
			}
		}
	}
	return drift
}

// TestOwnTopicsTakeTheBrokersTime: the topics only Laneway writes, whose
// record timestamps mean nothing to it (each value carries its own times),
// are created with LogAppendTime. A broker then stamps their records itself
// and never refuses one for its timestamp (INVALID_TIMESTAMP, which Kafka
// 4 answers to a record more than an hour ahead of its clock), so a host
// whose clock runs fast does not stall its parking and dead letters.
func TestOwnTopicsTakeTheBrokersTime(t *testing.T) {
	eachBackend(t, "stamped", func(ctx context.Context, t *testing.T, adm *kadm.Client, c topics.Config) {
		if err := topics.Ensure(ctx, adm, c); err != nil {
			t.Fatal(err)
		}
		described, err := adm.DescribeTopicConfigs(ctx, c.Deliveries, c.Parked, c.Dead)
		if err != nil {
			t.Fatal(err)
		}
		for _, rc := range described {
			v, err := rc.Configs, rc.Err
			if err != nil {
				t.Fatalf("%s: %v", rc.Name, err)
			}
			got := ""
			for _, cfg := range v {
				if cfg.Key == "message.timestamp.type" {
					got = cfg.MaybeValue()
				}
			}
			if got != "LogAppendTime" {
				t.Errorf("%s: message.timestamp.type = %q, want LogAppendTime", rc.Name, got)
			}
		}
	})
}
