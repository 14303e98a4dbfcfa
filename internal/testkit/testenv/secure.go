package testenv

import (
	"os"
	"strings"
	"testing"

	"github.com/laneway/laneway/internal/kafka/kafkaconn"
	"github.com/laneway/laneway/internal/plumbing/redisconn"
)

// Variables the test command sets for the authenticated services (see
// scripts/testenv.sh).
const (
	KafkaSASLEnv         = "LANEWAY_TEST_KAFKA_SASL_BROKERS"
	kafkaMechanismEnv    = "LANEWAY_TEST_KAFKA_SASL_MECHANISM"
	kafkaUserEnv         = "LANEWAY_TEST_KAFKA_SASL_USER"
	kafkaPasswordEnv     = "LANEWAY_TEST_KAFKA_SASL_PASSWORD"
	kafkaProducerEnv     = "LANEWAY_TEST_KAFKA_SASL_PRODUCER_USER"
	kafkaProducerPassEnv = "LANEWAY_TEST_KAFKA_SASL_PRODUCER_PASSWORD"
	kafkaCAEnv           = "LANEWAY_TEST_KAFKA_CA_FILE"
	RedisTLSEnv          = "LANEWAY_TEST_REDIS_TLS_URL"
	redisUserEnv         = "LANEWAY_TEST_REDIS_USER"
	redisPasswordEnv     = "LANEWAY_TEST_REDIS_PASSWORD"
	redisCAEnv           = "LANEWAY_TEST_REDIS_CA_FILE"
)

// Secure is the real broker's SASL_SSL listener and the TLS Redis that
// wants a password, with the credentials of their users. The SCRAM users
// have no ACLs until a test grants them some, through the plaintext
// listener (AdminBrokers), whose anonymous clients are super users.
type Secure struct {
	Brokers      []string         // the SASL_SSL listener
	Kafka        kafkaconn.Config // TLS with the test CA, SCRAM as the "laneway" user
	Producer     kafkaconn.Config // the same as the "producer" user
	AdminBrokers []string         // the plaintext listener
	RedisURL     string           // rediss://, no credentials in it
	Redis        redisconn.Config // the test CA, the ACL user and its password
}

// KafkaPrincipal and ProducerPrincipal name the two SCRAM users in ACLs.
func (s Secure) KafkaPrincipal() string    { return "User:" + s.Kafka.SASL.Username }
func (s Secure) ProducerPrincipal() string { return "User:" + s.Producer.SASL.Username }

// RequireSecureEnv, set to 1 by the test command, makes RealSecure fail a
// test whose secure services are missing instead of skipping it: CI must
// not pass with the SASL_SSL and TLS Redis tests silently skipped.
const RequireSecureEnv = "LANEWAY_TEST_REQUIRE_SECURE"

// secureVariables are the variables RealSecure reads; the mechanism is
// among them because the SCRAM users need it.
var secureVariables = []string{KafkaSASLEnv, kafkaMechanismEnv, kafkaUserEnv, kafkaPasswordEnv, kafkaProducerEnv,
	kafkaProducerPassEnv, kafkaCAEnv, RedisTLSEnv, redisUserEnv, redisPasswordEnv, redisCAEnv, KafkaEnv}

// RealSecure returns the authenticated services the test command started.
// When one of its variables is unset it skips t, or fails it naming the
// variable when RequireSecureEnv is 1.
func RealSecure(t testing.TB) Secure {
	t.Helper()
	get := os.Getenv
	for _, v := range secureVariables {
		if get(v) != "" {
			continue
		}
		if get(RequireSecureEnv) == "1" {
			t.Fatalf("%s is unset, but %s=1 says the secure services must be there (scripts/testenv.sh test exports both)", v, RequireSecureEnv)
		}
		t.Skipf("%s not set (%s and the other secure exports of scripts/testenv.sh): skipping", v, KafkaSASLEnv)
	}
	tls := kafkaconn.TLS{CAFile: get(kafkaCAEnv)}
	scram := func(user, pass string) kafkaconn.Config {
		return kafkaconn.Config{TLS: tls, SASL: kafkaconn.SASL{Mechanism: get(kafkaMechanismEnv), Username: user, Password: pass}}
	}
	return Secure{
		Brokers:      strings.Split(get(KafkaSASLEnv), ","),
		Kafka:        scram(get(kafkaUserEnv), get(kafkaPasswordEnv)),
		Producer:     scram(get(kafkaProducerEnv), get(kafkaProducerPassEnv)),
		AdminBrokers: strings.Split(get(KafkaEnv), ","),
		RedisURL:     get(RedisTLSEnv),
		Redis: redisconn.Config{Username: get(redisUserEnv), Password: get(redisPasswordEnv),
			TLS: redisconn.TLS{CAFile: get(redisCAEnv)}},
	}
}
