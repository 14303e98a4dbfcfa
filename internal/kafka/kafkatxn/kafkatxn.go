// Package kafkatxn keeps Laneway's transactional consume-transform-produce
// loops (the fan-out and the inbound verify stage) safe through broker
// faults that Kafka's transactions do not survive on their own. The fault
// harness found each of them (docs/reliability.md, F1, F2, F3, F6):
//
//   - Protocol keeps the clients on transaction protocol version 1. Kafka 4
//     finalises version 2 (KIP-890 part 2) on new clusters; under it every
//     commit or abort bumps the producer epoch and a marker completes
//     whatever its producer has open at a lower epoch, so one transaction's
//     abort could swallow an earlier, committed one's records after a broker
//     restart. Kafka 4 still serves version 1 per request.
//   - Session fences a crashed predecessor's transaction at start and
//     rebuilds the franz-go session after a failed transaction (the client
//     can stay "in a transaction" for good after the broker was away).
//   - Repair.Landed makes sure a committed transaction's markers reached
//     every partition it wrote before the next one begins: Kafka's
//     coordinator skips the markers of a partition with no leader (it takes
//     it for deleted) and still completes the commit.
//   - Repair.Maybe closes hanging transactions of the producer that nothing
//     else would close.
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
