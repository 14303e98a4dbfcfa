// Package partition keeps the books of each Kafka partition an instance owns:
// which consumed offsets still have work outstanding, and therefore which
// offset is safe to commit (the watermark); ownership across rebalances and
// the parking of lanes that cannot keep up build on that.
//
// The watermark is what makes "at least once" hold: an offset is committed
// only once every record below it was delivered, dead-lettered, superseded
// or parked, so a crash replays work rather than losing it.
package partition
