package app

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/laneway/laneway/internal/security/ssrf"
)

// warnUnsafe names, once at start, each setting that works but leaves a
// door open, in one WARN line that says what to do. They warn rather than
// refuse: each can be deliberate (a test rig, a closed network).
func (a *App) warnUnsafe(context.Context) error {
	a.warnBroadAllow()
	a.warnKeyFileMode()
	a.warnZeroKeys()
	return nil
}

// warnBroadAllow: an allow-list covering all public space turns the SSRF
// guard off for every range it covers.
func (a *App) warnBroadAllow() {
	for _, family := range ssrf.CoversAllPublic(a.cfg.AllowTargets) {
		a.log.Warn("--allow-targets covers every public "+family+" address, so it lets delivery reach any private, loopback "+
			"or cloud-metadata address it also covers: any endpoint URL can then probe your internal network; "+
			"list only the internal networks endpoints need (e.g. 10.1.2.0/24)",
			"allow_targets", prefixes(a.cfg.AllowTargets))
	}
}

// warnKeyFileMode: a key file others can read gives them every sealed
// secret on Kafka.
func (a *App) warnKeyFileMode() {
	if a.keyFile == "" {
		return
	}
	st, err := os.Stat(a.keyFile)
	if err != nil || st.Mode().Perm()&0o044 == 0 {
		return // a key file that cannot be read failed earlier
	}
	a.log.Warn("secrets key file can be read by group or others: whoever can read it can open every endpoint and "+
		"source secret on Kafka; chmod 600 it (owned by the user running laneway), or mount it with mode 0400",
		"path", a.keyFile, "mode", fmt.Sprintf("%#o", st.Mode().Perm()))
}

// warnZeroKeys: an all-zero key is public knowledge.
func (a *App) warnZeroKeys() {
	if a.secrets == nil {
		return
	}
	for _, id := range a.secrets.ZeroKeyIDs() {
		a.log.Warn("secrets key "+id+" is all zeros: anyone can open the secrets sealed under it; add a real key as the "+
			"last line of the key file (laneway secrets new-key), run laneway secrets rekey, then remove "+id,
			"key_id", id)
	}
}

func prefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}
