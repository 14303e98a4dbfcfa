package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/security/secretbox"
)

const secretsUsage = `Usage: laneway secrets <command>

  new-key [id]       print a new key file line "<id> <base64 of 32 random bytes>"
                     (default id: k-<date>-<random>, unique)
  status [flags]     count the endpoint and source records by the key sealing their secrets
  rekey [flags]      rewrite every record not sealed under the newest key (plaintext ones too)

status and rekey connect to Kafka directly and take serve's flags and
LANEWAY_* variables (--kafka-brokers, --topic-prefix, --secrets-key-file and
the Kafka TLS/SASL settings); run them where serve runs. Rotation:
docs/operator-guide.md.
`

// secretsCommand runs `laneway secrets ...`.
func secretsCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, secretsUsage)
		return nil
	}
	switch args[0] {
	case "new-key":
		return newKey(args[1:], stdout)
	case "status":
		return secretsReport(ctx, args[1:], false, stdout, stderr)
	case "rekey":
		return secretsReport(ctx, args[1:], true, stdout, stderr)
	}
	return fmt.Errorf("unknown secrets command %q\n%s", args[0], secretsUsage)
}

// newKey prints a key line. Without an id it names the key itself
// (secretbox.NewKeyID), so that no two keys share an id by accident.
func newKey(args []string, stdout io.Writer) error {
	if len(args) > 1 {
		return errors.New("usage: laneway secrets new-key [id], e.g. laneway secrets new-key >> secrets.key")
	}
	id := secretbox.NewKeyID(time.Now())
	if len(args) == 1 {
		id = args[0]
	}
	k := secretbox.NewKey(id)
	if _, err := secretbox.NewRing(k); err != nil {
		return err
	}
	fmt.Fprint(stdout, secretbox.FormatKey(k))
	return nil
}

func secretsReport(ctx context.Context, args []string, rewrite bool, stdout, stderr io.Writer) error {
	cfg, logs, err := parseServe(args, os.Getenv, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if cfg.Logger, err = newLogger(logs, stderr); err != nil {
		return err
	}
	report, err := app.RekeySecrets(ctx, cfg, rewrite)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "newest key: %s\n", report.WriteKeyID)
	unreadable := printCensus(stdout, "endpoints", report.Endpoints, rewrite)
	unreadable += printCensus(stdout, "sources", report.Sources, rewrite)
	if unreadable > 0 {
		return fmt.Errorf("%d records' secrets cannot be decrypted with this key file (listed above): add their keys to it", unreadable)
	}
	return nil
}

// printCensus prints one topic's counts and returns its unreadable records.
func printCensus(w io.Writer, name string, c secretbox.Census, rewrite bool) int {
	var parts []string
	for _, kid := range slices.Sorted(maps.Keys(c.ByKey)) {
		parts = append(parts, fmt.Sprintf("%s %d", kid, c.ByKey[kid]))
	}
	if len(parts) == 0 {
		parts = []string{"none"}
	}
	line := fmt.Sprintf("%-10s by key: %s", name+":", strings.Join(parts, ", "))
	if rewrite {
		line += fmt.Sprintf("; rewritten %d", c.Rewritten)
	}
	fmt.Fprintln(w, line)
	for _, id := range slices.Sorted(maps.Keys(c.Unreadable)) {
		fmt.Fprintf(w, "  cannot decrypt %s: %s\n", id, c.Unreadable[id])
	}
	return len(c.Unreadable)
}
