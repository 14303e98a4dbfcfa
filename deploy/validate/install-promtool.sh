#!/usr/bin/env bash
# Installs promtool (Debian package "prometheus") for deploy/validate when it
# is missing, and makes sure the install leaves no prometheus daemon running:
# a policy-rc.d that forbids service starts is put in place for the install
# when the machine has none, and any prometheus process that appeared during
# the install is stopped by its PID (a systemd unit is stopped and disabled).
set -euo pipefail

if command -v promtool >/dev/null; then
	exit 0
fi

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		echo "install-promtool: need root (or sudo) to run: $*" >&2
		exit 1
	fi
}

policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	as_root sh -c "printf '#!/bin/sh\nexit 101\n' >$policy && chmod 755 $policy"
	trap 'as_root rm -f "$policy"' EXIT
fi

before="$(pgrep -x prometheus || true)"
echo "install-promtool: installing the Debian package prometheus (for promtool)..." >&2
log="$(mktemp)"
if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >"$log" 2>&1 ||
	! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >>"$log" 2>&1; then
	tail -n 30 "$log" >&2
	rm -f "$log"
	echo "install-promtool: apt-get install prometheus failed" >&2
	exit 1
fi
rm -f "$log"

if [ -d /run/systemd/system ] && command -v systemctl >/dev/null; then
	as_root systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
for pid in $(pgrep -x prometheus || true); do
	if ! grep -qx "$pid" <<<"$before"; then
		echo "install-promtool: stopping prometheus (pid $pid) started by the package install" >&2
		as_root kill "$pid" || true
	fi
done
command -v promtool >/dev/null
