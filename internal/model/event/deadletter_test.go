package event_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
)

// TestUnreadableRecordNamesItsPlaceAndKeepsTheRaw: the letter of an
// unreadable record is named after its place in Kafka (the same letter
// when the record is read again), stamped in UTC, and keeps the raw value
// cut to MaxDeadRawBytes with its size.
func TestUnreadableRecordNamesItsPlaceAndKeepsTheRaw(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	raw := []byte(strings.Repeat("x", event.MaxDeadRawBytes+10))
	dl := event.UnreadableRecord(event.ReasonInvalidDelivery, "laneway.deliveries", 3, 42, raw, "ep_1", errors.New("bad JSON"), at)
	if dl.ID != "laneway.deliveries-3-42" || dl.Source != "laneway.deliveries/3/42" {
		t.Errorf("id %q, source %q", dl.ID, dl.Source)
	}
	if dl.Reason != event.ReasonInvalidDelivery || dl.Detail != "bad JSON" || dl.EndpointID != "ep_1" {
		t.Errorf("reason %q, detail %q, endpoint %q", dl.Reason, dl.Detail, dl.EndpointID)
	}
	if !dl.DeadAt.Equal(at) || dl.DeadAt.Location() != time.UTC {
		t.Errorf("dead at %v, want %v in UTC", dl.DeadAt, at)
	}
	if len(dl.Raw) != event.MaxDeadRawBytes || dl.RawSize != len(raw) {
		t.Errorf("raw %d bytes, size %d; want %d, %d", len(dl.Raw), dl.RawSize, event.MaxDeadRawBytes, len(raw))
	}
}
