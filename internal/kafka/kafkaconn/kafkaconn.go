// Package kafkaconn turns Laneway's Kafka connection settings (TLS, mutual
// TLS and SASL: PLAIN, SCRAM, OAUTHBEARER, AWS MSK IAM) into the franz-go
// options every client Laneway opens carries, and checks them first so a
// bad combination fails at start with a reason, not at the first dial.
package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/laneway/laneway/internal/plumbing/tlsfiles"
)

// TLS names the CA bundle, client certificate and key of the connection.
type TLS = tlsfiles.Config

// SASL mechanisms, as Kafka names them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
	OAuthBearer = "OAUTHBEARER"
	AWSMSKIAM   = "AWS_MSK_IAM"
)

// Mechanisms are the SASL mechanisms Laneway speaks.
var Mechanisms = []string{Plain, ScramSHA256, ScramSHA512, OAuthBearer, AWSMSKIAM}

// Config is how Laneway's Kafka clients connect. The zero value is a
// plaintext, unauthenticated connection (the embedded default).
type Config struct {
	// TLS encrypts the connection and, with a client certificate, proves
	// Laneway's identity (mutual TLS). Default off.
	TLS TLS
	// SASL authenticates Laneway. Default none.
	SASL SASL
}

// SASL is the authentication. Secrets come either inline or from a file;
// files are read at every authentication (each new broker connection and
// each re-authentication), so a rotated secret is picked up without a
// restart.
type SASL struct {
	// Mechanism is one of Mechanisms (case-insensitive). Empty: no SASL.
	Mechanism string
	// Username for PLAIN and SCRAM.
	Username string
	// Password for PLAIN and SCRAM; or PasswordFile, never both.
	Password, PasswordFile string
	// Token is the OAUTHBEARER token; or TokenFile, never both. A token
	// file is re-read at every authentication, so whatever refreshes it
	// (a sidecar, a Kubernetes projected token) is followed.
	Token, TokenFile string
	// AWSAccessKeyID and AWSSecretAccessKey (or AWSSecretAccessKeyFile) sign
	// AWS_MSK_IAM; AWSSessionToken (or AWSSessionTokenFile) goes with
	// temporary credentials. Unset: the AWS SDK's default credential chain
	// (the AWS_* variables, the shared config and credentials files, web
	// identity as on EKS with IRSA, EKS Pod Identity and ECS container
	// credentials, EC2 instance profiles).
	AWSAccessKeyID                             string
	AWSSecretAccessKey, AWSSecretAccessKeyFile string
	AWSSessionToken, AWSSessionTokenFile       string
}

// IsZero reports whether nothing is configured (plaintext, no SASL).
func (c Config) IsZero() bool { return !c.TLS.On() && c.SASL == (SASL{}) }

// mechanism is the canonical name of the configured mechanism, or "".
func (s SASL) mechanism() string { return strings.ToUpper(strings.TrimSpace(s.Mechanism)) }

// Validate checks the combination without reading any file.
func (c Config) Validate() error {
	if err := c.TLS.Validate(); err != nil {
		return fmt.Errorf("kafka tls: %w", err)
	}
	if err := c.SASL.validate(c.TLS.On()); err != nil {
		return fmt.Errorf("kafka sasl: %w", err)
	}
	return nil
}

func (s SASL) validate(tlsOn bool) error {
	m := s.mechanism()
	if m == "" {
		if s != (SASL{}) {
			return errors.New("credentials are set but no mechanism: set the mechanism (" + strings.Join(Mechanisms, ", ") + ")")
		}
		return nil
	}
	if !slices.Contains(Mechanisms, m) {
		return fmt.Errorf("unknown mechanism %q: use one of %s", s.Mechanism, strings.Join(Mechanisms, ", "))
	}
	if err := s.onlyFieldsOf(m); err != nil {
		return err
	}
	switch m {
	case Plain, ScramSHA256, ScramSHA512:
		if s.Username == "" {
			return fmt.Errorf("%s needs a username", m)
		}
		if err := oneOf("password", s.Password, s.PasswordFile, true); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	case OAuthBearer:
		if err := oneOf("token", s.Token, s.TokenFile, true); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	case AWSMSKIAM:
		if err := oneOf("AWS secret access key", s.AWSSecretAccessKey, s.AWSSecretAccessKeyFile, false); err != nil {
			return err
		}
		if err := oneOf("AWS session token", s.AWSSessionToken, s.AWSSessionTokenFile, false); err != nil {
			return err
		}
		if (s.AWSAccessKeyID == "") != (s.AWSSecretAccessKey == "" && s.AWSSecretAccessKeyFile == "") {
			return errors.New("AWS_MSK_IAM: the access key id and the secret access key go together (or set neither and use the AWS default credential chain)")
		}
	}
	// PLAIN sends the password as is and a bearer token can be replayed:
	// over plaintext, anyone on the path could take them.
	if !tlsOn && (m == Plain || m == OAuthBearer || m == AWSMSKIAM) {
		return fmt.Errorf("%s needs TLS: without it the credentials cross the network readable; turn TLS on", m)
	}
	return nil
}

// onlyFieldsOf refuses settings that belong to another mechanism: they would
// be silently ignored, and a typo'd mechanism usually shows this way.
func (s SASL) onlyFieldsOf(m string) error {
	userPass := s.Username != "" || s.Password != "" || s.PasswordFile != ""
	token := s.Token != "" || s.TokenFile != ""
	awsCreds := s.AWSAccessKeyID != "" || s.AWSSecretAccessKey != "" || s.AWSSecretAccessKeyFile != "" ||
		s.AWSSessionToken != "" || s.AWSSessionTokenFile != ""
	switch {
	case userPass && m != Plain && m != ScramSHA256 && m != ScramSHA512:
		return fmt.Errorf("a username or password is set, but %s does not use them", m)
	case token && m != OAuthBearer:
		return fmt.Errorf("a token is set, but only %s uses one (not %s)", OAuthBearer, m)
	case awsCreds && m != AWSMSKIAM:
		return fmt.Errorf("AWS credentials are set, but only %s uses them (not %s)", AWSMSKIAM, m)
	}
	return nil
}

