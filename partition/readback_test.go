package partition

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/model/event"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

type noEndpoints struct{}

func (noEndpoints) Get(id string) (endpoint.Endpoint, bool) { return endpoint.Endpoint{}, false }

type noEffects struct{}

func (noEffects) Send(*Attempt)                {}
func (noEffects) Append(*Append)               {}
func (noEffects) Read(*Read)                   {}
func (noEffects) WriteDead(*DeadWrite)         {}
func (noEffects) Disable(string, string)       {}
func (noEffects) WarmBreaker(string)           {}
func (noEffects) LoadHealth(endpointID string) {}

func parkedRecord(t *testing.T, offset, src int64, d event.Delivery) (*kgo.Record, event.Delivery) {
	t.Helper()
	v, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Offset: offset, Key: []byte(d.EndpointID), Value: v,
		Headers: []kgo.RecordHeader{{Key: SrcHeader, Value: []byte(strconv.FormatInt(src, 10))}}}, d
}

// Seed 183820: a parked state (rev 10) read back, then an older state of
// its entity (rev 7) within the lookahead. The owner that reads the newer
// one live drops the older one; an owner that reads the log again after a
// crash, when the newer one is past max_age and dies unread, must drop it
// too, or it delivers rev 7 for the first time after the first owner
// delivered a later revision of the entity.
func TestOlderStateAfterOneThatDiedUnreadStaysSuperseded(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	for _, unread := range []bool{false, true} {
		o, err := NewOwner(Config{Endpoints: noEndpoints{}, Effects: noEffects{}, Clock: fixedClock{now},
			ParkedTopic: "p", DeadTopic: "d", ParkedWindow: 8})
		if err != nil {
			t.Fatal(err)
		}
		pl := newParkedLane("ep1", 0)
		o.parked["ep1"] = pl
		ls := o.lane("ep1", 1)
		newer, dn := parkedRecord(t, 98, 107, event.Delivery{EventID: "ev98", EndpointID: "ep1", Entity: "e5", Revision: 10, Coalesce: true, CreatedAt: now.Add(-100 * time.Hour)})
		older, do := parkedRecord(t, 121, 109, event.Delivery{EventID: "ev42", EndpointID: "ep1", Entity: "e5", Revision: 7, Coalesce: true, CreatedAt: now})
		if unread {
			o.dieUnread(pl, ls, newer, &dn, now)
		} else {
			o.loadRecord(pl, ls, newer, &dn, nil)
		}
		o.promoteReady(pl, ls, false)
		o.loadRecord(pl, ls, older, &do, nil)
		o.promoteReady(pl, ls, true)
		for _, tk := range ls.lane.DrainUnstarted() {
			if tk.Revision == 7 {
				t.Errorf("unread=%v: the older state (rev 7) reached the lane after rev 10 of its entity", unread)
			}
		}
		if _, held := pl.unfinished[121]; held {
			t.Errorf("unread=%v: the older state's parked offset is still unfinished", unread)
		}
	}
}
