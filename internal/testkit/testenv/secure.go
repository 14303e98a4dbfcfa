package testenv

import (
	"os"
	"strings"

	"github.com/laneway/laneway/internal/kafka/kafkaconn"
	"github.com/laneway/laneway/internal/redisconn"
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

// RealSecure returns the authenticated services, or false when the test
// command did not start them.
func RealSecure() (Secure, bool) {
	get := os.Getenv
	for _, v := range []string{KafkaSASLEnv, kafkaUserEnv, kafkaPasswordEnv, kafkaProducerEnv, kafkaProducerPassEnv,
		kafkaCAEnv, RedisTLSEnv, redisUserEnv, redisPasswordEnv, redisCAEnv, KafkaEnv} {
		if get(v) == "" {
			return Secure{}, false
		}
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
	}, true
}

// SecureVariables names the variables RealSecure needs, for skip messages.
const SecureVariables = KafkaSASLEnv + ", " + RedisTLSEnv + " and the other secure exports of scripts/testenv.sh"
