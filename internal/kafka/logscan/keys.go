package logscan

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// KeyPartitions places record keys on one topic's partitions as its
// producers do (Kafka's default partitioner, murmur2 of the key), so that a
// search for one key reads only the partition it hashes to. It is safe for
// concurrent use.
type KeyPartitions struct {
	admin *kadm.Client
	topic string

	mu sync.Mutex
	n  int // the topic's partition count, once known
}

// NewKeyPartitions places keys on topic, reading its partition count
// through admin when first asked.
func NewKeyPartitions(admin *kadm.Client, topic string) *KeyPartitions {
	return &KeyPartitions{admin: admin, topic: topic}
}

// Of returns the distinct partitions keys hash to, in the order of the
// keys.
func (k *KeyPartitions) Of(ctx context.Context, keys ...string) ([]int32, error) {
	n, err := k.count(ctx)
	if err != nil {
		return nil, err
	}
	byKey := kgo.StickyKeyPartitioner(nil).ForTopic("")
	seen := map[int32]bool{}
	out := []int32{}
	for _, key := range keys {
		p := int32(byKey.Partition(&kgo.Record{Key: []byte(key)}, n))
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// count is the topic's partition count, read from metadata once: the
// topics are created with a fixed count.
func (k *KeyPartitions) count(ctx context.Context) (int, error) {
	k.mu.Lock()
	n := k.n
	k.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	details, err := k.admin.ListTopics(ctx, k.topic)
	if err != nil {
		return 0, fmt.Errorf("metadata of %s: %w", k.topic, err)
	}
	td, ok := details[k.topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		return 0, fmt.Errorf("metadata of %s: %v", k.topic, td.Err)
	}
	k.mu.Lock()
	k.n = len(td.Partitions)
	k.mu.Unlock()
	return len(td.Partitions), nil
}
