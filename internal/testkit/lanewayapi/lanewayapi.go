// Package lanewayapi is the test kit's client side of a Laneway HTTP API:
// an address to give a Laneway child process, the wait until it is ready,
// and JSON requests that want one status and decode the answer. The
// benchmark and the chaos harness share it, so that both set a Laneway up
// the same way.
package lanewayapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/laneway/laneway/internal/testkit/poll"
)

// maxAnswer bounds how much of an answer is read: the API's answers to the
// test kit's calls are small, and an error's body is only quoted.
const maxAnswer = 1 << 20

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
	resp, err := Send(ctx, client, http.MethodGet, "http://"+addr+"/readyz", nil, nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s", resp.Status)
	}
	return nil
}

// Send sends body (none when nil) to url as JSON, with header's fields
// added, and returns the answer for the caller to read and close.
func Send(ctx context.Context, client *http.Client, method, url string, body []byte, header http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Content-Type", "application/json")
	return client.Do(req)
}

// StatusError is an answer with a status other than the one wanted.
type StatusError struct {
	Code   int    // the answer's status code
	Status string // its status line, e.g. "409 Conflict"
	Body   string // its body, trimmed
}

func (e *StatusError) Error() string { return e.Status + ": " + e.Body }

// IsStatus reports whether err is an answer with status code (any status
// when code is 0).
func IsStatus(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && (code == 0 || se.Code == code)
}

// Call sends body with Send and wants the status want: any other is a
// *StatusError. It decodes the answer into out unless out is nil.
func Call(ctx context.Context, client *http.Client, method, url string, body []byte, header http.Header, want int, out any) error {
	resp, err := Send(ctx, client, method, url, body, header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode != want {
		return &StatusError{Code: resp.StatusCode, Status: resp.Status, Body: string(bytes.TrimSpace(b))}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	return nil
}
