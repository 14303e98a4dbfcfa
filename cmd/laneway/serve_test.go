package main

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/security/secretbox"
)

func TestFlagsAndEnvironment(t *testing.T) {
	env := map[string]string{
		"LANEWAY_KAFKA_BROKERS": "k1:9092,k2:9092",
		"LANEWAY_HTTP_ADDR":     "127.0.0.1:9999", // overridden by the flag below
		"LANEWAY_ALLOW_TARGETS": "127.0.0.0/8, 10.0.0.0/8",
		"LANEWAY_MAX_ATTEMPTS":  "3",
	}
	cfg, logs, err := parseServe([]string{"--http-addr", "127.0.0.1:7070", "--retry-base=2s", "--log-level", "debug"},
		func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.KafkaBrokers, ",") != "k1:9092,k2:9092" {
		t.Errorf("brokers from env = %v", cfg.KafkaBrokers)
	}
	if cfg.HTTPAddr != "127.0.0.1:7070" {
		t.Errorf("a flag must win over the environment: %s", cfg.HTTPAddr)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}
	if len(cfg.AllowTargets) != 2 || cfg.AllowTargets[0] != want[0] || cfg.AllowTargets[1] != want[1] {
		t.Errorf("allow targets = %v", cfg.AllowTargets)
	}
	if cfg.Retry.MaxAttempts != 3 || cfg.Retry.Base != 2*time.Second || cfg.Retry.MaxAge != 72*time.Hour {
		t.Errorf("retry = %+v", cfg.Retry)
	}
	if cfg.Topics.Events != "laneway.events" || cfg.EmbeddedKafkaAddr != "127.0.0.1:9092" || logs.level != "debug" {
		t.Errorf("defaults: %+v %+v", cfg.Topics, logs)
	}
}

func TestBadSettingsAreRefused(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"bad cidr":     {"LANEWAY_ALLOW_TARGETS": "not-a-cidr"},
		"bad duration": {"LANEWAY_ATTEMPT_TIMEOUT": "soon"},
	} {
		if _, _, err := parseServe(nil, func(k string) string { return env[k] }, &bytes.Buffer{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestHelpListsEveryFlagWithItsVariable(t *testing.T) {
	var out bytes.Buffer
	if _, _, err := parseServe([]string{"--help"}, func(string) string { return "" }, &out); err == nil {
		t.Fatal("--help did not stop parsing")
	}
	for _, want := range []string{"--kafka-brokers (env LANEWAY_KAFKA_BROKERS", "--redis-url", "--http-addr", "--events-topic",
		"--allow-targets (env LANEWAY_ALLOW_TARGETS", "--admin-token", "--embedded-kafka-addr"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

// The key file's path reaches the app with its ring, for the check of its
// mode at start; --allow-new-secrets-key reaches it too.
func TestSecretsKeyFileFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	if err := os.WriteFile(path, []byte(secretbox.FormatKey(secretbox.NewKey("k1"))), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := parseServe([]string{"--secrets-key-file", path, "--allow-new-secrets-key"}, func(string) string { return "" }, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Secrets.Ring == nil || cfg.Secrets.Ring.WriteKeyID() != "k1" || cfg.Secrets.KeyFile != path || !cfg.Secrets.AllowNewKey {
		t.Fatalf("secrets config %+v", cfg.Secrets)
	}
}

// Every secret `serve` takes has a *-file twin, and so a LANEWAY_*_FILE
// variable, as docs/security.md promises: a flag shows in `ps`, a variable
// in the environment of every child and crash dump. The operator webhook's
// secret had none (#27).
func TestEverySecretFlagHasAFileTwin(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	serveFlags(fs)
	secrets := 0
	fs.VisitAll(func(f *flag.Flag) {
		for _, suffix := range []string{"-secret", "-password", "-token", "-secret-access-key"} {
			if strings.HasSuffix(f.Name, suffix) {
				secrets++
				if fs.Lookup(f.Name+"-file") == nil {
					t.Errorf("--%s has no --%s-file (%s_FILE)", f.Name, f.Name, envName(f.Name))
				}
			}
		}
	})
	if secrets < 6 {
		t.Fatalf("found %d secret flags, the test no longer recognises them", secrets)
	}
	env := map[string]string{"LANEWAY_OPERATOR_WEBHOOK_SECRET_FILE": "/run/secrets/operator-webhook"}
	cfg, _, err := parseServe(nil, func(k string) string { return env[k] }, &bytes.Buffer{})
	if err != nil || cfg.OperatorWebhookSecretFile != "/run/secrets/operator-webhook" {
		t.Errorf("LANEWAY_OPERATOR_WEBHOOK_SECRET_FILE: %q, %v", cfg.OperatorWebhookSecretFile, err)
	}
}