// oneOf checks that a secret is given inline or by file, not both (and at
// least one when required).
func oneOf(what, inline, file string, required bool) error {
	switch {
	case inline != "" && file != "":
		return fmt.Errorf("the %s is given twice, inline and by file: keep one", what)
	case required && inline == "" && file == "":
		return fmt.Errorf("missing %s (inline or by file)", what)
	}
	return nil
}

// Opts validates c, reads the TLS files and returns the franz-go options
// for it (none for the zero Config).
func (c Config) Opts() ([]kgo.Opt, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	tlsCfg, err := c.TLS.Build()
	if err != nil {
		return nil, fmt.Errorf("kafka tls: %w", err)
	}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	if err := c.SASL.readable(); err != nil {
		return nil, err
	}
	if mech := c.SASL.mechanismImpl(); mech != nil {
		opts = append(opts, kgo.SASL(mech))
	}
	return opts, nil
}

// mechanismImpl is the franz-go mechanism; its callbacks read secret files
// at each authentication.
func (s SASL) mechanismImpl() sasl.Mechanism {
	switch s.mechanism() {
	case Plain:
		return plain.Plain(func(context.Context) (plain.Auth, error) {
			pass, err := secret(s.Password, s.PasswordFile, "password")
			return plain.Auth{User: s.Username, Pass: pass}, err
		})
	case ScramSHA256:
		return scram.Sha256(s.scramAuth)
	case ScramSHA512:
		return scram.Sha512(s.scramAuth)
	case OAuthBearer:
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			token, err := secret(s.Token, s.TokenFile, "token")
			return oauth.Auth{Token: token}, err
		})
	case AWSMSKIAM:
		return aws.ManagedStreamingIAM(s.awsCredentials())
	}
	return nil
}

// readable reads every secret file once, so a missing or empty one stops
// the start with its name rather than failing each connection later.
func (s SASL) readable() error {
	for what, file := range map[string]string{
		"password": s.PasswordFile, "token": s.TokenFile,
		"AWS secret access key": s.AWSSecretAccessKeyFile, "AWS session token": s.AWSSessionTokenFile,
	} {
		if _, err := secret("", file, what); err != nil {
			return err
		}
	}
	return nil
}

func (s SASL) scramAuth(context.Context) (scram.Auth, error) {
	pass, err := secret(s.Password, s.PasswordFile, "password")
	return scram.Auth{User: s.Username, Pass: pass}, err
}

// awsCredentials is the AWS_MSK_IAM credentials callback: the configured
// key (its files read at each authentication), or without one the AWS
// SDK's default credential chain.
func (s SASL) awsCredentials() func(context.Context) (aws.Auth, error) {
	if s.AWSAccessKeyID == "" {
		return (&awsChain{}).auth
	}
	return func(context.Context) (aws.Auth, error) {
		secretKey, err := secret(s.AWSSecretAccessKey, s.AWSSecretAccessKeyFile, "AWS secret access key")
		if err != nil {
			return aws.Auth{}, err
		}
		session, err := secret(s.AWSSessionToken, s.AWSSessionTokenFile, "AWS session token")
		return aws.Auth{AccessKey: s.AWSAccessKeyID, SecretKey: secretKey, SessionToken: session, UserAgent: "laneway"}, err
	}
}

// awsChain is the AWS SDK's default credential chain, loaded at the first
// authentication and kept: its provider caches temporary credentials and
// fetches new ones as they near expiry, so asking it at every
// authentication follows a rotation without a restart.
type awsChain struct {
	mu    sync.Mutex
	creds awssdk.CredentialsProvider // nil until loaded
}

func (c *awsChain) auth(ctx context.Context) (aws.Auth, error) {
	creds, err := c.provider(ctx)
	if err != nil {
		return aws.Auth{}, err
	}
	v, err := creds.Retrieve(ctx)
	if err != nil {
		return aws.Auth{}, fmt.Errorf("AWS_MSK_IAM: no access key configured, and the AWS default credential chain found no credentials: %w", err)
	}
	return aws.Auth{AccessKey: v.AccessKeyID, SecretKey: v.SecretAccessKey, SessionToken: v.SessionToken, UserAgent: "laneway"}, nil
}

// provider loads the chain once (a failed load is tried again at the next
// authentication). The region only matters to the chain's own calls (STS
// for web identity): without AWS_REGION it falls back to us-east-1, whose
// STS serves every account; the MSK signature takes its region from the
// broker's name.
func (c *awsChain) provider(ctx context.Context) (awssdk.CredentialsProvider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.creds == nil {
		cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithDefaultRegion("us-east-1"))
		if err != nil {
			return nil, fmt.Errorf("AWS_MSK_IAM: load the AWS default credential chain: %w", err)
		}
		if cfg.Credentials == nil {
			return nil, errors.New("AWS_MSK_IAM: the AWS default credential chain has no provider")
		}
		c.creds = cfg.Credentials
	}
	return c.creds, nil
}

// secret is inline, or file's content without surrounding whitespace (files
// written by editors and `echo` end in a newline). An empty file is an
// error: authenticating with an empty secret only hides the mistake.
func secret(inline, file, what string) (string, error) {
	if file == "" {
		return inline, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("kafka sasl %s file: %w", what, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("kafka sasl %s file %s is empty", what, file)
	}
	return s, nil
}
