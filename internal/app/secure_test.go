package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/inbound"
	"github.com/laneway/laneway/internal/kafka/kafkaconn"
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
	b := testenv.Backend{Name: "secure", Brokers: sec.Brokers, RedisURL: sec.RedisURL}
	f, a, api := scenario(t, b, func(cfg *app.Config) {
		cfg.Kafka, cfg.Redis = sec.Kafka, sec.Redis
		grant(t, sec, sec.KafkaPrincipal(), lanewayACLs(cfg.Topics, cfg.GroupPrefix))
		grant(t, sec, sec.ProducerPrincipal(), producerACLs(cfg.Topics))
	})
	subs := createSubscriptions(t, api, f)
	producer, err := sec.Producer.Opts()
	if err != nil {
		t.Fatal(err)
	}
	expected := publishEvents(t, a, 2000, 100, subs, producer...)
	total := 0
	for _, ids := range expected {
		total += len(ids)
	}
	waitForTotal(t, f, int64(total), 3*time.Minute)
	checkDeliveries(t, subs, expected)
	checkDoorSearchesAndSealing(t, f, a, api, sec)
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
	cl, err := kgo.NewClient(kgo.SeedBrokers(sec.AdminBrokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
		results, err := kadm.NewClient(cl).CreateACLs(ctx, b)
		if err != nil {
			t.Fatalf("create ACLs %+v: %v", a, err)
		}
		for _, r := range results {
			if r.Err != nil {
				t.Fatalf("create ACL %+v: %v", r, r.Err)
			}
		}
	}
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
