package app

// The first steps: Kafka and Redis (embedded or configured), the clients'
// shared options and group membership, the topics, and the endpoint store.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/laneway/laneway/internal/embedded"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/plumbing/redisconn"
	"github.com/laneway/laneway/internal/plumbing/urlredact"
)

func (a *App) startKafka(context.Context) error {
	if len(a.cfg.KafkaBrokers) > 0 {
		if err := checkBrokers(a.cfg.KafkaBrokers); err != nil {
			return err
		}
		a.brokers = a.cfg.KafkaBrokers
		opts, err := a.cfg.Kafka.Opts()
		a.kafkaOpts = opts
		return err
	}
	if !a.cfg.Kafka.IsZero() {
		return errors.New("kafka TLS or SASL settings are given without --kafka-brokers: the embedded Kafka has neither; name the cluster they are for")
	}
	k, err := embedded.StartKafka(embedded.KafkaConfig{
		Addr: a.cfg.EmbeddedKafkaAddr, DataDir: a.cfg.DataDir, Partitions: int(a.cfg.Topics.Partitions),
	})
	if err != nil {
		return err
	}
	a.kafka = k
	a.brokers = []string{k.Addr()}
	a.stopping(k, stopWithin)
	return nil
}

// checkBrokers refuses a broker given as a URL or with credentials: the
// client would take it as a host name and print it, password included, in
// every dial error. Credentials go in the SASL settings.
func checkBrokers(brokers []string) error {
	for i, b := range brokers {
		if strings.Contains(b, "@") || strings.Contains(b, "://") {
			shown, _ := urlredact.Userinfo(b)
			return fmt.Errorf("--kafka-brokers entry %d (%s) is not host:port: give brokers as host:port and credentials with --kafka-sasl-* (or their *_FILE variants)", i+1, shown)
		}
	}
	return nil
}

func (a *App) startRedis(ctx context.Context) error {
	a.redisURL = a.cfg.RedisURL
	if a.redisURL == "" {
		if a.cfg.Redis != (redisconn.Config{}) {
			return errors.New("redis TLS or credential settings are given without --redis-url: the in-process Redis has neither; name the Redis they are for")
		}
		r, err := embedded.StartRedis("")
		if err != nil {
			return err
		}
		a.redis = r
		a.redisURL = r.URL()
		a.stopping(r, stopWithin)
	}
	opts, err := a.cfg.Redis.Options(a.redisURL)
	if err != nil {
		return err
	}
	a.rdb = redis.NewClient(opts)
	a.onStop(func() { _ = a.rdb.Close() })
	// Redis holds no truth: an unreachable Redis is logged, not fatal.
	if err := a.rdb.Ping(ctx).Err(); err != nil {
		a.log.Warn("redis is not reachable yet; continuing without it", "err", err)
	}
	return nil
}

// clientOpts are the options every franz-go client shares: kprom metrics
// (one kprom instance per client, told apart by a label) and the
// connection's TLS and SASL. Every client Laneway opens takes them.
func (a *App) clientOpts(name string) []kgo.Opt {
	m := kprom.NewMetrics("laneway_kafka",
		kprom.Registerer(prometheus.WrapRegistererWith(prometheus.Labels{"client": name}, a.registry)),
		kprom.WithClientLabel())
	return append([]kgo.Opt{kgo.WithHooks(m), kgo.ClientID("laneway-" + name)}, a.kafkaOpts...)
}

// groupOpts are clientOpts plus the group settings both stages share.
// Members are static (KIP-345): after a crash the restarted instance takes
// its old member's place and assignment at once, where a new dynamic member
// would make the whole group wait a session timeout for the dead one, every
// endpoint stalled meanwhile. A graceful stop leaves explicitly
// (leaveGroups), so partitions move at once on a scale-down.
func (a *App) groupOpts(name string) []kgo.Opt {
	opts := append(a.clientOpts(name), kgo.InstanceID(a.cfg.InstanceID))
	if a.cfg.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(a.cfg.SessionTimeout), kgo.HeartbeatInterval(a.cfg.SessionTimeout/5))
	}
	return opts
}

// groups are the consumer groups this instance is a static member of.
func (a *App) groups() []string {
	return topics.GroupsFor(a.cfg.GroupPrefix).Members()
}

// leaveGroups takes this instance out of its groups once its clients are
// closed: a static member's close does not leave, and without this its
// partitions would wait a session timeout before moving to the others.
func (a *App) leaveGroups() {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.brokers...)}, a.clientOpts("leave")...)...)
	if err != nil {
		a.log.Warn("leaving the consumer groups", "err", err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	for _, group := range a.groups() {
		resp, err := adm.LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs(a.cfg.InstanceID).Reason("laneway instance stopping"))
		if err == nil {
			err = leaveError(resp)
		}
		if err != nil {
			a.log.Warn("leaving a consumer group; its partitions move after the session timeout", "group", group, "err", err)
		}
	}
}

// leaveError is the first error of a leave, ignoring "not a member" (the
// group never had this instance, e.g. inbound capture-only).
func leaveError(resp kadm.LeaveGroupResponses) error {
	var first error
	resp.EachError(func(l kadm.LeaveGroupResponse) {
		if first == nil && !errors.Is(l.Err, kerr.UnknownMemberID) && !errors.Is(l.Err, kerr.GroupIDNotFound) {
			first = l.Err
		}
	})
	return first
}

func (a *App) ensureTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.brokers...)}, a.clientOpts("admin")...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	if err := topics.Ensure(ctx, adm, a.cfg.Topics); err != nil {
		return err
	}
	a.alignConfigTopics(ctx, adm)
	return nil
}

// alignConfigTopics brings the config topics' compaction settings to what
// secrets need (topics.AlignConfigTopics). Failing that (most often a
// principal without AlterConfigs on them) it warns with the command that
// does it by hand and goes on: the topics work, rotated secrets only
// linger longer.
func (a *App) alignConfigTopics(ctx context.Context, adm *kadm.Client) {
	tc := a.cfg.Topics
	altered, err := topics.AlignConfigTopics(ctx, adm, tc)
	for _, t := range altered {
		a.log.Info("config topic: compaction settings brought to the required values", "topic", t)
	}
	if err != nil {
		a.log.Warn("config topics: could not check or set their compaction settings, so rotated-out and deleted secrets "+
			"may stay on them for days; grant DescribeConfigs and AlterConfigs on them, or run: "+
			topics.AlignCommand(tc.Endpoints)+" ; "+topics.AlignCommand(tc.Sources), "err", err)
	}
}

func (a *App) startStore(ctx context.Context) error {
	store, err := endpoint.NewStore(endpoint.StoreConfig{
		Brokers: a.brokers, Topic: a.cfg.Topics.Endpoints, Secrets: a.secrets, Logger: a.log,
		ClientOpts: a.clientOpts("endpoints"),
	})
	if err != nil {
		return err
	}
	if err := a.runLoading(ctx, store, "load endpoint config"); err != nil {
		return err
	}
	a.store = store
	return nil
}
