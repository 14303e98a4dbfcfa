package main

import (
	"context"
	"io"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestFrontDoorFlags(t *testing.T) {
	env := map[string]string{"LANEWAY_INBOUND_RATE_PER_SOURCE": "7"}
	cfg, _, err := parseServe([]string{
		"--public-addr", "0.0.0.0:8443", "--http-read-timeout", "5s", "--inbound-trusted-proxies", "10.0.0.0/8, fd00::/8",
		"--http-max-conns", "900", "--http-max-conns-per-address", "8",
	}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	if cfg.PublicAddr != "0.0.0.0:8443" || cfg.HTTPLimits.ReadTimeout != 5*time.Second || cfg.HTTPLimits.MaxHeaderBytes != 64<<10 ||
		cfg.InboundRateLimits.PerSource != 7 || len(cfg.InboundRateLimits.TrustedProxies) != 2 ||
		cfg.InboundRateLimits.TrustedProxies[0] != want[0] || cfg.InboundRateLimits.TrustedProxies[1] != want[1] ||
		cfg.Conns.Total != 900 || cfg.Conns.PerAddress != 8 {
		t.Fatalf("parsed %+v %+v %+v", cfg.HTTPLimits, cfg.InboundRateLimits, cfg.Conns)
	}
	if _, _, err := parseServe([]string{"--inbound-trusted-proxies", "ingress"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Fatal("a proxy that is not a CIDR was accepted")
	}
}

// TestServeBannerNamesThePublicAddress: with --public-addr the banner
// prints the front door's own address, and that address serves the front
// door (an unknown source's JSON 404, nosniff) but not the console.
func TestServeBannerNamesThePublicAddress(t *testing.T) {
	var stdout, stderr lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, []string{
			"--http-addr", "127.0.0.1:0", "--public-addr", "127.0.0.1:0", "--embedded-kafka-addr", "127.0.0.1:0", "--data-dir", "",
		}, &stdout, &stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	base := waitForBanner(t, &stdout, &stderr, done)
	m := regexp.MustCompile(`Front door: +(http://[0-9.:]+)/in/\{source\}`).FindStringSubmatch(stdout.String())
	if m == nil || m[1] == base {
		t.Fatalf("the banner names no front door of its own (API at %s):\n%s", base, stdout.String())
	}
	resp, err := http.Post(m[1]+"/in/nope", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "unknown source") || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("POST %s/in/nope: %d %s %v, want the front door's 404", m[1], resp.StatusCode, body, resp.Header)
	}
	// The listener serves the pull feeds too: the banner and its 404 say
	// so, rather than "inbound webhooks only" (#27).
	if !regexp.MustCompile(`Front door: .*/v1/feed/\{id\}`).MatchString(stdout.String()) {
		t.Errorf("the banner's front door line does not name the pull feeds:\n%s", stdout.String())
	}
	if resp, err = http.Get(m[1] + "/"); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "/in/{source}") || !strings.Contains(string(body), "/v1/feed/") {
		t.Fatalf("GET %s/: %d %s, want a 404 naming what the public listener serves (the console is not on it)", m[1], resp.StatusCode, body)
	}
	if resp, err = http.Get(m[1] + "/v1/feed/ep_nope"); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET %s/v1/feed/ep_nope: %d, want the feed's 401", m[1], resp.StatusCode)
	}
}
