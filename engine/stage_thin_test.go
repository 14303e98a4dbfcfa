package engine

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/internal/testkit/fleet"
	"github.com/laneway/laneway/signing"
)

// An endpoint with payload "thin" gets id, type, timestamp and entity,
// never the data, signed like any delivery; a full endpoint of the same
// event gets the data (issue #17, thin events).
func TestThinEndpointsGetNoData(t *testing.T) {
	r := kfakeStageRig(t, 1)
	rc := fleet.NewRecorder(fleet.RecorderConfig{KeepBodies: true})
	t.Cleanup(rc.Close)
	thin, full := testEndpoint("ep_thin", rc.URL("/thin")), testEndpoint("ep_full", rc.URL("/full"))
	thin.Payload = endpoint.PayloadThin
	s := r.startStage(stageOpts{endpoints: newFakeEndpoints(thin, full), breakers: newFakeBreakers()})
	s.waitOwned(t, 0)
	r.produce(0, testDelivery("ev1", "ep_thin", "order:1", 7), testDelivery("ev1", "ep_full", "order:1", 7))
	bodies, headers := map[string][]byte{}, map[string]http.Header{}
	waitCond(t, 30*time.Second, "both deliveries", func() (bool, string) {
		for _, rq := range rc.Requests(nil) {
			bodies[rq.Path], headers[rq.Path] = rq.Body, rq.Header
		}
		return len(bodies) == 2, string(bodies["/thin"]) + " " + string(bodies["/full"])
	})
	var got map[string]json.RawMessage
	if err := json.Unmarshal(bodies["/thin"], &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["data"]; ok || len(got) != 4 || string(got["entity"]) != `{"id":"order:1","revision":7}` {
		t.Fatalf("thin body %s: want id, type, timestamp and entity only", bodies["/thin"])
	}
	if err := signing.Verify(headers["/thin"], bodies["/thin"], []string{thin.Secrets[0].Value}, time.Minute, time.Now()); err != nil {
		t.Fatalf("thin body's signature: %v", err)
	}
	if err := json.Unmarshal(bodies["/full"], &got); err != nil || string(got["data"]) != `{"n":1}` {
		t.Fatalf("full body %s: want the data", bodies["/full"])
	}
}
