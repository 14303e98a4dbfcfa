package app

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/laneway/laneway/internal/admin/api"
)

// adminTokens reads the admin tokens from the setting or the file named,
// and checks them (api.ParseAdminTokens): a weak or example token is an
// error at start rather than a door left open.
func adminTokens(value, file string) ([]string, error) {
	if value != "" && file != "" {
		return nil, errors.New("--admin-token (LANEWAY_ADMIN_TOKEN) and --admin-token-file (LANEWAY_ADMIN_TOKEN_FILE) are both set: give the token one way")
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--admin-token-file: %w", err)
		}
		tokens, err := api.ParseAdminTokens(string(b))
		if err == nil && len(tokens) == 0 {
			err = errors.New("holds no token")
		}
		if err != nil {
			return nil, fmt.Errorf("--admin-token-file %s: %w", file, err)
		}
		return tokens, nil
	}
	tokens, err := api.ParseAdminTokens(value)
	if err != nil {
		return nil, fmt.Errorf("--admin-token: %w", err)
	}
	return tokens, nil
}

// operatorWebhookSecret is the operator webhook's secret, given as a value
// or in a file. Errors name the setting, never the secret.
func operatorWebhookSecret(value, file string) (string, error) {
	switch {
	case file == "":
		return value, nil
	case value != "":
		return "", errors.New("--operator-webhook-secret and --operator-webhook-secret-file are both set: give the secret one way")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--operator-webhook-secret-file: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("--operator-webhook-secret-file %s is empty", file)
	}
	return secret, nil
}

// checkExposure refuses an unauthenticated API on a non-loopback address.
func checkExposure(addr string, withToken bool) error {
	if withToken {
		return nil
	}
	loopback, err := isLoopbackAddr(addr)
	if err != nil {
		return fmt.Errorf("http address %q: %w", addr, err)
	}
	if !loopback {
		return fmt.Errorf("refusing to serve the API on %s without --admin-token: set a token or bind to loopback", addr)
	}
	return nil
}

// checkEmbeddedKafka refuses to run the embedded Kafka beyond loopback
// unless told to, and then warns: it has no authentication and no TLS, so
// whoever reaches it reads endpoint secrets and rewrites endpoints.
func checkEmbeddedKafka(cfg Config) error {
	if len(cfg.KafkaBrokers) > 0 || cfg.EmbeddedKafkaAddr == "" {
		return nil // a real cluster, or the loopback default
	}
	loopback, err := isLoopbackAddr(cfg.EmbeddedKafkaAddr)
	if err != nil {
		return fmt.Errorf("embedded kafka address %q: %w", cfg.EmbeddedKafkaAddr, err)
	}
	switch {
	case loopback:
		return nil
	case !cfg.EmbeddedKafkaAllowRemote:
		return fmt.Errorf("refusing to run the embedded Kafka on %s: it has no authentication, so anyone who reaches it "+
			"can read endpoint secrets and redirect deliveries; bind it to loopback, use a real cluster (--kafka-brokers), "+
			"or accept the risk with --embedded-kafka-allow-remote", cfg.EmbeddedKafkaAddr)
	}
	cfg.Logger.Warn("THE EMBEDDED KAFKA LISTENS BEYOND LOOPBACK WITHOUT AUTHENTICATION: anyone who reaches "+
		cfg.EmbeddedKafkaAddr+" can read endpoint secrets and payloads and rewrite endpoints",
		"addr", cfg.EmbeddedKafkaAddr)
	return nil
}

// isLoopbackAddr reports whether a listen address (host:port) binds
// loopback only: "localhost" or a loopback IP. An empty host binds every
// interface.
func isLoopbackAddr(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, err
	}
	if host == "localhost" {
		return true, nil
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback(), nil
}
