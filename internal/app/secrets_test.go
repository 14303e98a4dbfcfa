package app_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/inbound"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

func TestStartRefusesPlaintextSecretsOnACluster(t *testing.T) {
	_, err := app.Start(context.Background(), app.Config{
		KafkaBrokers: []string{"127.0.0.1:9"}, HTTPAddr: "127.0.0.1:0", Logger: testenv.Logger(),
	})
	if !errors.Is(err, app.ErrNoSecretsKey) {
		t.Fatalf("Start against a cluster without a key = %v, want ErrNoSecretsKey", err)
	}
}

// TestEmbeddedKeepsItsKeyInTheDataDir: the embedded default seals with a
// key it creates in its data directory, and reads its secrets back after
// a restart.
func TestEmbeddedKeepsItsKeyInTheDataDir(t *testing.T) {
	dir := t.TempDir()
	secret := endpoint.NewSecret()
	ep := endpoint.Endpoint{ID: "ep_1", Tenant: "acme", URL: "https://example.com/hooks", MaxConcurrency: 4,
		Status: endpoint.StatusActive, Secrets: []endpoint.Secret{{Value: secret}}}
	start := func() *app.App { // the default topic names, so the restart finds them
		return startWith(t, app.Config{DataDir: dir, EmbeddedKafkaAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
			Topics: topics.Config{Partitions: 1}, Logger: testenv.Logger()})
	}
	a := start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Endpoints().Put(ctx, ep); err != nil {
		t.Fatal(err)
	}
	ring, err := secretbox.LoadKeyFile(filepath.Join(dir, app.KeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	if keys := testenv.SealedKeyIDs(ctx, t, a.Brokers(), a.Topics().Endpoints, secret[len(endpoint.SecretPrefix):]); keys["ep_1"] != ring.WriteKeyID() {
		t.Fatalf("ep_1 on the embedded topic: %q, want sealed under the key file's %s", keys["ep_1"], ring.WriteKeyID())
	}
	stopApp(t, a)
	if st, err := os.Stat(filepath.Join(dir, app.KeyFileName)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file in the data dir: %v, %v", st, err)
	}
	again := start()
	if got, ok := again.Endpoints().Get("ep_1"); !ok || len(got.Secrets) != 1 || got.Secrets[0].Value != secret || got.Paused {
		t.Fatalf("after a restart ep_1 reads %+v", got)
	}
}

// TestRekeySecretsWhileServing follows the rotation runbook: the serving
// instance's key file lists the new key k2 first (it reads k2, seals k1);
// rekey, run with k2 last, moves every record to k2, plaintext ones
// included; the instance still reads them all, and a key file without k1
// reads everything.
func TestRekeySecretsWhileServing(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		k1, k2 := secretbox.NewKey("k1"), secretbox.NewKey("k2")
		a := startApp(t, b, func(c *app.Config) { c.Secrets.Ring = testenv.Ring(t, k2, k1) })
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		secret := putSecretEndpoint(ctx, t, a, "ep_1")
		putPlaintextSource(ctx, t, a)

		cfg := app.Config{KafkaBrokers: a.Brokers(), Topics: a.Topics(), Logger: testenv.Logger(),
			Secrets: app.SecretsConfig{Ring: testenv.Ring(t, k1, k2)}}
		before, err := app.RekeySecrets(ctx, cfg, false)
		if err != nil || before.Endpoints.ByKey["k1"] != 1 || before.Sources.ByKey[secretbox.Plaintext] != 1 {
			t.Fatalf("status before rekey: %+v, %v", before, err)
		}
		report, err := app.RekeySecrets(ctx, cfg, true)
		if err != nil || report.WriteKeyID != "k2" || report.Endpoints.Rewritten != 1 || report.Sources.Rewritten != 1 {
			t.Fatalf("rekey: %+v, %v", report, err)
		}
		for topic, id := range map[string]string{a.Topics().Endpoints: "ep_1", a.Topics().Sources: "gh"} {
			if keys := testenv.SealedKeyIDs(ctx, t, a.Brokers(), topic); keys[id] != "k2" {
				t.Fatalf("%s after rekey: %v", topic, keys)
			}
		}
		waitEndpoint(t, a.Endpoints(), "ep_1", func(e endpoint.Endpoint) bool {
			return !e.Paused && len(e.Secrets) == 1 && e.Secrets[0].Value == secret
		})
		cfg.Secrets.Ring = testenv.Ring(t, k2) // k1 removed from the key file
		after, err := app.RekeySecrets(ctx, cfg, false)
		if err != nil || len(after.Endpoints.Unreadable)+len(after.Sources.Unreadable) != 0 ||
			after.Endpoints.ByKey["k2"] != 1 || after.Sources.ByKey["k2"] != 1 {
			t.Fatalf("status with k2 alone: %+v, %v", after, err)
		}
	})
}

