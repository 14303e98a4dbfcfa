package jobs

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Markers remember in Redis which items a job already sent, one key an
// item, so that a resumed job (or an overlapping one, when the keys are not
// per job) does not send them twice. Losing Redis forgets them, which can
// only cause a duplicate: that is why their failures are logged, not
// returned.
type Markers struct {
	// Redis keeps the markers. Required.
	Redis redis.UniversalClient
	// TTL is how long an item is remembered. Required.
	TTL time.Duration
	// Name names the job's kind in log lines ("redrive").
	Name string
	// Logger receives Redis failures. Required.
	Logger *slog.Logger
}

// Sent reports, per key, whether its item was marked sent.
func (m Markers) Sent(ctx context.Context, keys []string) []bool {
	out := make([]bool, len(keys))
	if len(keys) == 0 {
		return out
	}
	pipe := m.Redis.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Exists(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		m.Logger.Warn(m.Name+" markers unavailable; items may be sent twice", "err", err)
		return out
	}
	for i, cmd := range cmds {
		out[i] = cmd.Val() > 0
	}
	return out
}

// Mark remembers that the keys' items were sent.
func (m Markers) Mark(ctx context.Context, keys []string) {
	if len(keys) == 0 {
		return
	}
	pipe := m.Redis.Pipeline()
	for _, k := range keys {
		pipe.Set(ctx, k, 1, m.TTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		m.Logger.Warn("could not remember sent items", "kind", m.Name, "err", err)
	}
}

// Write produces recs, then marks keys (those of the items written) sent:
// only once they are written, so that a failure sends them again rather
// than never.
func (m Markers) Write(ctx context.Context, producer *kgo.Client, recs []*kgo.Record, keys []string) error {
	if len(recs) > 0 {
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
	}
	m.Mark(ctx, keys)
	return nil
}
