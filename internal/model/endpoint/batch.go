package endpoint

import (
	"fmt"
	"time"
)

// Defaults and limits of a batch endpoint's batches.
const (
	DefaultBatchMaxEvents = 100
	MaxBatchEvents        = 1000
	DefaultBatchMaxBytes  = 1 << 20
	MinBatchBytes         = 1 << 10
	MaxBatchBytes         = 16 << 20
	DefaultBatchMaxWait   = time.Second
	MaxBatchWait          = time.Minute
)

// BatchConfig sizes the batches of a batch endpoint. Zero fields take the
// defaults.
type BatchConfig struct {
	// MaxEvents caps the events of one batch. Default DefaultBatchMaxEvents
	// (100), at most MaxBatchEvents (1000).
	MaxEvents int `json:"max_events,omitempty"`
	// MaxBytes caps a batch's body; an event larger than it goes alone.
	// Default DefaultBatchMaxBytes (1 MiB).
	MaxBytes int `json:"max_bytes,omitempty"`
	// MaxWaitMS is how long a batch that is not full waits for more events,
	// counted from its first event's arrival. Default 1000; 0 in a stored
	// config reads as the default, so a batch that never waits says 1.
	MaxWaitMS int64 `json:"max_wait_ms,omitempty"`
}

// Sizes returns the batch limits with the defaults applied; c may be nil.
func (c *BatchConfig) Sizes() (maxEvents, maxBytes int, maxWait time.Duration) {
	maxEvents, maxBytes, maxWait = DefaultBatchMaxEvents, DefaultBatchMaxBytes, DefaultBatchMaxWait
	if c == nil {
		return
	}
	if c.MaxEvents > 0 {
		maxEvents = c.MaxEvents
	}
	if c.MaxBytes > 0 {
		maxBytes = c.MaxBytes
	}
	if c.MaxWaitMS > 0 {
		maxWait = time.Duration(c.MaxWaitMS) * time.Millisecond
	}
	return
}

func (c *BatchConfig) validate() error {
	if c == nil {
		return nil
	}
	switch {
	case c.MaxEvents < 0 || c.MaxEvents > MaxBatchEvents:
		return &ValidationError{"batch.max_events", fmt.Sprintf("must be between 1 and %d", MaxBatchEvents)}
	case c.MaxBytes != 0 && (c.MaxBytes < MinBatchBytes || c.MaxBytes > MaxBatchBytes):
		return &ValidationError{"batch.max_bytes", fmt.Sprintf("must be between %d and %d", MinBatchBytes, MaxBatchBytes)}
	case c.MaxWaitMS < 0 || time.Duration(c.MaxWaitMS)*time.Millisecond > MaxBatchWait:
		return &ValidationError{"batch.max_wait_ms", "must be between 0 and 60000"}
	}
	return nil
}
