package app_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestServesConsoleSpecAndInboundDoor checks that the app mounts the
// console, the OpenAPI spec and the inbound capture route.
func TestServesConsoleSpecAndInboundDoor(t *testing.T) {
	testenv.Each(t, func(t *testing.T, b testenv.Backend) {
		a := startApp(t, b, nil)
		base := "http://" + a.HTTPAddr()
		for path, want := range map[string]int{"/": http.StatusOK, "/openapi.json": http.StatusOK} {
			resp, err := http.Get(base + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
			}
		}
		resp, err := http.Post(base+"/in/no-such-source", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST /in/no-such-source: %d, want 404 from the inbound door", resp.StatusCode)
		}
	})
}
