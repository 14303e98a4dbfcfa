package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strings"

	"github.com/laneway/laneway/internal/admin/api"
	"github.com/laneway/laneway/internal/app"
	"github.com/laneway/laneway/internal/inbound"
	"github.com/laneway/laneway/internal/plumbing/connlimit"
)

// frontDoorFlags binds the settings that bound what anonymous senders can
// cost: the public listener, the HTTP servers' limits and connection caps,
// the front door's rate limits and its keep budget for refusals.
func frontDoorFlags(fs *flag.FlagSet, cfg *app.Config) {
	fs.StringVar(&cfg.PublicAddr, "public-addr", "", "listen address serving the inbound front door (POST /in/{source}) and the pull feeds (/v1/feed/{id}) and nothing else; when set, --http-addr no longer serves it (empty: the door is on --http-addr)")
	fs.DurationVar(&cfg.HTTPLimits.ReadTimeout, "http-read-timeout", app.DefaultReadTimeout, "limit on reading one whole request, body included, on every listener")
	fs.DurationVar(&cfg.HTTPLimits.IdleTimeout, "http-idle-timeout", app.DefaultIdleTimeout, "close keep-alive connections idle this long")
	fs.IntVar(&cfg.HTTPLimits.MaxHeaderBytes, "http-max-header-bytes", app.DefaultMaxHeaderBytes, "limit on a request's line and headers (431 beyond)")
	fs.IntVar(&cfg.Conns.Total, "http-max-conns", connlimit.DefaultTotal(), "open connections each listener holds (the API's, the public door's); beyond, a new one is closed at once (default: an eighth of the file-descriptor limit)")
	fs.IntVar(&cfg.Conns.PerAddress, "http-max-conns-per-address", connlimit.DefaultPerAddress, "open connections one client address (IPv6: per /64) holds on each listener; --inbound-trusted-proxies are spared")
	r := &cfg.InboundRateLimits
	fs.Float64Var(&r.PerAddress, "inbound-rate-per-address", inbound.DefaultPerAddressRate, "front door requests/s per client address (IPv6: per /64); negative: no limit")
	fs.IntVar(&r.PerAddressBurst, "inbound-burst-per-address", 0, "front door burst per client address (0: twice the rate)")
	fs.Float64Var(&r.PerSource, "inbound-rate-per-source", inbound.DefaultPerSourceRate, "front door requests/s per source, all addresses together; negative: no limit")
	fs.IntVar(&r.PerSourceBurst, "inbound-burst-per-source", 0, "front door burst per source (0: twice the rate)")
	fs.Var((*prefixList)(&r.TrustedProxies), "inbound-trusted-proxies", "comma-separated CIDRs of proxies (the ingress) whose X-Forwarded-For names the client for the rate limits")
	fs.IntVar(&cfg.FeedAuthLimit.Failures, "feed-auth-failures", api.DefaultFeedAuthFailures, "failed feed authentications (GET /v1/feed/…) one client address may make per --feed-auth-window before 429; negative: no limit")
	fs.DurationVar(&cfg.FeedAuthLimit.Window, "feed-auth-window", api.DefaultFeedAuthWindow, "the window in which --feed-auth-failures are earned back")
	fs.Float64Var(&cfg.InboundRefusedKeepRate, "inbound-refused-keep-rate", inbound.DefaultRefusedKeepRate, "refused front door requests/s kept as metadata for forensics (beyond: only counted); negative: none")
}

// prefixList is a comma-separated list of CIDRs.
type prefixList []netip.Prefix

func (l *prefixList) String() string {
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (l *prefixList) Set(v string) error {
	*l = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR: %w", s, err)
		}
		*l = append(*l, p)
	}
	return nil
}
