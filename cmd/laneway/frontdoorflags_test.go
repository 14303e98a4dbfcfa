package main

import (
	"io"
	"net/netip"
	"testing"
	"time"
)

func TestFrontDoorFlags(t *testing.T) {
	env := map[string]string{"LANEWAY_INBOUND_RATE_PER_SOURCE": "7"}
	cfg, _, err := parseServe([]string{
		"--public-addr", "0.0.0.0:8443", "--http-read-timeout", "5s", "--inbound-trusted-proxies", "10.0.0.0/8, fd00::/8",
	}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	if cfg.PublicAddr != "0.0.0.0:8443" || cfg.HTTPLimits.ReadTimeout != 5*time.Second || cfg.HTTPLimits.MaxHeaderBytes != 64<<10 ||
		cfg.InboundRateLimits.PerSource != 7 || len(cfg.InboundRateLimits.TrustedProxies) != 2 ||
		cfg.InboundRateLimits.TrustedProxies[0] != want[0] || cfg.InboundRateLimits.TrustedProxies[1] != want[1] {
		t.Fatalf("parsed %+v %+v", cfg.HTTPLimits, cfg.InboundRateLimits)
	}
	if _, _, err := parseServe([]string{"--inbound-trusted-proxies", "ingress"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Fatal("a proxy that is not a CIDR was accepted")
	}
}
