package engine

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/event"
	"github.com/laneway/laneway/internal/testkit/deadtopic"
)

// A delivery whose event id cannot be a header value (written before the
// doors refused such ids, or by hand) fails inside Laneway, not at the
// receiver. It used to be retried as a receiver failure, counted against
// the endpoint's breaker, and held its entity until it died (#27). It is
// dead at its first attempt now, as invalid_delivery, without reaching the
// breaker, and the entity's next event goes out.
func TestDeliveryOfAnUnsendableIDIsDeadAtOnce(t *testing.T) {
	r := kfakeStageRig(t, 1)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	ep := testEndpoint("ep_1", rc.URL("/1"))
	breakers := newFakeBreakers()
	s := r.startStage(stageOpts{endpoints: newFakeEndpoints(ep), breakers: breakers})
	s.waitOwned(t, 0)
	poison := "evt-1\r\nX-Injected: 1"
	r.produce(0, testDelivery(poison, "ep_1", "order:1", 1), testDelivery("evt-2", "ep_1", "order:1", 2))

	waitCond(t, time.Minute, "evt-2's delivery", func() (bool, string) {
		return rc.answered("evt-2", http.StatusOK) == 1, fmt.Sprintf("%+v", rc.requests())
	})
	letters := r.deadLetters()
	if len(letters) != 1 || letters[0].ID != poison+":ep_1" || letters[0].Reason != event.ReasonInvalidDelivery ||
		letters[0].Delivery == nil || letters[0].Delivery.Attempts != 1 || !strings.Contains(letters[0].Detail, "control characters") {
		t.Fatalf("dead letters %s, want one invalid_delivery letter of the poisoned delivery after 1 attempt, naming its cause", deadtopic.Describe(letters))
	}
	breakers.mu.Lock()
	defer breakers.mu.Unlock()
	if len(breakers.records) != 1 {
		t.Fatalf("the breaker recorded %d outcomes, want 1 (evt-2's success): the poisoned delivery says nothing about the receiver", len(breakers.records))
	}
}
