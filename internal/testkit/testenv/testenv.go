// Package testenv chooses the Kafka and Redis that integration tests run
// against: the real broker and Redis named by LANEWAY_TEST_KAFKA_BROKERS and
// LANEWAY_TEST_REDIS_URL (the test command starts them), or franz-go's kfake
// and miniredis in-process when those are unset.
package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Env variables the test command sets.
const (
	KafkaEnv = "LANEWAY_TEST_KAFKA_BROKERS"
	RedisEnv = "LANEWAY_TEST_REDIS_URL"
)

// Backend is where a test's Kafka and Redis live.
type Backend struct {
	Name     string // "real" or "kfake"
	Brokers  []string
	RedisURL string
}

// RealKafka returns the real broker's backend, or false when none is set.
func RealKafka() (Backend, bool) {
	brokers := os.Getenv(KafkaEnv)
	redisURL := os.Getenv(RedisEnv)
	if brokers == "" || redisURL == "" {
		return Backend{}, false
	}
	return Backend{Name: "real", Brokers: strings.Split(brokers, ","), RedisURL: redisURL}, true
}

// Kfake starts an in-process kfake cluster and miniredis for this test.
func Kfake(t testing.TB) Backend {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(8))
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	mr := miniredis.RunT(t)
	return Backend{Name: "kfake", Brokers: c.ListenAddrs(), RedisURL: "redis://" + mr.Addr() + "/0"}
}

// Embedded is the backend of Laneway's embedded default: no brokers and no
// Redis URL, so the service starts its own kfake and in-process Redis.
var Embedded = Backend{Name: "embedded"}

// Each runs fn as a subtest against the embedded default and, when
// configured, the real broker and Redis.
func Each(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Run("embedded", func(t *testing.T) { fn(t, Embedded) })
	if b, ok := RealKafka(); ok {
		t.Run("real", func(t *testing.T) { fn(t, b) })
	} else {
		t.Logf("%s not set: skipping the real-broker run", KafkaEnv)
	}
}

// Kafkas returns kfake and, when configured, the real broker: the Kafkas
// a test of Kafka plumbing runs against.
func Kafkas(t testing.TB) []Backend {
	out := []Backend{Kfake(t)}
	if b, ok := RealKafka(); ok {
		out = append(out, b)
	} else {
		t.Logf("%s not set: skipping the real-broker run", KafkaEnv)
	}
	return out
}

var seq atomic.Int64

// Unique returns a name no other test in this or an earlier run uses, for
// topics and groups on a shared broker.
func Unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d-%d", prefix, os.Getpid(), time.Now().UnixNano()%1e9, seq.Add(1))
}

// KeepForever is a topic config without retention, for tests that stamp
// records in the past: the real broker's retention check would otherwise
// delete them (it runs every few minutes) while the test reads.
func KeepForever() map[string]*string {
	forever := "-1"
	return map[string]*string{"retention.ms": &forever}
}

// WaitStable waits until partition 0 of topic is stable: the last
// transaction's marker written (the coordinator writes markers after
// EndTransaction returns, and until then the last stable offset hides the
// committed records before it).
func WaitStable(ctx context.Context, t testing.TB, adm *kadm.Client, topic string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ends, err1 := adm.ListEndOffsets(ctx, topic)
		stable, err2 := adm.ListCommittedOffsets(ctx, topic)
		if err1 == nil && err2 == nil {
			e, _ := ends.Lookup(topic, 0)
			st, _ := stable.Lookup(topic, 0)
			if e.Err == nil && st.Err == nil && st.Offset == e.Offset {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the last stable offset of %s never reached its end", topic)
		case <-tick.C:
		}
	}
}
