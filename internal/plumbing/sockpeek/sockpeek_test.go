package sockpeek_test

import (
	"net"
	"runtime"
	"testing"

	"github.com/laneway/laneway/internal/plumbing/sockpeek"
)

func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

func TestPeekSeesQuietPendingAndClosed(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("peeks only on Linux")
	}
	client, server := tcpPair(t)
	p := sockpeek.New(server)
	if got := p.Peek(); got != sockpeek.Quiet {
		t.Fatalf("fresh connection: %v, want Quiet", got)
	}
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if got := p.Peek(); got != sockpeek.Pending {
		t.Fatalf("after a write: %v, want Pending", got)
	}
	buf := make([]byte, 1)
	if _, err := server.Read(buf); err != nil { // the peek took nothing
		t.Fatal(err)
	}
	client.Close()
	if got := p.Peek(); got != sockpeek.Closed {
		t.Fatalf("after the client's close: %v, want Closed", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { p.Peek() }); allocs != 0 {
		t.Errorf("%.0f allocations per peek, want 0", allocs)
	}
}
