package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/laneway/laneway/internal/inbound"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/security/secretbox"
)

// SecretsConfig says how endpoint and source secrets are kept on Kafka.
type SecretsConfig struct {
	// Ring seals the secrets (AES-256-GCM, the newest key seals). Default
	// nil: the embedded Kafka then uses <DataDir>/secrets.key, created on
	// first start (a key in memory without DataDir); a real cluster needs
	// a ring unless AllowPlaintext.
	Ring *secretbox.Ring
	// AllowPlaintext lets a real cluster run without Ring: secrets are
	// then written in plaintext, readable by anyone who can read the
	// topics. Default false: Start refuses.
	AllowPlaintext bool
	// AllowNewKey lets the embedded default create a new key file although
	// records on the config topics are sealed under keys it does not hold
	// (the data directory's key file is lost): those records stay held.
	// Default false: Start refuses with a MissingKeyError.
	AllowNewKey bool
	// KeyFile is the file Ring was read from (--secrets-key-file), for the
	// start-up check of its mode: Start warns when group or others can
	// read it. Default "": no file to check (the embedded default's own
	// key file is checked all the same).
	KeyFile string
}

// MissingKeyError is Start's refusal to create the embedded default's key
// file while records on the config topics are sealed under other keys:
// the file was deleted or lost, and a fresh key would leave those records
// held for good.
type MissingKeyError struct {
	// Path is the key file that does not exist.
	Path string
	// KeyIDs are the keys the records are sealed under, sorted.
	KeyIDs []string
	// Records counts the records sealed under them.
	Records int
}

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("refusing to create a new secrets key: %s does not exist, but %d endpoint and source records on Kafka "+
		"are sealed under key %s, which would then never open; restore the file (from a backup of the data directory, "+
		"or any key file holding %[3]s) and start again, or, if the key is lost for good, start once with "+
		"--allow-new-secrets-key (LANEWAY_ALLOW_NEW_SECRETS_KEY): those records stay held (endpoints paused, sources "+
		"rejecting) until deleted and re-created with new secrets", e.Path, e.Records, strings.Join(e.KeyIDs, ", "))
}

// KeyFileName is the embedded default's key file in its data directory.
const KeyFileName = "secrets.key"

// ErrNoSecretsKey is Start's refusal to write secrets in plaintext to a
// real cluster.
var ErrNoSecretsKey = errors.New("refusing to start against a Kafka cluster without a secrets key: endpoint and source signing secrets would be written to it in plaintext; " +
	"give --secrets-key-file (LANEWAY_SECRETS_KEY_FILE; make one with `laneway secrets new-key > secrets.key`), or --allow-plaintext-secrets to accept that")

// loadSecrets decides the ring every store seals with.
func (a *App) loadSecrets(context.Context) error {
	cfg := a.cfg.Secrets
	switch {
	case cfg.Ring != nil:
		a.secrets, a.keyFile = cfg.Ring, cfg.KeyFile
	case len(a.cfg.KafkaBrokers) > 0 && cfg.AllowPlaintext:
		a.log.Warn("secrets are written to Kafka in plaintext (--allow-plaintext-secrets): anyone who can read the endpoint and source topics can forge webhooks")
	case len(a.cfg.KafkaBrokers) > 0:
		return ErrNoSecretsKey
	case a.cfg.DataDir == "":
		// Memory only, like the embedded Kafka's data: nothing outlives it.
		ring, err := secretbox.NewRing(secretbox.NewKey(secretbox.NewKeyID(time.Now())))
		if err != nil {
			return err
		}
		a.secrets = ring
	default:
		path := filepath.Join(a.cfg.DataDir, KeyFileName)
		a.keyFile = path
		ring, err := secretbox.LoadKeyFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// Created by createSecretsKey once the topics can be read.
			a.keyToCreate = path
		case err != nil:
			return fmt.Errorf("embedded secrets key: %w", err)
		}
		a.secrets = ring
	}
	return nil
}

// createSecretsKey creates the embedded default's key file when
// loadSecrets found none. A missing file is a first start, or a deleted
// one: records on the config topics sealed under a key the new one cannot
// replace tell them apart, and then it refuses (MissingKeyError) unless
// SecretsConfig.AllowNewKey.
func (a *App) createSecretsKey(ctx context.Context) error {
	if a.keyToCreate == "" {
		return nil
	}
	needed, err := a.sealedKeyIDs(ctx)
	if err != nil {
		return fmt.Errorf("embedded secrets key: checking the config topics for sealed records: %w", err)
	}
	missing := &MissingKeyError{Path: a.keyToCreate, KeyIDs: slices.Sorted(maps.Keys(needed))}
	for _, n := range needed {
		missing.Records += n
	}
	if missing.Records > 0 && !a.cfg.Secrets.AllowNewKey {
		return missing
	}
	ring, created, err := secretbox.CreateKeyFile(a.keyToCreate, secretbox.NewKey(secretbox.NewKeyID(time.Now())))
	if err != nil {
		return fmt.Errorf("embedded secrets key: %w", err)
	}
	switch {
	case created && missing.Records > 0:
		a.log.Warn("created a new secrets key (--allow-new-secrets-key) although records are sealed under keys it does not hold: "+
			"they stay held until deleted and re-created with new secrets, or until the old key is added to the key file above the new one",
			"path", a.keyToCreate, "key_id", ring.WriteKeyID(), "missing_key_ids", missing.KeyIDs, "records", missing.Records)
	case created:
		a.log.Info("created the secrets key of the embedded Kafka: keep it with the data directory", "path", a.keyToCreate, "key_id", ring.WriteKeyID())
	}
	a.secrets = ring
	return nil
}

