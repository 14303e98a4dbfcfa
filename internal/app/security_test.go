package app_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// startErr starts an app that is expected to refuse its config, returning
// the error. Refusals come before anything listens.
func startErr(t *testing.T, cfg app.Config) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := app.Start(ctx, cfg)
	if err == nil {
		stopApp(t, a)
	}
	return err
}

// TestStartRefusesWeakAdminTokens: a short token, one copied from the
// repo's own examples, or one long enough but made by hand (32 × "a",
// "passwordpassword…") is refused rather than published.
func TestStartRefusesWeakAdminTokens(t *testing.T) {
	dir := t.TempDir()
	placeholderFile := filepath.Join(dir, "token")
	if err := os.WriteFile(placeholderFile, []byte("REPLACE-ME-with-a-long-random-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		cfg  app.Config
		want string
	}{
		"short":               {app.Config{AdminToken: "change-me"}, "at least 32"},
		"compose placeholder": {app.Config{AdminToken: "change-me-to-a-long-random-string"}, "placeholder"},
		"32 × a":              {app.Config{AdminToken: strings.Repeat("a", 32)}, "distinct characters"},
		"a repeated password": {app.Config{AdminToken: strings.Repeat("password", 4) + "1x"}, "repeats itself"},
		"placeholder in file": {app.Config{AdminTokenFile: placeholderFile}, "placeholder"},
		"missing file":        {app.Config{AdminTokenFile: filepath.Join(dir, "none")}, "--admin-token-file"},
		"both ways":           {app.Config{AdminToken: strings.Repeat("a1", 16), AdminTokenFile: placeholderFile}, "both"},
	} {
		tc.cfg.HTTPAddr, tc.cfg.EmbeddedKafkaAddr, tc.cfg.Logger = "127.0.0.1:0", "127.0.0.1:0", testenv.Logger()
		err := startErr(t, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Start = %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// TestAdminTokenFileWithTwoTokens: the token file can hold the new and the
// old token during a rotation; both open the API, nothing else does.
func TestAdminTokenFileWithTwoTokens(t *testing.T) {
	const next, prev = "next-709271df9e5a428089db8391025ad626", "prev-535f8001843b4ebf2d1c49e26259348a"
	file := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(file, []byte(next+"\n"+prev+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, testenv.Embedded, func(c *app.Config) { c.AdminTokenFile = file })
	for tok, want := range map[string]int{next: 200, prev: 200, "": 401, next[:len(next)-1]: 401} {
		req, _ := http.NewRequest("GET", "http://"+a.HTTPAddr()+"/v1/endpoints", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("token %.8q…: status %d, want %d", tok, resp.StatusCode, want)
		}
	}
}

// TestEmbeddedKafkaBeyondLoopbackIsRefused: the embedded Kafka has no
// authentication; listening on every interface would hand its topics,
// endpoint secrets included, to the network.
func TestEmbeddedKafkaBeyondLoopbackIsRefused(t *testing.T) {
	lan, lanErr := lanAddress()
	for name, addr := range map[string]string{"0.0.0.0": "0.0.0.0:0", "empty host": ":0", "[::]": "[::]:0", "LAN address": lan} {
		t.Run(name, func(t *testing.T) {
			if addr == "" {
				t.Skipf("this machine has no non-loopback address to try (%v)", lanErr)
			}
			err := startErr(t, app.Config{HTTPAddr: "127.0.0.1:0", EmbeddedKafkaAddr: addr, Logger: testenv.Logger()})
			if err == nil || !strings.Contains(err.Error(), "--embedded-kafka-allow-remote") {
				t.Errorf("embedded kafka on %s: Start = %v, want a refusal naming --embedded-kafka-allow-remote", addr, err)
			}
		})
	}
}

// lanAddress is host:0 for one of this machine's own addresses beyond
// loopback (not link-local either: a LAN or public address), or "" when it
// has none.
func lanAddress() (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		ipnet, ok := a.(*net.IPNet)
		if ok && ipnet.IP.IsGlobalUnicast() {
			return net.JoinHostPort(ipnet.IP.String(), "0"), nil
		}
	}
	return "", fmt.Errorf("interface addresses %v", addrs)
}

// TestEmbeddedKafkaBeyondLoopbackWhenAllowedWarns: the explicit opt-in
// starts, with a warning in the log.
func TestEmbeddedKafkaBeyondLoopbackWhenAllowedWarns(t *testing.T) {
	var logs bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := app.Start(ctx, app.Config{
		HTTPAddr: "127.0.0.1:0", EmbeddedKafkaAddr: "0.0.0.0:0", EmbeddedKafkaAllowRemote: true,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatalf("Start with --embedded-kafka-allow-remote: %v", err)
	}
	stopApp(t, a)
	if !strings.Contains(logs.String(), "WITHOUT AUTHENTICATION") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
}

// TestStartRefusesABadOperatorWebhookSecretFile: the operator webhook's
// secret can come from a file (LANEWAY_OPERATOR_WEBHOOK_SECRET_FILE), like
// every other secret; given both ways, from a missing file or an empty one,
// start is refused naming the setting, never the secret.
func TestStartRefusesABadOperatorWebhookSecretFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_c2VjcmV0LW5vdC10by1iZS1wcmludGVkLTAxMjM0NTY3"
	for name, tc := range map[string]struct {
		value, file, want string
	}{
		"both ways":    {secret, empty, "both"},
		"missing file": {"", filepath.Join(dir, "none"), "--operator-webhook-secret-file"},
		"empty file":   {"", empty, "empty"},
	} {
		err := startErr(t, app.Config{
			HTTPAddr: "127.0.0.1:0", EmbeddedKafkaAddr: "127.0.0.1:0", Logger: testenv.Logger(),
			OperatorWebhookURL: "https://ops.example/hook", OperatorWebhookSecret: tc.value, OperatorWebhookSecretFile: tc.file,
		})
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%s: Start = %v, want an error containing %q and not the secret", name, err, tc.want)
		}
	}
}
