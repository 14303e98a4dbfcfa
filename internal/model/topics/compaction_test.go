package topics_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/laneway/laneway/internal/model/topics"
)

// TestAlignConfigTopicsFixesOlderTopics: config topics an older Laneway
// created with Kafka's compaction defaults (segments rolled weekly, a 50 %
// dirty ratio, tombstones kept a day) get the settings that forget a
// rotated secret within hours; a second pass alters nothing.
func TestAlignConfigTopicsFixesOlderTopics(t *testing.T) {
	eachBackend(t, "align", func(ctx context.Context, t *testing.T, adm *kadm.Client, c topics.Config) {
		createOlderConfigTopics(ctx, t, adm, c)
		altered, err := topics.AlignConfigTopics(ctx, adm, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(altered) != 2 {
			t.Errorf("altered %v, want both config topics", altered)
		}
		checkCompacted(ctx, t, adm, c.Endpoints, c.Sources)
		if altered, err := topics.AlignConfigTopics(ctx, adm, c); err != nil || len(altered) != 0 {
			t.Errorf("second pass: altered %v, err %v; want nothing", altered, err)
		}
	})
}

// createOlderConfigTopics creates c's config topics as an older Laneway
// did: compacted, nothing else set.
func createOlderConfigTopics(ctx context.Context, t *testing.T, adm *kadm.Client, c topics.Config) {
	t.Helper()
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	for _, name := range []string{c.Endpoints, c.Sources} {
		resp, err := adm.CreateTopic(ctx, 1, -1, compact, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
}

// TestAlignConfigTopicsWithoutAlterConfigs: a principal that may describe
// but not alter the topics' configs gets an authorization error (the
// caller warns and goes on), and the command to run names the settings.
func TestAlignConfigTopicsWithoutAlterConfigs(t *testing.T) {
	c := topics.Config{Partitions: 1}.WithPrefix("acl").WithDefaults()
	var acls []kfake.ACL
	for _, name := range []string{c.Endpoints, c.Sources} {
		for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationCreate, kmsg.ACLOperationDescribe, kmsg.ACLOperationDescribeConfigs} {
			acls = append(acls, kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: name,
				Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true})
		}
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser("SCRAM-SHA-256", "admin", "admin"), kfake.User("SCRAM-SHA-256", "laneway", "secret", acls...))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	client := func(user, pass string) *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createOlderConfigTopics(ctx, t, client("admin", "admin"), c)

	altered, err := topics.AlignConfigTopics(ctx, client("laneway", "secret"), c)
	if len(altered) != 0 || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("without AlterConfigs: altered %v, err %v; want TOPIC_AUTHORIZATION_FAILED", altered, err)
	}
	const want = "kafka-configs.sh --bootstrap-server $BROKERS --alter --entity-type topics --entity-name acl.endpoints " +
		"--add-config delete.retention.ms=3600000,max.compaction.lag.ms=21600000,min.cleanable.dirty.ratio=0.01,segment.ms=3600000"
	if got := topics.AlignCommand(c.Endpoints); got != want {
		t.Errorf("AlignCommand:\n got %s\nwant %s", got, want)
	}
}
