package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/inbound"
	"github.com/laneway/laneway/internal/kafka/kafkaconn"
	"github.com/laneway/laneway/internal/kafka/kafkatxn"
	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/ops/eventsearch"
	"github.com/laneway/laneway/internal/plumbing/redisconn"
	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestEndToEndOverSASLSSLAndRedisTLS runs Laneway against the real broker's
// SASL_SSL listener as a SCRAM user holding only the ACLs docs/deploy.md
// lists, and against the TLS Redis that wants a password; a second SCRAM
// user holding only the producer's ACL publishes. Every endpoint must get
// exactly its events, in order, within its limit, signed.
func TestEndToEndOverSASLSSLAndRedisTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sec := testenv.RealSecure(t)
	var logs logCapture
	t.Cleanup(func() { revoke(t, sec, sec.KafkaPrincipal(), offsetsTopicACL) })
	f, a, api := secureScenario(t, sec, &logs, lanewayACLs)
	subs, expected := publishSecurely(t, sec, f, a, api, 2000, 100)
	checkDeliveries(t, subs, expected)
	checkDoorSearchesAndSealing(t, f, a, api, sec)
	// Granted the table's rows, every transaction safety check ran: the
	// markers after each commit, the hanging check, the group's offsets.
	for _, line := range logs.at(slog.LevelWarn) {
		for _, says := range []string{"safety check cannot run", "cannot check that a transaction's markers landed", "hanging transaction check failed"} {
			if strings.Contains(line.Msg, says) {
				t.Errorf("with the documented ACLs: %s", line)
			}
		}
	}
}

// TestSafetyChecksRunOnOwnTopicsWithoutTheOffsetsGrant is the least
// privilege below the table: without Describe and Read on
// __consumer_offsets, the transaction safety checks still run on
// Laneway's own topics (the markers after each commit), and only the part
// that reads the group's pending offsets says, once per producer, that it
// cannot run, with the gauge an alert watches.
func TestSafetyChecksRunOnOwnTopicsWithoutTheOffsetsGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	sec := testenv.RealSecure(t)
	var logs logCapture
	revoke(t, sec, sec.KafkaPrincipal(), offsetsTopicACL) // whatever ran before
	f, a, api := secureScenario(t, sec, &logs, func(tc topics.Config, groupPrefix string) []acl {
		return withoutOffsetsTopic(lanewayACLs(tc, groupPrefix))
	})
	publishSecurely(t, sec, f, a, api, 200, 20)
	got := map[string]int{}
	for _, line := range logs.matching(slog.LevelError, "safety check cannot run") {
		if line.Attrs["check"] != kafkatxn.CheckGroupOffsets {
			t.Errorf("a check of Laneway's own topics could not run: %s", line)
		}
		got[line.Attrs["producer"]]++
	}
	if got["fanout"] != 1 {
		t.Errorf("the fan-out said %d times that the group offsets check cannot run, want once", got["fanout"])
	}
	if v := gaugeValue(t, a.Registry(), "laneway_txn_safety_check_unavailable", map[string]string{"producer": "fanout", "check": "group_offsets"}); v != 1 {
		t.Errorf("laneway_txn_safety_check_unavailable{producer=fanout,check=group_offsets} = %v, want 1", v)
	}
}

// secureScenario starts Laneway over the SASL_SSL listener and the TLS
// Redis, its principal granted what acls lists and the producer's
// principal its one ACL, logging into logs.
func secureScenario(t *testing.T, sec testenv.Secure, logs *logCapture, acls func(topics.Config, string) []acl) (*fleet.Fleet, *app.App, apiClient) {
	t.Helper()
	b := testenv.Backend{Name: "secure", Brokers: sec.Brokers, RedisURL: sec.RedisURL}
	return scenario(t, b, func(cfg *app.Config) {
		cfg.Kafka, cfg.Redis, cfg.Logger = sec.Kafka, sec.Redis, logs.logger()
		grant(t, sec, sec.KafkaPrincipal(), acls(cfg.Topics, cfg.GroupPrefix))
		grant(t, sec, sec.ProducerPrincipal(), producerACLs(cfg.Topics))
	})
}

// publishSecurely publishes events over entities as the producer's
// principal and waits until the fleet has every delivery.
func publishSecurely(t *testing.T, sec testenv.Secure, f *fleet.Fleet, a *app.App, api apiClient, events, entities int) ([]subscription, map[string][]string) {
	t.Helper()
	subs := createSubscriptions(t, api, f)
	producer, err := sec.Producer.Opts()
	if err != nil {
		t.Fatal(err)
	}
	expected := publishEvents(t, a, events, entities, subs, producer...)
	total := 0
	for _, ids := range expected {
		total += len(ids)
	}
	waitForTotal(t, f, int64(total), 3*time.Minute)
	return subs, expected
}

