package engine

import "github.com/laneway/laneway/internal/kafka/kafkatxn"

// DefaultInstanceID names this instance for transactional ids and static
// group membership: the hostname (kafkatxn.DefaultInstanceID, which the
// inbound verify stage uses too).
func DefaultInstanceID() string { return kafkatxn.DefaultInstanceID() }
