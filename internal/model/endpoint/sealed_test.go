package endpoint_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

func sealedStore(t *testing.T, b testenv.Backend, topic string, ring *secretbox.Ring) *endpoint.Store {
	t.Helper()
	s, err := endpoint.NewStore(endpoint.StoreConfig{Brokers: b.Brokers, Topic: topic, Secrets: ring})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.StopOnCleanup(t, s.Stop)
	return s
}

func withSecrets(id string, secrets ...string) endpoint.Endpoint {
	e := endpoint.Endpoint{ID: id, Tenant: "acme", URL: "https://example.com/hooks", MaxConcurrency: 4, Status: endpoint.StatusActive}
	for i, s := range secrets {
		sec := endpoint.Secret{Value: s}
		if i > 0 { // rotated out, kept during the overlap
			sec.ExpiresAt = time.Now().Add(time.Hour).UTC()
		}
		e.Secrets = append(e.Secrets, sec)
	}
	return e
}

// rawKeys is testenv.SealedKeyIDs, checking for the base64 part of
// each whsec_ secret.
func rawKeys(ctx context.Context, t *testing.T, b testenv.Backend, topic string, secrets ...string) map[string]string {
	t.Helper()
	raw := make([]string, len(secrets))
	for i, s := range secrets {
		raw[i] = strings.TrimPrefix(s, endpoint.SecretPrefix)
	}
	return testenv.SealedKeyIDs(ctx, t, b.Brokers, topic, raw...)
}

func TestEndpointSecretsAreSealedOnTheTopic(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			topic := configTopic(t, b)
			r := testenv.Ring(t, secretbox.NewKey("k1"))
			current, old := endpoint.NewSecret(), endpoint.NewSecret()
			writer := sealedStore(t, b, topic, r)
			if err := writer.Put(ctx, withSecrets("ep_1", old)); err != nil {
				t.Fatal(err)
			}
			// A rotation keeps the old secret during the overlap: both sealed.
			if _, _, err := writer.Update(ctx, "ep_1", func(e endpoint.Endpoint) (endpoint.Endpoint, bool, error) {
				return withSecrets("ep_1", current, old), true, nil
			}); err != nil {
				t.Fatal(err)
			}
			if keys := rawKeys(ctx, t, b, topic, current, old); keys["ep_1"] != "k1" {
				t.Fatalf("latest record of ep_1 sealed under %q, want k1", keys["ep_1"])
			}
			reader := sealedStore(t, b, topic, r)
			got, ok := reader.Get("ep_1")
			if !ok || len(got.Secrets) != 2 || got.Secrets[0].Value != current || got.Secrets[1].Value != old || got.Paused {
				t.Fatalf("a store with the key reads %+v", got)
			}
		})
	}
}

func TestEndpointHeldWhenItsKeyIsMissing(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			topic := configTopic(t, b)
			writer := sealedStore(t, b, topic, testenv.Ring(t, secretbox.NewKey("k1")))
			if err := writer.Put(ctx, withSecrets("ep_1", endpoint.NewSecret())); err != nil {
				t.Fatal(err)
			}
			other := sealedStore(t, b, topic, testenv.Ring(t, secretbox.NewKey("k2")))
			got, ok := other.Get("ep_1")
			if !ok || !got.Paused || len(got.Secrets) != 0 || len(got.SigningSecrets(time.Now())) != 0 {
				t.Fatalf("without k1, ep_1 reads %+v (ok %v); want it present, paused, without secrets", got, ok)
			}
			got.Paused = false
			if err := other.Put(ctx, got); !errors.Is(err, endpoint.ErrSecretsUnavailable) {
				t.Fatalf("Put of a held endpoint = %v, want ErrSecretsUnavailable", err)
			}
			if _, _, err := other.Update(ctx, "ep_1", func(e endpoint.Endpoint) (endpoint.Endpoint, bool, error) {
				e.Paused = false
				return e, true, nil
			}); !errors.Is(err, endpoint.ErrSecretsUnavailable) {
				t.Fatalf("Update of a held endpoint = %v, want ErrSecretsUnavailable", err)
			}
			if c := other.Census(); c.Unreadable["ep_1"] == "" || !strings.Contains(c.Unreadable["ep_1"], `"k1"`) {
				t.Fatalf("census %+v does not name ep_1 and its missing key", c)
			}
			if _, err := other.Rekey(ctx); err != nil {
				t.Fatalf("rekey with a held endpoint: %v", err)
			}
			if keys := rawKeys(ctx, t, b, topic); keys["ep_1"] != "k1" {
				t.Fatalf("the held record was rewritten: now under %q", keys["ep_1"])
			}
			if got, ok := writer.Get("ep_1"); !ok || len(got.Secrets) != 1 {
				t.Fatalf("the store with the key lost the secrets: %+v", got)
			}
			if err := other.Delete(ctx, "ep_1"); err != nil {
				t.Fatalf("Delete of a held endpoint: %v", err)
			}
		})
	}
}

