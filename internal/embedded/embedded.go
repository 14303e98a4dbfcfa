// Package embedded runs the in-process Kafka (franz-go's kfake) and Redis
// (miniredis) that `laneway serve` uses when no brokers or Redis URL are
// configured, so a newcomer needs nothing installed. Both listen on real TCP
// addresses, so any Kafka or Redis client can talk to them.
package embedded

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/timing"
	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// DefaultKafkaAddr is where the in-process Kafka listens unless told
// otherwise: Kafka's usual port, on loopback.
const DefaultKafkaAddr = "127.0.0.1:9092"

// KafkaConfig configures the in-process Kafka.
type KafkaConfig struct {
	// Addr is the listen address. Default DefaultKafkaAddr; port 0 picks one.
	Addr string
	// DataDir persists the cluster so a restart keeps endpoints, backlog and
	// dead letters. Empty keeps everything in memory.
	DataDir string
	// Partitions is the default partition count of auto-created topics.
	// Default topics.DefaultPartitions (8), as Laneway's own topics.
	Partitions int
}

// Kafka is a running in-process Kafka cluster of one broker.
type Kafka struct {
	cluster *kfake.Cluster
	addr    string
}

// StartKafka starts the cluster and returns once it listens.
func StartKafka(cfg KafkaConfig) (*Kafka, error) {
	cfg.Addr = cmp.Or(cfg.Addr, DefaultKafkaAddr)
	cfg.Partitions = valutil.PositiveOr(cfg.Partitions, topics.DefaultPartitions)
	host, port, err := splitHostPort(cfg.Addr)
	if err != nil {
		return nil, err
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.DefaultNumPartitions(cfg.Partitions),
		// kfake binds 127.0.0.1 itself; this makes it bind the host we were given.
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, p, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start embedded kafka on %s: %w", cfg.Addr, err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) == 0 {
		c.Close()
		return nil, fmt.Errorf("embedded kafka has no listener")
	}
	return &Kafka{cluster: c, addr: addrs[0]}, nil
}

// Addr is the bootstrap address clients should use.
func (k *Kafka) Addr() string { return k.addr }

// Stop closes the cluster, flushing its data dir; ctx is not used. The
// embedded Kafka is started by StartKafka. It returns nil.
func (k *Kafka) Stop(context.Context) error {
	k.cluster.Close()
	return nil
}

// DefaultExpiryInterval is how often the in-process Redis expires keys
// whose TTL has passed, at the least.
const DefaultExpiryInterval = time.Second

// RedisConfig configures the in-process Redis.
type RedisConfig struct {
	// Addr is the listen address. Default "127.0.0.1:0" (a free port).
	Addr string
	// ExpiryInterval is how often keys past their TTL are removed.
	// miniredis only expires keys when told to; without this sweep,
	// idempotency keys and markers would accumulate for ever. A sweep
	// visits every key, so the interval grows to ten times the last
	// sweep's duration when that is longer: at most a tenth of the time
	// goes to expiry. Default: DefaultExpiryInterval (1s).
	ExpiryInterval time.Duration
	// Now is the clock TTLs run on. Default: time.Now.
	Now func() time.Time
}

// Redis is a running in-process Redis.
type Redis struct {
	srv  *miniredis.Miniredis
	stop chan struct{}
	done chan struct{}
}

// StartRedis starts an in-process Redis on addr ("" or "127.0.0.1:0" picks
// a port) with the default expiry.
func StartRedis(addr string) (*Redis, error) {
	return StartRedisWith(RedisConfig{Addr: addr})
}

// StartRedisWith starts an in-process Redis and its expiry goroutine,
// which Stop ends.
func StartRedisWith(cfg RedisConfig) (*Redis, error) {
	cfg.Addr = cmp.Or(cfg.Addr, "127.0.0.1:0")
	cfg.ExpiryInterval = valutil.PositiveOr(cfg.ExpiryInterval, DefaultExpiryInterval)
	cfg.Now = timing.Clock(cfg.Now)
	srv := miniredis.NewMiniRedis()
	if err := srv.StartAddr(cfg.Addr); err != nil {
		return nil, fmt.Errorf("start embedded redis on %s: %w", cfg.Addr, err)
	}
	r := &Redis{srv: srv, stop: make(chan struct{}), done: make(chan struct{})}
	go r.expire(cfg)
	return r, nil
}

// expire advances the TTLs of every key by the time elapsed on the clock,
// which removes the keys whose TTL has run out.
func (r *Redis) expire(cfg RedisConfig) {
	defer close(r.done)
	last := cfg.Now()
	wait := cfg.ExpiryInterval
	for timing.SleepOr(context.Background(), r.stop, wait) {
		now := cfg.Now()
		start := time.Now()
		if elapsed := now.Sub(last); elapsed > 0 {
			r.srv.FastForward(elapsed)
			last = now
		}
		wait = max(cfg.ExpiryInterval, 10*time.Since(start))
	}
}

// URL is the redis:// URL clients should use.
func (r *Redis) URL() string { return "redis://" + r.srv.Addr() + "/0" }

// Stop ends the expiry goroutine, waits for it and closes the server; ctx
// is not used. The in-process Redis is started by StartRedis. It returns
// nil.
func (r *Redis) Stop(context.Context) error {
	close(r.stop)
	<-r.done
	r.srv.Close()
	return nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("embedded kafka address %q: %w", addr, err)
	}
	port, err := net.LookupPort("tcp", p)
	if err != nil {
		return "", 0, fmt.Errorf("embedded kafka port %q: %w", p, err)
	}
	return host, port, nil
}
