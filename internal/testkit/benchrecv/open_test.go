package benchrecv

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/laneway/laneway/internal/plumbing/sockpeek"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func requestOn(c net.Conn) *http.Request {
	p := sockpeek.New(c)
	req, _ := http.NewRequestWithContext(context.WithValue(context.Background(), peekerKey{}, &p), http.MethodPost, "/", nil)
	return req
}

// A request whose client closed the connection is not counted in flight
// when the next one arrives; one whose client keeps it open is.
func TestEnterOpenLeavesOutClosedConnections(t *testing.T) {
	for _, tc := range []struct {
		name        string
		closeClient bool
		want        int64
	}{{"client closed", true, 1}, {"client open", false, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			ep := &endpointState{open: map[*http.Request]*sockpeek.Peeker{}}
			client, server := tcpPair(t)
			ep.enterOpen(requestOn(server))
			if tc.closeClient {
				client.Close()
			}
			_, next := tcpPair(t)
			ep.enterOpen(requestOn(next))
			if got := ep.maxInFlight.Load(); got != tc.want {
				t.Errorf("max in flight %d, want %d", got, tc.want)
			}
		})
	}
}
