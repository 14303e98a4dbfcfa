// Command laneway-healthcheck is the container image's readiness check.
// The runtime image (distroless static) has no shell, curl or wget, so a
// Compose or Docker healthcheck runs this instead:
//
//	laneway-healthcheck [URL]
//
// It GETs URL (default http://127.0.0.1:8080/readyz) and exits 0 on a 2xx
// answer within 3 seconds, 1 otherwise. Kubernetes does not need it: its
// httpGet probes call /healthz and /readyz directly.
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

const defaultURL = "http://127.0.0.1:8080/readyz"

func main() {
	url := defaultURL
	if len(os.Args) > 1 {
		url = os.Args[1]
	}
	if err := check(url, 3*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "laneway-healthcheck:", err)
		os.Exit(1)
	}
}

func check(url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}
