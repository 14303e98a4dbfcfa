package jobs

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// selecting is a request that selects its records by ids or by a time
// range, as a redrive's and an inbound replay's do.
type selecting struct {
	IDs          []string
	Since, Until *time.Time
}

func selectingSelection(r *selecting) Selection {
	return Selection{IDs: &r.IDs, Since: &r.Since, Until: &r.Until}
}

func TestPrepareNormalisesWhatARequestSelects(t *testing.T) {
	refuse := func(r selecting) error {
		if len(r.IDs) == 0 && r.Since == nil {
			return &RequestError{Kind: "copy", Reason: "give ids or since"}
		}
		return nil
	}
	prepare := Prepare(refuse, selectingSelection)

	zone := time.FixedZone("x", 3600)
	since, until := time.Date(2024, 5, 1, 10, 0, 0, 0, zone), time.Date(2024, 5, 1, 12, 0, 0, 0, zone)
	got, end, err := prepare(selecting{IDs: []string{"b", "a", "b"}, Since: &since, Until: &until})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.IDs, []string{"a", "b"}) || got.Since.Location() != time.UTC || got.Until.Location() != time.UTC ||
		!got.Since.Equal(since) || end != got.Until {
		t.Fatalf("prepared %+v, end %v", got, end)
	}
	if _, end, _ := prepare(selecting{IDs: []string{"a"}}); end != nil {
		t.Errorf("a request without until ends at %v, want nil (now)", end)
	}

	_, _, err = prepare(selecting{})
	var re *RequestError
	if !errors.As(err, &re) || err.Error() != "invalid copy request: give ids or since" || re.Reason != "give ids or since" {
		t.Fatalf("refusal %v", err)
	}
}
