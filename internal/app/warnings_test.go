package app_test

import (
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/security/secretbox"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestStartWarnsAboutUnsafeSettings: settings that start but leave a door
// open are each named at start in one WARN line saying what to do: an
// allow-list that covers all public space (the SSRF guard is off for it),
// a key file group or others can read, an all-zero key. A safe config logs
// none of them.
func TestStartWarnsAboutUnsafeSettings(t *testing.T) {
	const (
		broad    = "--allow-targets covers every public"
		readable = "secrets key file can be read by group or others"
		zero     = "is all zeros"
	)
	zeroKey := secretbox.Key{ID: "zero", Bytes: make([]byte, secretbox.KeySize)}
	for name, tc := range map[string]struct {
		tweak func(t *testing.T, c *app.Config)
		want  string
	}{
		"allow 0.0.0.0/0": {func(t *testing.T, c *app.Config) {
			c.AllowTargets = append(c.AllowTargets, netip.MustParsePrefix("0.0.0.0/0"))
		}, broad + " IPv4"},
		"allow ::/0": {func(t *testing.T, c *app.Config) {
			c.AllowTargets = append(c.AllowTargets, netip.MustParsePrefix("::/0"))
		}, broad + " IPv6"},
		"allow both halves of IPv4": {func(t *testing.T, c *app.Config) {
			c.AllowTargets = append(c.AllowTargets, netip.MustParsePrefix("0.0.0.0/1"), netip.MustParsePrefix("128.0.0.0/1"))
		}, broad + " IPv4"},
		"key file mode 0644": {func(t *testing.T, c *app.Config) {
			c.Secrets.KeyFile = keyFileWithMode(t, 0o644)
		}, readable},
		"embedded key file mode 0640": {func(t *testing.T, c *app.Config) {
			c.Secrets.Ring, c.DataDir = nil, filepath.Dir(keyFileWithMode(t, 0o640))
		}, readable},
		"all-zero key": {func(t *testing.T, c *app.Config) {
			c.Secrets.Ring = testenv.Ring(t, zeroKey)
		}, zero},
		"safe": {func(t *testing.T, c *app.Config) {
			c.Secrets.KeyFile = keyFileWithMode(t, 0o600)
		}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			var logs logCapture
			cfg := app.Config{EmbeddedKafkaAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: logs.logger(),
				Secrets:      app.SecretsConfig{Ring: testenv.Ring(t, secretbox.NewKey("k1"))},
				AllowTargets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
			tc.tweak(t, &cfg)
			stopApp(t, startWith(t, cfg))
			for _, w := range []string{broad, readable, zero} {
				lines := logs.matching(slog.LevelWarn, w)
				want := 0
				if tc.want != "" && strings.HasPrefix(tc.want, w) {
					want = 1
				}
				if len(lines) != want || (want == 1 && !strings.Contains(lines[0].Msg, tc.want)) {
					t.Errorf("%d warnings %q (want %d, %q): %v", len(lines), w, want, tc.want, logs.at(slog.LevelWarn))
				}
			}
		})
	}
}

// keyFileWithMode writes a key file of one fresh key with mode perm, in a
// directory of its own, and returns its path.
func keyFileWithMode(t *testing.T, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), app.KeyFileName)
	if err := os.WriteFile(path, []byte(secretbox.FormatKey(secretbox.NewKey("k1"))), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // WriteFile's mode passes through the umask
		t.Fatal(err)
	}
	return path
}
