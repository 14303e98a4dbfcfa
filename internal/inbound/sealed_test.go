package inbound

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

func sealedSourceStore(t *testing.T, b testenv.Backend, topic string, ring *secretbox.Ring) *SourceStore {
	t.Helper()
	s, err := NewSourceStore(SourceStoreConfig{Brokers: b.Brokers, Topic: topic, Secrets: ring, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		testenv.Stop(t, s.Stop)
		t.Fatal(err)
	}
	testenv.StopOnCleanup(t, s.Stop)
	return s
}

func githubSource(id, secret, previous string) Source {
	s := Source{ID: id, Kind: KindGitHub, Tenant: "acme", Secret: secret, PreviousSecret: previous, TypePrefix: "github."}
	s.SetDefaults()
	return s
}

func TestSourceSecretsAreSealedOnTheTopic(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		f := newFixture(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r := testenv.Ring(t, secretbox.NewKey("k1"))
		current, _ := NewSecret(KindGitHub)
		previous, _ := NewSecret(KindGitHub)
		if err := sealedSourceStore(t, b, f.topics.Sources, r).Put(ctx, githubSource("gh", current, previous)); err != nil {
			t.Fatal(err)
		}
		if keys := testenv.SealedKeyIDs(ctx, t, b.Brokers, f.topics.Sources, current, previous); keys["gh"] != "k1" {
			t.Fatalf("gh sealed under %q, want k1", keys["gh"])
		}
		got, ok := sealedSourceStore(t, b, f.topics.Sources, r).Get("gh")
		if !ok || got.Secret != current || got.PreviousSecret != previous || got.heldErr != nil {
			t.Fatalf("a store with the key reads %+v", got)
		}
	})
}

// TestSourceHeldWhenItsKeyIsMissing: without the key a source has no
// secrets, and a request signed with the empty key (what anyone can
// compute) is rejected secrets_unavailable, not accepted.
func TestSourceHeldWhenItsKeyIsMissing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		f := newFixture(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		secret, _ := NewSecret(KindGitHub)
		if err := sealedSourceStore(t, b, f.topics.Sources, testenv.Ring(t, secretbox.NewKey("k1"))).Put(ctx, githubSource("gh", secret, "")); err != nil {
			t.Fatal(err)
		}
		other := sealedSourceStore(t, b, f.topics.Sources, testenv.Ring(t, secretbox.NewKey("k2")))
		src, ok := other.Get("gh")
		if !ok || src.Secret != "" || src.heldErr == nil {
			t.Fatalf("without k1 gh reads %+v", src)
		}
		body := []byte(`{"repository":{"full_name":"acme/app"}}`)
		for _, key := range []string{"", secret} {
			err := Verify(&src, githubHeaders(key, "d1", "push", body), body, time.Now())
			if Classify(err) != ReasonSecretsUnavailable {
				t.Fatalf("request to a held source: %v, want %s", err, ReasonSecretsUnavailable)
			}
		}
		src.Secret = secret
		if err := other.Put(ctx, src); !errors.Is(err, ErrSecretsUnavailable) {
			t.Fatalf("Put of a held source = %v, want ErrSecretsUnavailable", err)
		}
		if c := other.Census(); c.Unreadable["gh"] == "" {
			t.Fatalf("census %+v does not list gh", c)
		}
	})
}

func TestPlaintextSourcesReadAndRekeyed(t *testing.T) {
	eachBackend(t, func(t *testing.T, b testenv.Backend) {
		f := newFixture(t, b)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		legacy, _ := NewSecret(KindGitHub)
		value, _ := json.Marshal(githubSource("old", legacy, "")) // as written before sealing
		testenv.ProduceRaw(ctx, t, b.Brokers, f.topics.Sources, "old", value)

		k1, k2 := secretbox.NewKey("k1"), secretbox.NewKey("k2")
		s1 := sealedSourceStore(t, b, f.topics.Sources, testenv.Ring(t, k1))
		if got, _ := s1.Get("old"); got.Secret != legacy {
			t.Fatalf("legacy source reads %+v", got)
		}
		c, err := s1.Rekey(ctx)
		if err != nil || c.Rewritten != 1 || c.ByKey["k1"] != 1 || len(c.ByKey) != 1 {
			t.Fatalf("rekey of the plaintext source: %+v, %v", c, err)
		}
		s2 := sealedSourceStore(t, b, f.topics.Sources, testenv.Ring(t, k1, k2))
		if c, err = s2.Rekey(ctx); err != nil || c.Rewritten != 1 || c.ByKey["k2"] != 1 {
			t.Fatalf("rekey to k2: %+v, %v", c, err)
		}
		if keys := testenv.SealedKeyIDs(ctx, t, b.Brokers, f.topics.Sources); keys["old"] != "k2" {
			t.Fatalf("after rekey old is under %q", keys["old"])
		}
		if got, _ := sealedSourceStore(t, b, f.topics.Sources, testenv.Ring(t, k2)).Get("old"); got.Secret != legacy {
			t.Fatalf("with k2 alone old reads %+v", got)
		}
	})
}

// TestFrontDoorAsksSendersToRetryWhileASourceIsHeld: a request to a source
// whose key is missing gets 503 (retry later), neither 202 (checked against
// nothing) nor 401 (which tells the sender its request was bad).
func TestFrontDoorAsksSendersToRetryWhileASourceIsHeld(t *testing.T) {
	b := testenv.Kfake(t)
	f := newFixture(t, b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	secret, _ := NewSecret(KindGitHub)
	if err := sealedSourceStore(t, b, f.topics.Sources, testenv.Ring(t, secretbox.NewKey("k1"))).Put(ctx, githubSource("gh", secret, "")); err != nil {
		t.Fatal(err)
	}
	s := f.service(func(c *Config) { c.Secrets = testenv.Ring(t, secretbox.NewKey("k2")) }, nil)
	c := server(t, s)
	body := []byte(`{"repository":{"full_name":"acme/app"}}`)
	for _, key := range []string{"", secret} {
		if status, out := c.raw("POST", "/in/gh", body, githubHeaders(key, "d1", "push", body)); status != 503 {
			t.Fatalf("request to a held source: %d %s, want 503", status, out)
		}
	}
}
