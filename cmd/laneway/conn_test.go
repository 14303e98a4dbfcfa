package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

func TestConnectionFlagsAndVariables(t *testing.T) {
	env := map[string]string{
		"LANEWAY_KAFKA_BROKERS":                  "k1:9093",
		"LANEWAY_KAFKA_TLS_CA_FILE":              "/etc/laneway/ca.pem",
		"LANEWAY_KAFKA_SASL_MECHANISM":           "SCRAM-SHA-512",
		"LANEWAY_KAFKA_SASL_USERNAME":            "laneway",
		"LANEWAY_KAFKA_SASL_PASSWORD_FILE":       "/run/secrets/kafka",
		"LANEWAY_KAFKA_SASL_TOKEN_FILE":          "/run/secrets/token",
		"LANEWAY_KAFKA_AWS_SESSION_TOKEN_FILE":   "/run/secrets/aws",
		"LANEWAY_REDIS_URL":                      "rediss://redis:6380/0",
		"LANEWAY_REDIS_USERNAME":                 "laneway",
		"LANEWAY_REDIS_PASSWORD_FILE":            "/run/secrets/redis",
		"LANEWAY_REDIS_TLS_INSECURE_SKIP_VERIFY": "true",
	}
	cfg, _, err := parseServe([]string{"--kafka-tls-cert-file", "c.pem", "--kafka-tls-key-file", "k.pem"},
		func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	k, s, r := cfg.Kafka.TLS, cfg.Kafka.SASL, cfg.Redis
	if k.CAFile != "/etc/laneway/ca.pem" || k.CertFile != "c.pem" || k.KeyFile != "k.pem" {
		t.Errorf("kafka tls %+v", k)
	}
	if s.Mechanism != "SCRAM-SHA-512" || s.Username != "laneway" || s.PasswordFile != "/run/secrets/kafka" ||
		s.TokenFile != "/run/secrets/token" || s.AWSSessionTokenFile != "/run/secrets/aws" {
		t.Errorf("kafka sasl %+v", s)
	}
	if r.Username != "laneway" || r.PasswordFile != "/run/secrets/redis" || !r.TLS.InsecureSkipVerify {
		t.Errorf("redis %+v", r)
	}
}

// TestServeNeverPrintsTheRedisPassword runs `serve` against a Redis that
// wants a password given in the URL, at debug level, and checks that the
// banner and every log line name Redis without the password, while the
// password did reach Redis (Laneway writes its health there).
func TestServeNeverPrintsTheRedisPassword(t *testing.T) {
	const password = "hunter2-banner-secret"
	mr := miniredis.RunT(t)
	mr.RequireUserAuth("laneway", password)
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, []string{
			"--redis-url", "redis://laneway:" + password + "@" + mr.Addr() + "/0",
			"--http-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0", "--data-dir", "",
			"--log-level", "debug",
		}, &stdout, &stderr)
	}()
	base := waitForBanner(t, &stdout, &stderr, done)
	// A published event leaves its idempotency key in Redis: proof that
	// the password in the URL was used.
	resp, err := http.Post(base+"/v1/events", "application/json",
		strings.NewReader(`{"id":"evt-banner","type":"t","tenant":"acme","entity":"e:1","revision":1,"data":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || len(mr.Keys()) == 0 {
		t.Fatalf("publish: %s, Redis keys %v: want 202 and an idempotency key in Redis", resp.Status, mr.Keys())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if !strings.Contains(stdout.String(), "redis://laneway:xxxxx@"+mr.Addr()) {
		t.Errorf("the banner does not name Redis, redacted:\n%s", stdout.String())
	}
	for name, out := range map[string]string{"banner": stdout.String(), "logs": stderr.String()} {
		if strings.Contains(out, password) {
			t.Errorf("the %s contain the Redis password:\n%s", name, out)
		}
	}
}

// waitForBanner waits for serve's banner and returns the API's base URL.
func waitForBanner(t *testing.T, stdout, stderr *lockedBuffer, done <-chan error) string {
	t.Helper()
	console := regexp.MustCompile(`Console: +(http://[0-9.:]+)/`)
	deadline := time.After(2 * time.Minute)
	for {
		if m := console.FindStringSubmatch(stdout.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned early: %v\n%s", err, stderr.String())
		case <-deadline:
			t.Fatalf("no banner within 2m; stderr:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Typos that leave the URL parsable but the password outside its user
// info ("rediss//…", "redis:/…") printed it in the start error (#27).
func TestServeRefusesABadRedisURLWithoutEchoingThePassword(t *testing.T) {
	const password = "hunter2-error-secret"
	for _, url := range []string{
		"redis://laneway:" + password + "@[::1:6379/0",
		"rediss//default:" + password + "@redis.internal:6379",
		"redis:/default:" + password + "@redis.internal:6379",
	} {
		var stdout, stderr lockedBuffer
		err := serve(context.Background(), []string{
			"--redis-url", url,
			"--http-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0", "--data-dir", "",
		}, &stdout, &stderr)
		if err == nil {
			t.Fatalf("a malformed Redis URL was accepted: %s", strings.ReplaceAll(url, password, "…"))
		}
		if all := err.Error() + stdout.String() + stderr.String(); strings.Contains(all, password) {
			t.Errorf("the error or output contains the password: %v\n%s", err, all)
		}
	}
}

// A Kafka broker given as a URL with credentials (they belong in
// --kafka-sasl-*) is refused at start, and the error does not repeat the
// password (#27).
func TestServeRefusesCredentialsInKafkaBrokers(t *testing.T) {
	const password = "hunter2-kafka-secret"
	for _, broker := range []string{"kafka://laneway:" + password + "@kafka.internal:9092", "laneway:" + password + "@kafka.internal:9092"} {
		var stdout, stderr lockedBuffer
		err := serve(context.Background(), []string{
			"--kafka-brokers", "kafka-0.internal:9092," + broker, "--allow-plaintext-secrets",
			"--http-addr", "127.0.0.1:0", "--data-dir", "",
		}, &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), "--kafka-brokers") {
			t.Fatalf("a broker with credentials: %v, want a refusal naming --kafka-brokers", err)
		}
		if all := err.Error() + stdout.String() + stderr.String(); strings.Contains(all, password) {
			t.Errorf("the error or output contains the password: %v\n%s", err, all)
		}
	}
}
