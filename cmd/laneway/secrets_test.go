package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestServeRefusesPlaintextSecretsOnACluster: serve against a cluster
// without a key file stops before connecting, saying why and what to do.
func TestServeRefusesPlaintextSecretsOnACluster(t *testing.T) {
	brokers := "127.0.0.1:9"
	if b, ok := testenv.RealKafka(); ok {
		brokers = strings.Join(b.Brokers, ",")
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"serve", "--kafka-brokers", brokers, "--http-addr", "127.0.0.1:0"}, nil, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--secrets-key-file") || !strings.Contains(err.Error(), "--allow-plaintext-secrets") {
		t.Fatalf("serve without a key = %v, want a refusal naming --secrets-key-file and --allow-plaintext-secrets", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("k1 not-base64!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"serve", "--kafka-brokers", brokers, "--secrets-key-file", bad}, nil, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "--secrets-key-file") || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("serve with a bad key file = %v", err)
	}
}

// TestSecretsNewKeyWithoutAnID: new-key names the key itself, uniquely,
// so that two generated keys can share a key file.
func TestSecretsNewKeyWithoutAnID(t *testing.T) {
	var lines, errOut bytes.Buffer
	for range 2 {
		if err := run(context.Background(), []string{"secrets", "new-key"}, nil, &lines, &errOut); err != nil {
			t.Fatal(err)
		}
	}
	r, err := secretbox.ParseKeyFile(lines.Bytes())
	if err != nil || !strings.HasPrefix(r.WriteKeyID(), "k-") {
		t.Fatalf("two generated lines %q: %v; want one key file of two k-… keys", lines.String(), err)
	}
}

// TestSecretsNewKeyAndRekeyCommands: new-key prints a line the key file
// takes; rekey moves the embedded default's records to the appended key.
func TestSecretsNewKeyAndRekeyCommands(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := app.Start(ctx, app.Config{DataDir: dir, EmbeddedKafkaAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Topics: topics.Config{Partitions: 1}, Logger: testenv.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = a.Stop(context.Background()) }()
	if err := a.Endpoints().Put(ctx, endpoint.Endpoint{ID: "ep_1", Tenant: "acme", URL: "https://example.com/", MaxConcurrency: 1,
		Status: endpoint.StatusActive, Secrets: []endpoint.Secret{{Value: endpoint.NewSecret()}}}); err != nil {
		t.Fatal(err)
	}
	var line, errOut bytes.Buffer
	if err := run(ctx, []string{"secrets", "new-key", "k2"}, nil, &line, &errOut); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, app.KeyFileName)
	first, err := secretbox.LoadKeyFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(keyFile, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(line.Bytes()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if r, err := secretbox.LoadKeyFile(keyFile); err != nil || r.WriteKeyID() != "k2" || !r.Has(first.WriteKeyID()) {
		t.Fatalf("key file with the new line: %v", err)
	}
	var out bytes.Buffer
	args := []string{"secrets", "rekey", "--kafka-brokers", strings.Join(a.Brokers(), ","), "--secrets-key-file", keyFile, "--log-level", "error"}
	if err := run(ctx, args, nil, &out, &errOut); err != nil {
		t.Fatalf("rekey: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{"newest key: k2", "endpoints: by key: k2 1; rewritten 1"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("rekey output lacks %q:\n%s", want, out.String())
		}
	}
}
