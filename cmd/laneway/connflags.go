package main

import (
	"flag"

	"github.com/laneway/laneway/internal/kafka/kafkaconn"
	"github.com/laneway/laneway/internal/plumbing/redisconn"
	"github.com/laneway/laneway/internal/plumbing/tlsfiles"
)

// connFlags binds the Kafka and Redis connection security settings. Each
// secret has a *-file twin (and so a LANEWAY_*_FILE variable): a file or a
// variable stays out of process listings, a flag does not.
func connFlags(fs *flag.FlagSet, k *kafkaconn.Config, r *redisconn.Config) {
	tlsFlags(fs, "kafka", &k.TLS)
	s := &k.SASL
	fs.StringVar(&s.Mechanism, "kafka-sasl-mechanism", "", "Kafka SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM; empty: no SASL")
	fs.StringVar(&s.Username, "kafka-sasl-username", "", "Kafka SASL user (PLAIN, SCRAM)")
	fs.StringVar(&s.Password, "kafka-sasl-password", "", "Kafka SASL password (PLAIN, SCRAM); prefer the variable or --kafka-sasl-password-file")
	fs.StringVar(&s.PasswordFile, "kafka-sasl-password-file", "", "file holding the Kafka SASL password, read at each authentication")
	fs.StringVar(&s.Token, "kafka-sasl-token", "", "OAUTHBEARER token; prefer --kafka-sasl-token-file")
	fs.StringVar(&s.TokenFile, "kafka-sasl-token-file", "", "file holding the OAUTHBEARER token, re-read at each authentication (whatever refreshes it is followed)")
	fs.StringVar(&s.AWSAccessKeyID, "kafka-aws-access-key-id", "", "AWS_MSK_IAM access key id; empty: the AWS default credential chain (AWS_* variables, shared files, web identity/IRSA, EKS Pod Identity, ECS, EC2 instance profile)")
	fs.StringVar(&s.AWSSecretAccessKey, "kafka-aws-secret-access-key", "", "AWS_MSK_IAM secret access key (with --kafka-aws-access-key-id)")
	fs.StringVar(&s.AWSSecretAccessKeyFile, "kafka-aws-secret-access-key-file", "", "file holding the AWS secret access key, read at each authentication")
	fs.StringVar(&s.AWSSessionToken, "kafka-aws-session-token", "", "AWS session token of temporary credentials (with --kafka-aws-access-key-id)")
	fs.StringVar(&s.AWSSessionTokenFile, "kafka-aws-session-token-file", "", "file holding the AWS session token, read at each authentication")
	fs.StringVar(&r.Username, "redis-username", "", "Redis ACL user (overrides the URL's)")
	fs.StringVar(&r.Password, "redis-password", "", "Redis password (overrides the URL's); prefer the variable or --redis-password-file")
	fs.StringVar(&r.PasswordFile, "redis-password-file", "", "file holding the Redis password, read by each new connection")
	tlsFlags(fs, "redis", &r.TLS)
}

// tlsFlags binds one connection's TLS files under prefix ("kafka", "redis").
func tlsFlags(fs *flag.FlagSet, prefix string, t *tlsfiles.Config) {
	fs.BoolVar(&t.Enabled, prefix+"-tls", false, "connect to "+prefix+" over TLS (implied by any other --"+prefix+"-tls-* setting)")
	fs.StringVar(&t.CAFile, prefix+"-tls-ca-file", "", "PEM CA bundle that signs the "+prefix+" server certificate; empty: system roots")
	fs.StringVar(&t.CertFile, prefix+"-tls-cert-file", "", "PEM client certificate for mutual TLS to "+prefix+" (with --"+prefix+"-tls-key-file)")
	fs.StringVar(&t.KeyFile, prefix+"-tls-key-file", "", "PEM key of the "+prefix+" client certificate")
	fs.StringVar(&t.ServerName, prefix+"-tls-server-name", "", "name the "+prefix+" server certificate must carry; empty: the host dialled")
	fs.BoolVar(&t.InsecureSkipVerify, prefix+"-tls-insecure-skip-verify", false, "accept any "+prefix+" server certificate: tests only, it lets anyone on the path read the traffic")
}
