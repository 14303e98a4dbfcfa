package ssrf

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// An allow-list that covers every public address of a family, whether in
// one prefix or several, is reported; one that opens internal networks
// alone, or leaves any public range out, is not.
func TestCoversAllPublic(t *testing.T) {
	for list, want := range map[string][]string{
		"0.0.0.0/0":             {"IPv4"},
		"::/0":                  {"IPv6"},
		"0.0.0.0/0,::/0":        {"IPv4", "IPv6"},
		"0.0.0.0/1,128.0.0.0/1": {"IPv4"},
		"2000::/3":              {"IPv6"},
		"2000::/4,3000::/4":     {"IPv6"},
		"1.0.0.0/8,2.0.0.0/7,4.0.0.0/6,8.0.0.0/5,16.0.0.0/4,32.0.0.0/3,64.0.0.0/2,128.0.0.0/2,192.0.0.0/3": {"IPv4"},
		"10.0.0.0/8,172.16.0.0/12,192.168.0.0/16":                                                          nil,
		"127.0.0.0/8,::1/128":               nil,
		"0.0.0.0/1":                         nil,
		"0.0.0.0/1,128.0.0.0/2,192.0.0.0/3": {"IPv4"}, // what is left, 224/3, is multicast and reserved
		"0.0.0.0/1,128.0.0.0/2":             nil,      // 192.0.0.0-223.255.255.255 left out
		"2000::/4":                          nil,
		"fc00::/7,fe80::/10":                nil,
	} {
		var allow []netip.Prefix
		for _, s := range strings.Split(list, ",") {
			allow = append(allow, netip.MustParsePrefix(s))
		}
		if got := CoversAllPublic(allow); !slices.Equal(got, want) {
			t.Errorf("CoversAllPublic(%s) = %v, want %v", list, got, want)
		}
	}
}
