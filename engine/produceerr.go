package engine

import (
	"errors"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The kinds of produce noteProduceFailure tells apart, its metric's labels.
const (
	produceParked = "parked"
	produceDead   = "dead"
)

// noteProduceFailure logs and counts a produce of the delivery stage (a
// parked append, a dead letter) that the broker refused for its timestamp,
// and reports whether it was that. INVALID_TIMESTAMP comes from a topic
// with CreateTime timestamps (one created by an older Laneway, or by hand)
// when the record is stamped more than log.message.timestamp.after.max.ms
// (1 h on Kafka 4) ahead of the broker's clock: this host's clock runs
// fast. The owner retries it like any failure, since the record must land
// (a dead letter may not be dropped), but no retry can succeed until the
// clock or the topic is fixed, so the cause and the fix are said here, and
// the count feeds an alert. Other failures are the caller's to log.
func noteProduceFailure(log *slog.Logger, m *Metrics, kind string, rec *kgo.Record, err error) bool {
	if !errors.Is(err, kerr.InvalidTimestamp) {
		return false
	}
	if m != nil {
		m.timestampRefused.WithLabelValues(kind).Inc()
	}
	log.Error("the broker refused a record's timestamp (INVALID_TIMESTAMP): this host's clock is probably more than "+
		"log.message.timestamp.after.max.ms ahead of the broker's; it is retried but cannot land until the clock is "+
		"fixed (NTP) or the topic takes the broker's time: kafka-configs.sh --alter --entity-type topics --entity-name "+
		rec.Topic+" --add-config message.timestamp.type=LogAppendTime",
		"kind", kind, "topic", rec.Topic, "partition", rec.Partition, "record_timestamp", rec.Timestamp, "err", err)
	return true
}