// TestSealedSecretsDoNotMoveBetweenEndpoints copies ep_1's sealed secrets
// into ep_2's record, as a writer on the topic could: ep_2 is held, never
// signed with ep_1's secrets.
func TestSealedSecretsDoNotMoveBetweenEndpoints(t *testing.T) {
	b := testenv.Kfake(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := configTopic(t, b)
	r := testenv.Ring(t, secretbox.NewKey("k1"))
	s := sealedStore(t, b, topic, r)
	if err := s.Put(ctx, withSecrets("ep_1", endpoint.NewSecret())); err != nil {
		t.Fatal(err)
	}
	recs := testenv.RawRecords(ctx, t, b.Brokers, topic)
	forged := bytes.Replace(recs[0].Value, []byte(`"id":"ep_1"`), []byte(`"id":"ep_2"`), 1)
	testenv.ProduceRaw(ctx, t, b.Brokers, topic, "ep_2", forged)
	reader := sealedStore(t, b, topic, r)
	if got, ok := reader.Get("ep_2"); !ok || len(got.Secrets) != 0 || !got.Paused {
		t.Fatalf("ep_2 with ep_1's sealed secrets reads %+v (ok %v); want held", got, ok)
	}
}

// TestPlaintextEndpointsReadAndRekeyed: records written before sealing are
// read, rekey seals them; after a key rotation rekey moves every record to
// the new key, and a store holding only the new key reads them all.
func TestPlaintextEndpointsReadAndRekeyed(t *testing.T) {
	for _, b := range testenv.Kafkas(t) {
		t.Run(b.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			topic := configTopic(t, b)
			legacy := endpoint.NewSecret()
			value, _ := json.Marshal(withSecrets("ep_old", legacy))
			testenv.ProduceRaw(ctx, t, b.Brokers, topic, "ep_old", value)

			k1, k2 := secretbox.NewKey("k1"), secretbox.NewKey("k2")
			s1 := sealedStore(t, b, topic, testenv.Ring(t, k1))
			if got, ok := s1.Get("ep_old"); !ok || len(got.Secrets) != 1 || got.Secrets[0].Value != legacy {
				t.Fatalf("legacy plaintext endpoint reads %+v", got)
			}
			fresh := endpoint.NewSecret()
			if err := s1.Put(ctx, withSecrets("ep_new", fresh)); err != nil {
				t.Fatal(err)
			}
			c, err := s1.Rekey(ctx)
			if err != nil || c.Rewritten != 1 || c.ByKey["k1"] != 2 || len(c.ByKey) != 1 {
				t.Fatalf("rekey of the plaintext record: %+v, %v", c, err)
			}
			if keys := rawKeys(ctx, t, b, topic, fresh); keys["ep_old"] != "k1" {
				t.Fatalf("after rekey ep_old is %q on the topic", keys["ep_old"])
			}

			s2 := sealedStore(t, b, topic, testenv.Ring(t, k1, k2))
			c, err = s2.Rekey(ctx)
			if err != nil || c.Rewritten != 2 || c.ByKey["k2"] != 2 || len(c.ByKey) != 1 {
				t.Fatalf("rekey to k2: %+v, %v", c, err)
			}
			if keys := rawKeys(ctx, t, b, topic, fresh); keys["ep_old"] != "k2" || keys["ep_new"] != "k2" {
				t.Fatalf("after rekey the topic holds %v", keys)
			}
			onlyK2 := sealedStore(t, b, topic, testenv.Ring(t, k2)) // k1 removed from the key file
			for id, want := range map[string]string{"ep_old": legacy, "ep_new": fresh} {
				if got, ok := onlyK2.Get(id); !ok || got.Paused || len(got.Secrets) != 1 || got.Secrets[0].Value != want {
					t.Fatalf("with k2 alone %s reads %+v", id, got)
				}
			}
			if c := onlyK2.Census(); len(c.Unreadable) != 0 || c.ByKey["k2"] != 2 {
				t.Fatalf("census with k2 alone: %+v", c)
			}
		})
	}
}
