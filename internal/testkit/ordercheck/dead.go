package ordercheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/kafka/kread"
	"github.com/laneway/laneway/internal/model/event"
)

// FromDeadLetter turns a dead letter as Laneway writes it (the JSON of
// event.DeadLetter) into a Dead. Letters of invalid events carry no
// delivery; they say nothing about an endpoint and are reported with ok false.
func FromDeadLetter(dl event.DeadLetter) (d Dead, ok bool) {
	if dl.Delivery == nil {
		return Dead{}, false
	}
	return Dead{
		Endpoint: dl.Delivery.EndpointID, EventID: dl.Delivery.EventID, Entity: dl.Delivery.Entity,
		Revision: dl.Delivery.Revision, Reason: dl.Reason, Detail: dl.Detail, DeadAt: dl.DeadAt,
	}, true
}

// ReadDeadTopic reads every committed record of a dead-letter topic, from
// the start of each partition to the end it has when the read begins
// (its last stable offset). cl is used for metadata and fetches only.
func ReadDeadTopic(ctx context.Context, cl *kgo.Client, topic string) ([]Dead, error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var parts []int32
	ends.Each(func(o kadm.ListedOffset) { parts = append(parts, o.Partition) })
	slices.Sort(parts)
	r := kread.NewReader(cl, topic, kread.ReadCommitted())
	var out []Dead
	for _, p := range parts {
		offset, stuck := int64(0), 0
		for {
			res, err := r.Read(ctx, p, offset, 4<<20)
			if errors.Is(err, kread.ErrOffsetOutOfRange) && res.LogStartOffset > offset {
				offset = res.LogStartOffset
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, rec := range res.Records {
				var dl event.DeadLetter
				if err := json.Unmarshal(rec.Value, &dl); err != nil {
					return nil, fmt.Errorf("%s/%d@%d: undecodable dead letter: %w", topic, p, rec.Offset, err)
				}
				if d, ok := FromDeadLetter(dl); ok {
					out = append(out, d)
				}
			}
			if res.Next >= res.HighWatermark {
				break
			}
			if res.Next == offset {
				if stuck++; stuck > 100 {
					return nil, fmt.Errorf("%s/%d: no progress reading at offset %d (end %d)", topic, p, offset, res.HighWatermark)
				}
				continue
			}
			stuck = 0
			offset = res.Next
		}
	}
	return out, nil
}
