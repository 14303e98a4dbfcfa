package feed

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// WriterConfig configures a Writer.
type WriterConfig struct {
	// Client produces the feed records. It must be idempotent (franz-go's
	// default) and not transactional: a transaction's markers would take
	// offsets, and the feed's sequences would then have gaps. Required.
	Client *kgo.Client
	// Appended is told each feed's new end after an append, so that long
	// polls on this instance answer at once. Default: nil.
	Appended func(topic string, end int64)
}

// Writer appends deliveries to pull endpoints' feeds.
type Writer struct {
	cfg WriterConfig
}

// NewWriter returns a Writer.
func NewWriter(cfg WriterConfig) (*Writer, error) {
	if cfg.Client == nil {
		return nil, errors.New("feed writer: Client is required")
	}
	return &Writer{cfg: cfg}, nil
}

// Append writes body as the next event of a feed topic (topics.Config.Feed
// or BatchFeed) and returns once the broker has it (acks=all). key is the
// event's entity. The topic is never created here: a deleted endpoint's feed must not
// come back because a delivery was still on its way.
func (w *Writer) Append(ctx context.Context, topic, key string, body []byte) error {
	rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: body}
	if err := w.cfg.Client.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("append to feed %s: %w", topic, err)
	}
	if w.cfg.Appended != nil {
		w.cfg.Appended(topic, rec.Offset+1)
	}
	return nil
}