// putSecretEndpoint writes an active endpoint id with a fresh secret, and
// returns the secret.
func putSecretEndpoint(ctx context.Context, t *testing.T, a *app.App, id string) string {
	t.Helper()
	secret := endpoint.NewSecret()
	if err := a.Endpoints().Put(ctx, endpoint.Endpoint{ID: id, Tenant: "acme", URL: "https://example.com/hooks",
		MaxConcurrency: 4, Status: endpoint.StatusActive, Secrets: []endpoint.Secret{{Value: secret}}}); err != nil {
		t.Fatal(err)
	}
	return secret
}

// putPlaintextSource writes source gh as an instance without a key did.
func putPlaintextSource(ctx context.Context, t *testing.T, a *app.App) {
	t.Helper()
	s, err := inbound.NewSourceStore(inbound.SourceStoreConfig{Brokers: a.Brokers(), Topic: a.Topics().Sources, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer testenv.Stop(t, s.Stop)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	src := inbound.Source{ID: "gh", Kind: inbound.KindGitHub, Tenant: "acme", Secret: "legacy-github-secret"}
	src.SetDefaults()
	if err := s.Put(ctx, src); err != nil {
		t.Fatal(err)
	}
}

// TestRotatedOutKeyLeavesNothingHeld: after a rotation (records rewritten
// under k2, k1 removed from the key file) the compacted endpoints topic
// still holds ep_1's record under k1 until compaction. Only an id's latest
// record counts: a start with k2 alone holds nothing and logs no ERROR.
func TestRotatedOutKeyLeavesNothingHeld(t *testing.T) {
	b := testenv.Kfake(t)
	k1, k2 := secretbox.NewKey("k1"), secretbox.NewKey("k2")
	cfg := appConfig(t, b, "rotated")
	cfg.Secrets.Ring = testenv.Ring(t, k1)
	a := startWith(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	secret := putSecretEndpoint(ctx, t, a, "ep_1")
	rekey := cfg
	rekey.Secrets.Ring = testenv.Ring(t, k1, k2)
	if report, err := app.RekeySecrets(ctx, rekey, true); err != nil || report.Endpoints.Rewritten != 1 {
		t.Fatalf("rekey: %+v, %v", report, err)
	}
	stopApp(t, a)
	if keys := testenv.RawRecords(ctx, t, b.Brokers, cfg.Topics.Endpoints); len(keys) != 2 {
		t.Fatalf("the endpoints topic holds %d records, want ep_1's under k1 and under k2", len(keys))
	}

	var logs logCapture
	cfg.Secrets.Ring, cfg.Logger = testenv.Ring(t, k2), logs.logger()
	again := startWith(t, cfg)
	if e, ok := again.Endpoints().Get("ep_1"); !ok || e.Paused || len(e.Secrets) != 1 || e.Secrets[0].Value != secret {
		t.Fatalf("with k2 alone ep_1 reads %+v, %v; want it active with its secret", e, ok)
	}
	if errs := logs.at(slog.LevelError); len(errs) > 0 {
		t.Fatalf("a start after a complete rotation logged errors: %v", errs)
	}
}

// TestEmbeddedRefusesANewKeyOverSealedRecords: the data directory's key
// file is deleted while endpoints sealed under it remain on the topics.
// The next start refuses to create a fresh key, naming the missing key and
// the ways out, and creates nothing; told to (AllowNewKey), it creates a key
// under a new id, and the old records stay held.
func TestEmbeddedRefusesANewKeyOverSealedRecords(t *testing.T) {
	dir := t.TempDir()
	cfg := app.Config{DataDir: dir, EmbeddedKafkaAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Topics: topics.Config{Partitions: 1}, Logger: testenv.Logger()}
	a := startWith(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	putSecretEndpoint(ctx, t, a, "ep_1")
	stopApp(t, a)
	keyFile := filepath.Join(dir, app.KeyFileName)
	old, err := secretbox.LoadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}

	err = startErr(t, cfg)
	var missing *app.MissingKeyError
	if !errors.As(err, &missing) || !slices.Equal(missing.KeyIDs, []string{old.WriteKeyID()}) ||
		!strings.Contains(err.Error(), "restore") || !strings.Contains(err.Error(), "--allow-new-secrets-key") {
		t.Fatalf("Start without the key that sealed ep_1 = %v; want a MissingKeyError naming %s, restore and --allow-new-secrets-key", err, old.WriteKeyID())
	}
	if _, err := os.Stat(keyFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused start left a key file: %v", err)
	}

	var logs logCapture
	cfg.Secrets.AllowNewKey, cfg.Logger = true, logs.logger()
	again := startWith(t, cfg)
	created, err := secretbox.LoadKeyFile(keyFile)
	if err != nil || created.WriteKeyID() == old.WriteKeyID() || created.Has(old.WriteKeyID()) {
		t.Fatalf("the new key file: %v; its key must not reuse the lost key's id %s", err, old.WriteKeyID())
	}
	if e, _ := again.Endpoints().Get("ep_1"); !e.Paused || len(e.Secrets) != 0 {
		t.Fatalf("ep_1 sealed under the lost key reads %+v; want it held", e)
	}
	if len(logs.matching(slog.LevelWarn, "new secrets key")) != 1 {
		t.Fatalf("no warning that a new key was created over sealed records: %v", logs.at(slog.LevelInfo))
	}
}
