package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/security/secretbox"
)

// ProduceRaw writes one record to topic as a plain producer would, for
// tests that put a record a store did not write (an older version's).
func ProduceRaw(ctx context.Context, t testing.TB, brokers []string, topic, key string, value []byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// RawRecords reads partition 0 of topic from its start to its current end
// with a plain consumer, as anyone who can reach the brokers could: tests
// use it to look at what a store really wrote.
func RawRecords(ctx context.Context, t testing.TB, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offset of %s: %v", topic, err)
	}
	end, _ := ends.Lookup(topic, 0)
	var out []*kgo.Record
	for len(out) == 0 || out[len(out)-1].Offset+1 < end.Offset {
		if end.Offset == 0 {
			return nil
		}
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s up to offset %d: %v", topic, end.Offset, ctx.Err())
		}
		out = append(out, fetches.Records()...)
	}
	return out
}

// SealedKeyIDs reads topic raw (RawRecords) and returns, per record key,
// the key id its latest value's secrets are sealed under (its
// "secrets_sealed" field), or "plaintext" when unsealed; deleted keys are
// absent. It fails the test if any record holds one of secrets verbatim.
func SealedKeyIDs(ctx context.Context, t testing.TB, brokers []string, topic string, secrets ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range RawRecords(ctx, t, brokers, topic) {
		for _, s := range secrets {
			if bytes.Contains(r.Value, []byte(s)) {
				t.Fatalf("record at offset %d of %s holds a secret in the clear: %s", r.Offset, topic, r.Value)
			}
		}
		if r.Value == nil {
			delete(out, string(r.Key))
			continue
		}
		var v struct {
			Sealed *secretbox.Sealed `json:"secrets_sealed"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record at offset %d of %s: %v", r.Offset, topic, err)
		}
		out[string(r.Key)] = secretbox.Plaintext
		if v.Sealed != nil {
			out[string(r.Key)] = v.Sealed.KeyID
		}
	}
	return out
}

// SecretsRing is a key ring of one fresh key per test, for services a
// test starts against a real cluster (which refuse to write secrets in
// plaintext). Every instance a test starts gets the same ring: instances
// of one Laneway must share their key, or each would hold the endpoints
// whose secrets another sealed.
func SecretsRing(t testing.TB) *secretbox.Ring {
	t.Helper()
	ring, _ := perTest(t, &rings, func() any { return Ring(t, secretbox.NewKey("test")) }).(*secretbox.Ring)
	return ring
}

var rings, keyFiles sync.Map // testing.TB → the test's ring or key file

// perTest returns what newValue made for t the first time it was asked, and
// forgets it when t ends.
func perTest(t testing.TB, m *sync.Map, newValue func() any) any {
	if v, ok := m.Load(t); ok {
		return v
	}
	v, loaded := m.LoadOrStore(t, newValue())
	if !loaded {
		t.Cleanup(func() { m.Delete(t) })
	}
	return v
}

// Ring is secretbox.NewRing of keys, failing the test on error.
func Ring(t testing.TB, keys ...secretbox.Key) *secretbox.Ring {
	t.Helper()
	r, err := secretbox.NewRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// SecretsKeyFile writes a key file of one fresh key in a temporary
// directory of the test (once per test: every process shares it) and
// returns its path, for `laneway serve
// --secrets-key-file` in tests that run the binary.
func SecretsKeyFile(t testing.TB) string {
	t.Helper()
	path, _ := perTest(t, &keyFiles, func() any {
		path := filepath.Join(t.TempDir(), "secrets.key")
		if _, _, err := secretbox.EnsureKeyFile(path); err != nil {
			t.Fatal(err)
		}
		return path
	}).(string)
	return path
}