// offsetsTopicACL is the grant the transaction safety checks need to see
// a group's pending offsets (docs/deploy.md's ACL table).
var offsetsTopicACL = acl{kind: "topic", names: []string{"__consumer_offsets"}, ops: []kadm.ACLOperation{kadm.OpDescribe, kadm.OpRead}}

func withoutOffsetsTopic(acls []acl) []acl {
	return slices.DeleteFunc(acls, func(a acl) bool { return slices.Contains(a.names, "__consumer_offsets") })
}

// revoke deletes the ACLs a grant of acl made for principal.
func revoke(t *testing.T, sec testenv.Secure, principal string, a acl) {
	t.Helper()
	withSuperAdmin(t, sec, func(ctx context.Context, adm *kadm.Client) {
		b := kadm.NewACLs().Allow(principal).AllowHosts().Operations(a.ops...).Topics(a.names...).ResourcePatternType(kadm.ACLPatternLiteral)
		if _, err := adm.DeleteACLs(ctx, b); err != nil {
			t.Fatalf("delete ACLs %+v: %v", a, err)
		}
	})
}

// withSuperAdmin runs fn with an admin client on the plaintext listener,
// whose anonymous clients are the test broker's super users.
func withSuperAdmin(t *testing.T, sec testenv.Secure, fn func(context.Context, *kadm.Client)) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(sec.AdminBrokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fn(ctx, kadm.NewClient(cl))
}

