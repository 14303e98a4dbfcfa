package feed

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// offsetFetchKey is Kafka's OffsetFetch request key.
const offsetFetchKey = 9

// pauseAfterOffsetFetch holds the first OffsetFetch answer its client
// reads until resume closes, after saying so on read: the instance that
// owns the client has read the acknowledged position, and not yet acted
// on it.
type pauseAfterOffsetFetch struct {
	once         sync.Once
	read, resume chan struct{}
}

func (h *pauseAfterOffsetFetch) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key != offsetFetchKey {
		return
	}
	h.once.Do(func() {
		close(h.read)
		<-h.resume
	})
}

// otherInstance is a second Positions on the rig's group and feeds, with
// clients of its own, as another instance of Laneway would have.
func (r *rig) otherInstance(t *testing.T, b testenv.Backend, redisHooks []redis.Hook, opts ...kgo.Opt) *Positions {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	reader, err := NewReader(ReaderConfig{Client: cl, Watcher: r.watcher, Topics: r.topics})
	if err != nil {
		t.Fatal(err)
	}
	rdb := testenv.RedisClient(t, testenv.Backend{RedisURL: r.redisURL})
	for _, h := range redisHooks {
		rdb.AddHook(h)
	}
	p, err := NewPositions(PositionsConfig{Admin: kadm.NewClient(cl), Group: r.group, Reader: reader, Topics: r.topics, Redis: rdb})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestAcksThroughTwoInstancesNeverGoBack acknowledges 12 through one
// instance that has read the position (0) but not yet stored its ack,
// while 30 is acknowledged through another: the position must stay 30, as
// seen through either instance, not drop to 12.
func TestAcksThroughTwoInstancesNeverGoBack(t *testing.T) {
	eachRedis(t, func(ctx context.Context, t *testing.T, b testenv.Backend, r *rig) {
		hook := &pauseAfterOffsetFetch{read: make(chan struct{}), resume: make(chan struct{})}
		slow := r.otherInstance(t, b, nil, kgo.WithHooks(hook))
		if got := r.overtake(ctx, t, slow, hook.read, hook.resume); got != 30 {
			t.Errorf("Ack(12) after 30 answered %d, want 30 (the position stored)", got)
		}
		r.wantAcked(ctx, t, 30, r.positions, slow)
	})
}

// pauseAfterScript holds the first script its Redis client runs until
// resume closes, after saying so on ran: the instance has moved the
// position forward in Redis and not yet committed it to Kafka.
type pauseAfterScript struct {
	once        sync.Once
	ran, resume chan struct{}
}

func (h *pauseAfterScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pauseAfterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *pauseAfterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		// A NOSCRIPT evalsha ran nothing: go-redis follows it with eval.
		if name := cmd.Name(); err == nil && (name == "evalsha" || name == "eval") {
			h.once.Do(func() {
				close(h.ran)
				<-h.resume
			})
		}
		return err
	}
}

// TestAcksCommittedOutOfOrderEndOnTheFurthest lets an ack of 12 win in
// Redis, then 30 go through another instance, and only then 12 reach
// Kafka: Kafka must end on 30, and reads through either instance show 30.
func TestAcksCommittedOutOfOrderEndOnTheFurthest(t *testing.T) {
	eachRedis(t, func(ctx context.Context, t *testing.T, b testenv.Backend, r *rig) {
		hook := &pauseAfterScript{ran: make(chan struct{}), resume: make(chan struct{})}
		slow := r.otherInstance(t, b, []redis.Hook{hook})
		r.overtake(ctx, t, slow, hook.ran, hook.resume)
		r.wantAcked(ctx, t, 30, r.positions, slow)
		fetched, err := r.adm.FetchOffsetsForTopics(ctx, r.group, r.topics.Feed("ep_a"))
		if o, ok := fetched.Lookup(r.topics.Feed("ep_a"), 0); err != nil || !ok || o.At != 30 {
			t.Errorf("Kafka holds %+v, %v; want 30", o, err)
		}
	})
}

// eachRedis runs fn with a rig whose feed ep_a holds 40 events, on kfake
// with miniredis and, when configured, with the real Redis: the Redis the
// instances share decides.
func eachRedis(t *testing.T, fn func(ctx context.Context, t *testing.T, b testenv.Backend, r *rig)) {
	for _, rb := range testenv.Redises(t) {
		t.Run(rb.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			b := testenv.Kfake(t)
			b.RedisURL = rb.RedisURL
			r := newRig(t, b)
			if err := topics.EnsureFeed(ctx, r.adm, r.topics, r.topics.Feed("ep_a")); err != nil {
				t.Fatal(err)
			}
			r.append(ctx, t, "ep_a", 40)
			fn(ctx, t, b, r)
		})
	}
}

// overtake acknowledges 12 through slow, which its hook pauses (saying so
// on paused), then 30 through the rig's own instance, then lets slow go
// on: it returns what slow's Ack answered.
func (r *rig) overtake(ctx context.Context, t *testing.T, slow *Positions, paused <-chan struct{}, resume chan struct{}) int64 {
	t.Helper()
	acked := make(chan int64, 1)
	go func() {
		got, err := slow.Ack(ctx, "ep_a", 12)
		if err != nil {
			t.Errorf("Ack(12) through the slow instance: %v", err)
		}
		acked <- got
	}()
	select {
	case <-paused:
	case <-ctx.Done():
		t.Fatal("the slow instance never reached its pause")
	}
	if got, err := r.positions.Ack(ctx, "ep_a", 30); err != nil || got != 30 {
		t.Fatalf("Ack(30) = %d, %v", got, err)
	}
	close(resume)
	return <-acked
}

// wantAcked checks the position of ep_a read through each instance.
func (r *rig) wantAcked(ctx context.Context, t *testing.T, want int64, instances ...*Positions) {
	t.Helper()
	for i, p := range instances {
		pos, err := p.Position(ctx, "ep_a")
		if err != nil || pos.Acked != want {
			t.Errorf("position through instance %d: %+v, %v; want acked %d", i, pos, err, want)
		}
	}
}