// sealedKeyIDs counts the latest endpoint and source records by the key
// their secrets are sealed under. It reads with no key, so every sealed
// record is held; its own logger is silent, as those are not the start's
// errors.
func (a *App) sealedKeyIDs(ctx context.Context) (map[string]int, error) {
	quiet := slog.New(slog.DiscardHandler)
	endpoints, err := endpoint.NewStore(endpoint.StoreConfig{Brokers: a.brokers, Topic: a.cfg.Topics.Endpoints,
		Logger: quiet, ClientOpts: a.clientOpts("secrets-check-endpoints")})
	if err != nil {
		return nil, err
	}
	sources, err := inbound.NewSourceStore(inbound.SourceStoreConfig{Brokers: a.brokers, Topic: a.cfg.Topics.Sources,
		Logger: quiet, ClientOpts: a.clientOpts("secrets-check-sources")})
	if err != nil {
		_ = endpoints.Stop(ctx) // returns nil
		return nil, err
	}
	out := map[string]int{}
	for _, store := range []sealedStore{endpoints, sources} {
		defer func() { _ = store.Stop(context.WithoutCancel(ctx)) }() // returns nil
		if err := store.Start(ctx); err != nil {
			return nil, err
		}
		for id, n := range store.SealedKeyIDs() {
			out[id] += n
		}
	}
	return out, nil
}

// SecretsReport is what RekeySecrets found (and did) on each config topic.
type SecretsReport struct {
	// WriteKeyID is the key new writes are sealed under.
	WriteKeyID string `json:"write_key_id"`
	// Endpoints and Sources count the records by key after any rewrite.
	Endpoints secretbox.Census `json:"endpoints"`
	Sources   secretbox.Census `json:"sources"`
}

// RekeySecrets reads the endpoint and source config topics of cfg's
// cluster with cfg's key ring and, when rewrite is set, rewrites every
// record not sealed under the newest key (plaintext ones included). It
// runs beside the serving instances: they need every key it uses in their
// key files. Endpoints and sources are both rewritten through their
// table's Update, which keeps a change another writer makes meanwhile.
func RekeySecrets(ctx context.Context, cfg Config, rewrite bool) (SecretsReport, error) {
	if len(cfg.KafkaBrokers) == 0 {
		return SecretsReport{}, errors.New("--kafka-brokers is required: rekey works on a running cluster (for the embedded Kafka, its address)")
	}
	if cfg.Secrets.Ring == nil {
		return SecretsReport{}, errors.New("--secrets-key-file is required")
	}
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Topics = cfg.Topics.WithDefaults()
	a := &App{cfg: cfg, log: cfg.Logger, registry: prometheus.NewRegistry(), secrets: cfg.Secrets.Ring}
	if err := a.startKafka(ctx); err != nil {
		return SecretsReport{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	report := SecretsReport{WriteKeyID: a.secrets.WriteKeyID()}
	// census takes a store as its constructor returns it.
	census := func(store sealedStore, err error) (secretbox.Census, error) {
		if err != nil {
			return secretbox.Census{}, err
		}
		return censusOrRekey(ctx, store, rewrite)
	}
	var err error
	if report.Endpoints, err = census(endpoint.NewStore(endpoint.StoreConfig{
		Brokers: a.brokers, Topic: a.cfg.Topics.Endpoints, Secrets: a.secrets, Logger: a.log,
		ClientOpts: a.clientOpts("secrets-endpoints"),
	})); err != nil {
		return report, fmt.Errorf("endpoints: %w", err)
	}
	if report.Sources, err = census(inbound.NewSourceStore(inbound.SourceStoreConfig{
		Brokers: a.brokers, Topic: a.cfg.Topics.Sources, Secrets: a.secrets, Logger: a.log,
		ClientOpts: a.clientOpts("secrets-sources"),
	})); err != nil {
		return report, fmt.Errorf("sources: %w", err)
	}
	return report, nil
}

// sealedStore is a config store that seals secrets.
type sealedStore interface {
	component
	Census() secretbox.Census
	SealedKeyIDs() map[string]int
	Rekey(ctx context.Context) (secretbox.Census, error)
}

// censusOrRekey loads store and counts its records, or rekeys them.
func censusOrRekey(ctx context.Context, store sealedStore, rewrite bool) (secretbox.Census, error) {
	defer func() { _ = store.Stop(context.WithoutCancel(ctx)) }() // returns nil
	if err := store.Start(ctx); err != nil {
		return secretbox.Census{}, err
	}
	if !rewrite {
		return store.Census(), nil
	}
	return store.Rekey(ctx)
}