// checkDoorSearchesAndSealing goes on, over the same SASL_SSL connections
// and ACLs, with what the delivery check leaves out: a GitHub request
// captured at the inbound door, verified and forwarded to its tenant's two
// endpoints (one takes it, one answers 413, a dead letter at once); GET
// /v1/events and GET /v1/dead finding them; and the raw config topics,
// read as anyone who reaches the brokers could, holding no secret in the
// clear.
func checkDoorSearchesAndSealing(t *testing.T, f *fleet.Fleet, a *app.App, api apiClient, sec testenv.Secure) {
	t.Helper()
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	taking := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(100)})
	refusing := api.createEndpoint(map[string]any{"tenant": "acme", "url": f.URL(101)})
	recv, err := f.Add(100, taking.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	if err == nil {
		_, err = f.Add(101, refusing.Secret, func(w http.ResponseWriter, _ *http.Request, _ int) {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
		})
	}
	if err != nil {
		t.Fatal(err)
	}

	base := "http://" + a.HTTPAddr()
	sourceSecret := createGitHubSource(t, base, "gh-secure")
	body := []byte(`{"ref":"refs/heads/main","repository":{"full_name":"acme/app"}}`)
	if code := postGitHub(t, base+"/in/gh-secure", sourceSecret, body, http.Header{"X-Github-Delivery": {"secure-1"}}); code != http.StatusAccepted {
		t.Fatalf("POST /in/gh-secure: %d, want 202", code)
	}
	waitInboundStatus(t, api, "gh-secure", inbound.StatusVerified)
	deadline := time.After(time.Minute)
	for len(recv.Receipts()) == 0 {
		select {
		case <-f.Changed():
		case <-deadline:
			t.Fatal("the verified GitHub request was not delivered to its tenant's endpoint within a minute")
		}
	}
	if bad := recv.BadSignatures(); bad != 0 {
		t.Errorf("%d deliveries of the forwarded request failed signature verification", bad)
	}

	for _, l := range waitDeadLetters(t, api, refusing.ID, 1) {
		if l.Reason != event.ReasonTooLarge {
			t.Errorf("dead letter %s: reason %q, want %s", l.ID, l.Reason, event.ReasonTooLarge)
		}
	}
	q := url.Values{"tenant": {"acme"}, "since": {since}}
	code, out := api.do("GET", "/v1/events?"+q.Encode(), nil)
	var page eventsearch.Page
	if code != http.StatusOK || json.Unmarshal(out, &page) != nil || len(page.Items) != 1 {
		t.Errorf("GET /v1/events?%s: %d %s; want the one forwarded event", q.Encode(), code, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tc := a.Topics()
	for topic, secrets := range map[string][]string{tc.Endpoints: {taking.Secret, refusing.Secret}, tc.Sources: {sourceSecret}} {
		for key, keyID := range testenv.SealedKeyIDs(ctx, t, sec.AdminBrokers, topic, secrets...) {
			if keyID == secretbox.Plaintext {
				t.Errorf("%s: the secrets of %s are in plaintext", topic, key)
			}
		}
	}
}

// waitInboundStatus polls the source's captured requests until one has the
// status.
func waitInboundStatus(t *testing.T, api apiClient, source, status string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, out := api.do("GET", "/v1/inbound/requests?source="+source, nil)
		var page struct {
			Data []struct{ Status string }
		}
		if code != http.StatusOK || json.Unmarshal(out, &page) != nil {
			t.Fatalf("GET /v1/inbound/requests: %d %s", code, out)
		}
		for _, r := range page.Data {
			if r.Status == status {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no request of %s is %s after a minute: %s", source, status, out)
		}
		time.Sleep(100 * time.Millisecond) // polling the API: captures have no change feed
	}
}

// acl is one line of the ACL table in docs/deploy.md: operations on
// resources of one kind.
type acl struct {
	kind  string // "topic", "group", "transactional-id"
	names []string
	ops   []kadm.ACLOperation
	// prefixed: names are prefixes (transactional ids end in the instance id).
	prefixed bool
}

// lanewayACLs is what Laneway's own principal needs, mirroring
// docs/deploy.md: read and write on its topics (create, to make missing
// ones at start), describe-configs on the inbound topic, describe- and
// alter-configs on the config topics (their compaction settings), its
// consumer groups, and its transactional ids.
func lanewayACLs(tc topics.Config, groupPrefix string) []acl {
	rw := []kadm.ACLOperation{kadm.OpRead, kadm.OpWrite, kadm.OpCreate}
	g := topics.GroupsFor(groupPrefix)
	return []acl{
		{kind: "topic", names: []string{tc.Events, tc.Deliveries, tc.Parked, tc.Dead, tc.Endpoints, tc.Inbound, tc.Sources}, ops: rw},
		{kind: "topic", names: []string{tc.Inbound}, ops: []kadm.ACLOperation{kadm.OpDescribeConfigs}},
		{kind: "topic", names: []string{tc.Endpoints, tc.Sources}, ops: []kadm.ACLOperation{kadm.OpDescribeConfigs, kadm.OpAlterConfigs}},
		{kind: "group", names: []string{g.Fanout, g.Deliveries, g.Parked, g.Inbound},
			ops: []kadm.ACLOperation{kadm.OpRead}},
		{kind: "transactional-id", names: []string{g.Fanout + "-", g.Inbound + "-"},
			ops: []kadm.ACLOperation{kadm.OpWrite, kadm.OpDescribe}, prefixed: true},
		offsetsTopicACL,
	}
}

// producerACLs: a producer may write the events topic and nothing else.
func producerACLs(tc topics.Config) []acl {
	return []acl{{kind: "topic", names: []string{tc.Events}, ops: []kadm.ACLOperation{kadm.OpWrite}}}
}

// grant creates acls for principal through the plaintext listener, whose
// anonymous clients are the test broker's super users.
func grant(t *testing.T, sec testenv.Secure, principal string, acls []acl) {
	t.Helper()
	withSuperAdmin(t, sec, func(ctx context.Context, adm *kadm.Client) {
		for _, a := range acls {
			b := kadm.NewACLs().Allow(principal).AllowHosts().Operations(a.ops...)
			switch a.kind {
			case "topic":
				b.Topics(a.names...)
			case "group":
				b.Groups(a.names...)
			case "transactional-id":
				b.TransactionalIDs(a.names...)
			}
			if a.prefixed {
				b.ResourcePatternType(kadm.ACLPatternPrefixed)
			}
			results, err := adm.CreateACLs(ctx, b)
			if err != nil {
				t.Fatalf("create ACLs %+v: %v", a, err)
			}
			for _, r := range results {
				if r.Err != nil {
					t.Fatalf("create ACL %+v: %v", r, r.Err)
				}
			}
		}
	})
}

// TestSASLSSLListenerRefusesAnonymousAndWrongPasswords: a client with the
// right credentials gets metadata; without SASL, without TLS, with a
// wrong password or an unknown user it gets nothing.
func TestSASLSSLListenerRefusesAnonymousAndWrongPasswords(t *testing.T) {
	sec := testenv.RealSecure(t)
	if err := kafkaMetadata(t, sec.Brokers, sec.Kafka); err != nil {
		t.Fatalf("the right credentials were refused: %v", err)
	}
	wrong, unknown := sec.Kafka, sec.Kafka
	wrong.SASL.Password = "not-" + sec.Kafka.SASL.Password
	unknown.SASL.Username = "mallory"
	for name, tc := range map[string]struct {
		cfg      kafkaconn.Config
		authFail bool // refused by SASL itself (rather than the connection dropped)
	}{
		"TLS without credentials": {cfg: kafkaconn.Config{TLS: sec.Kafka.TLS}},
		"credentials without TLS": {cfg: kafkaconn.Config{SASL: sec.Kafka.SASL}},
		"wrong password":          {cfg: wrong, authFail: true},
		"unknown user":            {cfg: unknown, authFail: true},
	} {
		t.Run(name, func(t *testing.T) {
			err := kafkaMetadata(t, sec.Brokers, tc.cfg)
			if err == nil {
				t.Fatal("the SASL_SSL listener answered")
			}
			if tc.authFail && !errors.Is(err, kerr.SaslAuthenticationFailed) {
				t.Fatalf("error %v: want SASL_AUTHENTICATION_FAILED", err)
			}
		})
	}
}

// kafkaMetadata asks brokers for the cluster's metadata as cfg; a refused
// connection is retried until a short deadline, then its error returned.
func kafkaMetadata(t *testing.T, brokers []string, cfg kafkaconn.Config) error {
	t.Helper()
	opts, err := cfg.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.DialTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = kadm.NewClient(cl).BrokerMetadata(ctx)
	return err
}

// TestProducerACLsAllowOnlyTheEventsTopic: with the producer's ACLs, a
// producer publishes events but cannot read the endpoint config (signing
// secrets, URLs) nor write deliveries.
func TestProducerACLsAllowOnlyTheEventsTopic(t *testing.T) {
	sec := testenv.RealSecure(t)
	ns := testenv.Unique("acl")
	tc := topicsOf(ns, 1)
	admin, err := kgo.NewClient(kgo.SeedBrokers(sec.AdminBrokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := topics.Ensure(ctx, kadm.NewClient(admin), tc); err != nil {
		t.Fatal(err)
	}
	grant(t, sec, sec.ProducerPrincipal(), producerACLs(tc))
	opts, err := sec.Producer.Opts()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sec.Brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: tc.Events, Key: []byte("e"), Value: []byte(`{}`)}).FirstErr(); err != nil {
		t.Fatalf("the producer could not publish an event: %v", err)
	}
	err = cl.ProduceSync(ctx, &kgo.Record{Topic: tc.Deliveries, Key: []byte("ep"), Value: []byte(`{}`)}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("producing to %s: %v, want TOPIC_AUTHORIZATION_FAILED", tc.Deliveries, err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, tc.Endpoints)
	if err == nil {
		err = ends.Error()
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("reading %s: %v, want TOPIC_AUTHORIZATION_FAILED", tc.Endpoints, err)
	}
}

// TestTLSRedisRefusesAnonymousAndWrongPasswords: the right user and
// password over TLS get PONG; no password, a wrong one, or no TLS do not.
func TestTLSRedisRefusesAnonymousAndWrongPasswords(t *testing.T) {
	sec := testenv.RealSecure(t)
	ping := func(cfg redisconn.Config, url string) error {
		opts, err := cfg.Options(url)
		if err != nil {
			t.Fatal(err)
		}
		opts.MaxRetries = -1
		rdb := redis.NewClient(opts)
		defer rdb.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return rdb.Ping(ctx).Err()
	}
	if err := ping(sec.Redis, sec.RedisURL); err != nil {
		t.Fatalf("the right credentials were refused: %v", err)
	}
	wrong := sec.Redis
	wrong.Password = "not-" + sec.Redis.Password
	plain := "redis" + sec.RedisURL[len("rediss"):]
	for name, tc := range map[string]struct {
		cfg  redisconn.Config
		url  string
		want string
	}{
		"no password":    {cfg: redisconn.Config{TLS: sec.Redis.TLS}, url: sec.RedisURL, want: "NOAUTH"},
		"wrong password": {cfg: wrong, url: sec.RedisURL, want: "WRONGPASS"},
		"no TLS":         {cfg: redisconn.Config{Username: sec.Redis.Username, Password: sec.Redis.Password}, url: plain},
	} {
		t.Run(name, func(t *testing.T) {
			err := ping(tc.cfg, tc.url)
			if err == nil {
				t.Fatal("Redis answered")
			}
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want %s", err, tc.want)
			}
		})
	}
}

// gaugeValue is the value of gauge name with labels in reg, or -1 if none.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			found := 0
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] == lp.GetValue() {
					found++
				}
			}
			if found == len(labels) {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
