// Package kafkatxn chooses the Kafka transaction protocol of Laneway's
// transactional clients (the fan-out and the inbound verify stage).
//
// Kafka 4 finalises transaction.version 2 (KIP-890 part 2) on new clusters:
// the producer epoch is bumped by every commit or abort and produce requests
// add their partitions to the transaction implicitly. Against Kafka 4.4,
// single node, an unclean broker restart in the middle of that traffic left
// transactions whose markers reached some partitions and not others: a
// deliveries partition's last stable offset stuck for good, or a
// transaction's offsets committed while its deliveries were aborted (lost).
// Fourteen runs of the broker fault scenario failed that way eleven times
// under version 2 and never under version 1 (docs/reliability.md, F2/F3).
// So by default the transactional clients speak version 1, which every
// Kafka 4 broker still serves per request, whatever the cluster finalised.
package kafkatxn

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Protocol returns the options that select the transaction protocol: none
// when v2 is allowed (franz-go then uses version 2 wherever the cluster has
// finalised it), else a cap on the three requests whose new versions carry
// version 2 semantics (Produce v12, TxnOffsetCommit v5, EndTxn v5); franz-go
// opts in only when all three allow it, and then keeps the explicit
// AddPartitionsToTxn and AddOffsetsToTxn of version 1.
func Protocol(allowV2 bool) []kgo.Opt {
	if allowV2 {
		return nil
	}
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	return []kgo.Opt{kgo.MaxVersions(v)}
}
