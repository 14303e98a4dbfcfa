package engine

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/model/endpoint"
	"github.com/laneway/laneway/signing"
)

// An endpoint with payload "thin" gets id, type, timestamp and entity,
// never the data, signed like any delivery; a full endpoint of the same
// event gets the data (issue #17, thin events).
func TestThinEndpointsGetNoData(t *testing.T) {
	r := kfakeStageRig(t, 1)
	var mu sync.Mutex
	bodies := map[string][]byte{}
	headers := map[string]http.Header{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		mu.Lock()
		bodies[req.URL.Path], headers[req.URL.Path] = b, req.Header.Clone()
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	thin, full := testEndpoint("ep_thin", srv.URL+"/thin"), testEndpoint("ep_full", srv.URL+"/full")
	thin.Payload = endpoint.PayloadThin
	s := r.startStage(stageOpts{endpoints: newFakeEndpoints(thin, full), breakers: newFakeBreakers()})
	s.waitOwned(t, 0)
	r.produce(0, testDelivery("ev1", "ep_thin", "order:1", 7), testDelivery("ev1", "ep_full", "order:1", 7))
	waitCond(t, 30*time.Second, "both deliveries", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
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
