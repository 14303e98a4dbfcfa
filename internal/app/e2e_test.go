package app_test

import (
	"testing"
	"time"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestEndToEnd publishes 10,000 events over 200 entities to 20 endpoints of
// 3 tenants and checks that each endpoint receives exactly its events, in
// revision order per entity, within its concurrency limit, all signed.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test")
	}
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		f, a, api := scenario(t, b, nil)
		subs := createSubscriptions(t, api, f)

		const events, entities = 10000, 200
		expected := publishEvents(t, a, events, entities, subs)
		total := 0
		for _, ids := range expected {
			total += len(ids)
		}
		waitForTotal(t, f, int64(total), 3*time.Minute)
		checkDeliveries(t, subs, expected)
	})
}
