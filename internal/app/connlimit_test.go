package app_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/plumbing/connlimit"
	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestPublicDoorCapsConnectionsPerAddress is the attack of idle sockets on
// the public door: one address opens more connections than its cap. The
// extras are closed at once (and counted), the ones within the cap are
// served, and the admin listener still answers that same address.
func TestPublicDoorCapsConnectionsPerAddress(t *testing.T) {
	const perAddress, extra = 4, 3
	a := startApp(t, testenv.Embedded, func(c *app.Config) {
		c.PublicAddr = "127.0.0.1:0"
		c.Conns = connlimit.Limits{PerAddress: perAddress, Total: 100}
	})
	conns := make([]net.Conn, perAddress+extra)
	for i := range conns {
		c, err := net.Dial("tcp", a.PublicAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns[i] = c
	}
	for i, c := range conns {
		served := answers(c)
		if want := i < perAddress; served != want {
			t.Errorf("connection %d of one address (cap %d): served %v, want %v", i+1, perAddress, served, want)
		}
	}
	if code := get(t, "http://"+a.HTTPAddr()+"/healthz"); code != http.StatusOK {
		t.Errorf("admin GET /healthz while the door is full: %d", code)
	}
	series := fmt.Sprintf(`laneway_listener_connections_refused_total{listener="public",reason="per_address"} %d`, extra)
	if code, body := metricsAs(t, "http://"+a.HTTPAddr(), ""); code != http.StatusOK || !strings.Contains(body, series+"\n") {
		t.Errorf("GET /metrics: %d, without %s", code, series)
	}
}

// answers sends a request on c and reports whether a response came back
// (a 404: the public door has no /healthz); a closed connection is not
// served.
func answers(c net.Conn) bool {
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return false
	}
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: door\r\n\r\n")); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return true
}
