// Package lanewayapi is the test kit's side of starting a Laneway HTTP API:
// an address to give a Laneway child process and the wait until it is
// ready. The benchmark and the chaos harness share it, so that both set a
// Laneway up the same way; they call the API itself with internal/admin/client.
package lanewayapi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/laneway/laneway/internal/testkit/poll"
)

// FreeAddr returns a loopback address nobody listened on a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// ErrExited is WaitReady's error when the process exits before it is ready.
var ErrExited = errors.New("exited before it was ready")

// WaitReady polls http://addr/readyz until it answers 200. It returns
// ErrExited once exited is closed, and an error naming the last failure
// when ctx ends or two minutes pass.
func WaitReady(ctx context.Context, addr string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	gone := false
	var last error
	err := poll.Until(ctx, 50*time.Millisecond, func() bool {
		select {
		case <-exited:
			gone = true
			return true
		default:
		}
		last = readyz(ctx, client, addr)
		return last == nil
	})
	switch {
	case gone:
		return ErrExited
	case err != nil && last != nil:
		return fmt.Errorf("not ready: %w", last)
	case err != nil:
		return fmt.Errorf("not ready: %w", err)
	}
	return nil
}

func readyz(ctx context.Context, client *http.Client, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}
