# shellcheck shell=bash
# Sourced by scripts/testenv.sh, which sets the configuration ($ROOT,
# $STATE, the ports) and dispatches the subcommands: logging, installs, ports and processes.

log() { echo "testenv: $*" >&2; }
die() { echo "testenv: ERROR: $*" >&2; exit 1; }
now_ms() { date +%s%3N; }
elapsed() { local ms=$(($(now_ms) - $1)); printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)); }

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		die "need root (or sudo) to run: $*"
	fi
}

apt_install() {
	log "installing $* with apt-get (first run only)..."
	local out
	out="$(mktemp)"
	if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >"$out" 2>&1 ||
		! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >>"$out" 2>&1; then
		tail -n 30 "$out" >&2
		rm -f "$out"
		die "apt-get install $* failed"
	fi
	rm -f "$out"
}

# ---------------------------------------------------------------- installs --

ensure_tools() {
	local pkgs=()
	command -v redis-server >/dev/null || pkgs+=(redis-server)
	command -v redis-cli >/dev/null || pkgs+=(redis-tools)
	command -v java >/dev/null || pkgs+=(openjdk-17-jre-headless)
	command -v mvn >/dev/null || pkgs+=(maven)
	# The console's browser test drives a real headless Chromium.
	command -v chromium >/dev/null || pkgs+=(chromium)
	if [ "${#pkgs[@]}" -gt 0 ]; then apt_install "${pkgs[@]}"; fi
	command -v go >/dev/null || die "go is not on PATH"
}

# ensure_kafka_jars puts every runtime jar of kafka_2.13 (+ log4j binding) in
# $LIBS, once; the cache is keyed by the pom's content.
ensure_kafka_jars() {
	local want have=""
	want="$(sha256sum "$POM" | cut -d' ' -f1)"
	[ -f "$KAFKA_HOME/.complete" ] && have="$(cat "$KAFKA_HOME/.complete")"
	if [ "$have" = "$want" ] && [ -d "$LIBS" ]; then return 0; fi

	# One fetcher at a time; re-check once we hold the lock.
	mkdir -p "$CACHE"
	exec 7>"$CACHE/.kafka-$KAFKA_VERSION.lock"
	flock -w 600 7 || die "timed out waiting for another Kafka jar fetch"
	[ -f "$KAFKA_HOME/.complete" ] && have="$(cat "$KAFKA_HOME/.complete")"
	if [ "$have" = "$want" ] && [ -d "$LIBS" ]; then exec 7>&-; return 0; fi

	log "fetching Kafka $KAFKA_VERSION jars from Maven Central into $LIBS (first run only)..."
	local t0 tmp
	t0="$(now_ms)"
	tmp="$(mktemp -d "$CACHE/.kafka-$KAFKA_VERSION.XXXXXX")"
	cp "$POM" "$tmp/pom.xml" # build outside the repo: nothing lands in the work tree
	if ! mvn -q -B -Dstyle.color=never -f "$tmp/pom.xml" -Dkafka.libs.dir="$tmp/libs" package >"$tmp/mvn.log" 2>&1; then
		tail -n 40 "$tmp/mvn.log" >&2
		rm -rf "$tmp"
		die "mvn failed to fetch Kafka $KAFKA_VERSION"
	fi
	ls "$tmp/libs"/kafka_2.13-*.jar >/dev/null 2>&1 || { rm -rf "$tmp"; die "kafka_2.13 jar missing after mvn"; }
	rm -rf "$KAFKA_HOME"
	mkdir -p "$KAFKA_HOME"
	mv "$tmp/libs" "$LIBS"
	echo "$want" >"$KAFKA_HOME/.complete"
	rm -rf "$tmp"
	exec 7>&-
	log "Kafka jars ready ($(ls "$LIBS" | wc -l) jars, $(elapsed "$t0"))"
}

# ------------------------------------------------------------------- ports --

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

CHOSEN_PORTS=" "
PICKED=""
# pick_port NAME ENVVAR DEFAULT -> sets PICKED (not via $(...): CHOSEN_PORTS must persist)
pick_port() {
	local name="$1" var="$2" def="$3" p
	if [ -n "${!var:-}" ]; then
		p="${!var}"
		[[ "$p" =~ ^[0-9]+$ ]] || die "$var=$p is not a port number"
		if port_in_use "$p" || [[ "$CHOSEN_PORTS" == *" $p "* ]]; then
			die "$name port $p (from $var) is already in use on 127.0.0.1 (or given twice); free it or pick another"
		fi
	else
		p="$def"
		if port_in_use "$p" || [[ "$CHOSEN_PORTS" == *" $p "* ]]; then
			local tries=0
			while :; do
				p=$((20000 + RANDOM % 12000))
				if ! port_in_use "$p" && [[ "$CHOSEN_PORTS" != *" $p "* ]]; then break; fi
				tries=$((tries + 1))
				[ "$tries" -lt 200 ] || die "could not find a free port for $name"
			done
			log "$name default port $def is taken; using $p (set $var to choose)"
		fi
	fi
	CHOSEN_PORTS+="$p "
	PICKED="$p"
}

# --------------------------------------------------------------- processes --

# alive PID: the process exists and is not a zombie.
alive() {
	local pid="$1" st
	[ -r "/proc/$pid/stat" ] || return 1
	st="$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

# ours PIDFILE PATTERN -> echoes the pid if it is alive and its command line
# contains PATTERN (guards against a recycled PID after a crash/reboot).
ours() {
	local pidfile="$1" pat="$2" pid
	[ -s "$pidfile" ] || return 1
	pid="$(tr -dc '0-9' <"$pidfile")"
	[ -n "$pid" ] || return 1
	alive "$pid" || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$pat" || return 1
	echo "$pid"
}

# stop_pid NAME PID DEADLINE_S: TERM, wait, then KILL.
stop_pid() {
	local name="$1" pid="$2" secs="$3" i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < secs * 10; i++)); do
		alive "$pid" || return 0
		sleep 0.1
	done
	log "$name (pid $pid) did not stop within ${secs}s; sending KILL"
	kill -KILL "$pid" 2>/dev/null || true
	for ((i = 0; i < 50; i++)); do
		alive "$pid" || return 0
		sleep 0.1
	done
	log "WARNING: $name (pid $pid) still alive after KILL"
}

# start_bg NAME PIDFILE LOGFILE CMD...: start CMD detached (own session, not
# our child, stdio to LOGFILE) and wait for it to record its own PID.
start_bg() {
	local name="$1" pidfile="$2" logfile="$3" i
	shift 3
	rm -f "$pidfile"
	# The inner bash writes its PID then execs CMD, so the PID file is CMD's PID.
	setsid -f bash -c 'echo $$ >"$1.tmp" && mv "$1.tmp" "$1" && shift && exec "$@"' \
		_ "$pidfile" "$@" </dev/null >>"$logfile" 2>&1 8>&-
	for ((i = 0; i < 100; i++)); do
		[ -s "$pidfile" ] && return 0
		sleep 0.05
	done
	die "$name did not start (no PID file); see $logfile"
}
