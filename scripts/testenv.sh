#!/usr/bin/env bash
# Test environment for laneway: a real single-node Apache Kafka 4.x broker
# (KRaft combined mode, from Maven Central jars, no Docker) and a real Redis,
# both on 127.0.0.1.
#
#   scripts/testenv.sh up        install if needed, start both, wait until ready
#   scripts/testenv.sh down      stop both (by PID files), remove the state dir
#   scripts/testenv.sh env       print the exports for a running env
#   scripts/testenv.sh test [go test args...]
#                                up, go test -race (default ./...), down on exit
#
# Fault injection on a running env (the chaos harness, internal/chaos), each
# by PID file, keeping the ports, the data dir and the env file:
#   scripts/testenv.sh kafka-stop [--kill]   stop the broker (TERM, or KILL at once)
#   scripts/testenv.sh kafka-start           start it again, wait until ready
#   scripts/testenv.sh redis-stop [--kill]   stop Redis (its data is gone: no persistence)
#   scripts/testenv.sh redis-start           start it again, wait for PONG
#
# Environment knobs:
#   LANEWAY_CACHE                   jar cache root      (default $HOME/.cache/laneway)
#   LANEWAY_TESTENV_DIR             state dir           (default /tmp/laneway-testenv;
#                                   `test` uses a private /tmp/laneway-testenv-test.* dir
#                                   unless this is set, so parallel runs don't collide)
#   LANEWAY_KAFKA_PORT              broker port         (default 39092)
#   LANEWAY_KAFKA_CONTROLLER_PORT   KRaft controller    (default 39093)
#   LANEWAY_REDIS_PORT              redis port          (default 36379)
#     A port set explicitly must be free or `up` fails; a default port that
#     is taken is replaced by a free one (reported).
#   LANEWAY_KAFKA_EXTRA_PROPS       extra lines appended to server.properties
#   LANEWAY_KAFKA_FORMAT_ARGS       extra arguments to the storage format, e.g.
#                                   "--feature transaction.version=1"
#   LANEWAY_KAFKA_LOG4J             the broker's Log4j 2 config (default
#                                   scripts/kafka/log4j2.properties: WARN)
#   LANEWAY_TESTENV_KEEP=1          `down` keeps the state dir (logs) instead of removing it
#   LANEWAY_READY_TIMEOUT           seconds to wait for Kafka readiness (default 120)
#
# Exports provided to tests (and written to $STATE/env):
#   LANEWAY_TEST_KAFKA_BROKERS=127.0.0.1:<port>
#   LANEWAY_TEST_REDIS_URL=redis://127.0.0.1:<port>/0
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
POM="$ROOT/scripts/kafka/pom.xml"
LOG4J_CONF="${LANEWAY_KAFKA_LOG4J:-$ROOT/scripts/kafka/log4j2.properties}"
KAFKA_VERSION="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$POM" | head -n1)"
CACHE="${LANEWAY_CACHE:-${HOME:-/root}/.cache/laneway}"
KAFKA_HOME="$CACHE/kafka-$KAFKA_VERSION"
LIBS="$KAFKA_HOME/libs"
STATE="${LANEWAY_TESTENV_DIR:-/tmp/laneway-testenv}"
MARKER=".laneway-testenv"
READY_TIMEOUT="${LANEWAY_READY_TIMEOUT:-120}"
OWNER_PID="" # set by `test` for its private state dir

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

# ------------------------------------------------------------- subcommands --

# safe_state_dir refuses to delete anything that is not clearly ours.
safe_state_dir() {
	case "$STATE" in
	/*) ;;
	*) die "state dir must be an absolute path: $STATE" ;;
	esac
	[ "$STATE" != "/" ] || die "refusing state dir /"
	if [ -d "$STATE" ] && [ ! -e "$STATE/$MARKER" ] && [ -n "$(ls -A "$STATE")" ]; then
		die "$STATE exists, is not empty and is not a laneway test env; refusing to touch it"
	fi
}

cmd_down() {
	local quiet="${1:-}" pid
	safe_state_dir
	[ -d "$STATE" ] || { [ -n "$quiet" ] || log "nothing to stop ($STATE does not exist)"; return 0; }
	if pid="$(ours "$STATE/redis.pid" redis-server)"; then
		stop_pid redis "$pid" 10
		[ -n "$quiet" ] || log "redis stopped (pid $pid)"
	fi
	if pid="$(ours "$STATE/kafka.pid" "kafka.Kafka $STATE/server.properties")"; then
		stop_pid kafka "$pid" 30
		[ -n "$quiet" ] || log "kafka stopped (pid $pid)"
	fi
	if [ "${LANEWAY_TESTENV_KEEP:-}" = 1 ]; then
		rm -f "$STATE/kafka.pid" "$STATE/redis.pid" "$STATE/env"
		[ -n "$quiet" ] || log "kept $STATE (LANEWAY_TESTENV_KEEP=1)"
	else
		rm -rf "$STATE"
	fi
}

write_server_properties() {
	local kport="$1" cport="$2"
	cat >"$STATE/server.properties" <<EOF
# Generated by scripts/testenv.sh: single-node KRaft (combined) test broker.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$kport,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$kport
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$STATE/kafka-data

# One node: every internal topic must have replication factor / min ISR 1.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=8
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=8
default.replication.factor=1
min.insync.replicas=1

group.initial.rebalance.delay.ms=0
# A killed consumer's partitions move after its session times out: short
# for tests (crash tests kill -9 instances), Kafka's 45 s in production.
group.consumer.min.session.timeout.ms=3000
group.consumer.session.timeout.ms=6000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000
group.min.session.timeout.ms=3000
transaction.abort.timed.out.transaction.cleanup.interval.ms=2000
auto.create.topics.enable=false
num.partitions=8
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
EOF
	if [ -n "${LANEWAY_KAFKA_EXTRA_PROPS:-}" ]; then
		printf '\n# LANEWAY_KAFKA_EXTRA_PROPS\n%s\n' "$LANEWAY_KAFKA_EXTRA_PROPS" >>"$STATE/server.properties"
	fi
}

# random_cluster_id: 16 random bytes, base64url without padding (Kafka's Uuid form).
# Never starting with '-': the StorageTool's parser would take it for an option.
random_cluster_id() {
	local id
	while :; do
		id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
		[ "${id:0:1}" != "-" ] && [ "${#id}" -eq 22 ] && break
	done
	echo "$id"
}

kafka_failed() {
	log "--- last lines of $STATE/kafka.log ---"
	tail -n 40 "$STATE/kafka.log" >&2 || true
	cmd_down quiet || true
	die "$1"
}

cmd_up() {
	local t0 kport cport rport cid kpid rpid i
	t0="$(now_ms)"
	ensure_tools
	ensure_kafka_jars

	# Recover from a previous run or a crash: stop what the PID files name, start fresh.
	cmd_down quiet
	safe_state_dir

	# Concurrent `up`s on one machine (parallel `make test`s) must not pick the
	# same free port: hold a machine-wide lock from picking ports until both
	# servers listen. Children never inherit it (start_bg closes fd 8).
	exec 8>"${TMPDIR:-/tmp}/laneway-testenv.ports.lock"
	flock -w 300 8 || die "timed out waiting for another testenv to start (port lock)"

	pick_port kafka LANEWAY_KAFKA_PORT 39092 && kport="$PICKED"
	pick_port kafka-controller LANEWAY_KAFKA_CONTROLLER_PORT 39093 && cport="$PICKED"
	pick_port redis LANEWAY_REDIS_PORT 36379 && rport="$PICKED"

	mkdir -p "$STATE/kafka-data" "$STATE/redis"
	# owner before marker: reap_stale_test_dirs never sees a marked dir without owner.
	if [ -n "$OWNER_PID" ]; then echo "$OWNER_PID" >"$STATE/owner"; fi
	touch "$STATE/$MARKER"
	write_server_properties "$kport" "$cport"

	local java=(java -Xmx512m -Xms128m -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
		"-Dlog4j2.configurationFile=file:$LOG4J_CONF" -cp "$LIBS/*")

	# Format storage (static quorum via controller.quorum.voters: no --standalone).
	cid="$(random_cluster_id)"
	# shellcheck disable=SC2086 # LANEWAY_KAFKA_FORMAT_ARGS is split on purpose
	if ! "${java[@]}" kafka.tools.StorageTool format -t "$cid" -c "$STATE/server.properties" \
		${LANEWAY_KAFKA_FORMAT_ARGS:-} >"$STATE/format.log" 2>&1; then
		cat "$STATE/format.log" >&2
		cmd_down quiet || true
		die "kafka storage format failed"
	fi

	start_bg kafka "$STATE/kafka.pid" "$STATE/kafka.log" "${java[@]}" kafka.Kafka "$STATE/server.properties"
	start_bg redis "$STATE/redis.pid" "$STATE/redis.log" redis-server --port "$rport" --bind 127.0.0.1 \
		--save '' --appendonly no --daemonize no --dir "$STATE/redis" --protected-mode yes
	kpid="$(cat "$STATE/kafka.pid")"
	rpid="$(cat "$STATE/redis.pid")"

	# Build the readiness probe while the JVM starts.
	(cd "$ROOT" && go build -o "$STATE/kafkaready" ./scripts/kafkaready 8>&-) ||
		kafka_failed "could not build scripts/kafkaready"

	# Redis: PING until PONG.
	for ((i = 0; ; i++)); do
		[ "$(redis-cli -h 127.0.0.1 -p "$rport" ping 2>/dev/null || true)" = PONG ] && break
		if ! alive "$rpid" || [ "$i" -ge 200 ]; then
			tail -n 20 "$STATE/redis.log" >&2 || true
			cmd_down quiet || true
			die "redis did not become ready on 127.0.0.1:$rport"
		fi
		sleep 0.1
	done

	# Kafka: port open (fail fast if the JVM died), then a real metadata
	# request, a group coordinator and a transactional produce+commit.
	local deadline=$(($(date +%s) + READY_TIMEOUT))
	until port_in_use "$kport"; do
		if ! alive "$kpid"; then
			if grep -q "Address already in use" "$STATE/kafka.log"; then
				kafka_failed "kafka could not bind 127.0.0.1:$kport or :$cport (taken by another process meanwhile)"
			fi
			kafka_failed "kafka exited during startup"
		fi
		[ "$(date +%s)" -lt "$deadline" ] || kafka_failed "kafka port $kport not open after ${READY_TIMEOUT}s"
		sleep 0.2
	done
	flock -u 8
	exec 8>&-
	local left=$((deadline - $(date +%s)))
	[ "$left" -gt 5 ] || left=5
	"$STATE/kafkaready" -brokers "127.0.0.1:$kport" -timeout "${left}s" -group -txn -q ||
		kafka_failed "kafka did not answer metadata/group/transaction requests"

	cat >"$STATE/env" <<EOF
export LANEWAY_TEST_KAFKA_BROKERS=127.0.0.1:$kport
export LANEWAY_TEST_REDIS_URL=redis://127.0.0.1:$rport/0
EOF
	log "up in $(elapsed "$t0"): kafka $KAFKA_VERSION pid $kpid on 127.0.0.1:$kport (controller $cport), redis pid $rpid on 127.0.0.1:$rport; state $STATE"
	cat "$STATE/env"
}

cmd_env() {
	[ -f "$STATE/env" ] || die "no running test env in $STATE (run: $0 up)"
	cat "$STATE/env"
}

# reap_stale_test_dirs stops envs left by `test` runs that were killed hard
# (SIGKILL gives no chance to run the EXIT trap).
reap_stale_test_dirs() {
	local d owner
	for d in /tmp/laneway-testenv-test.*; do
		[ -d "$d" ] && [ -e "$d/$MARKER" ] && [ -s "$d/owner" ] || continue
		owner="$(tr -dc '0-9' <"$d/owner")"
		if [ -n "$owner" ] && alive "$owner"; then continue; fi
		log "cleaning up stale test env $d"
		(STATE="$d" && cmd_down quiet) || true
	done
}

TEST_RC=0
GOTEST_PID=""
on_test_exit() {
	local rc=$?
	trap - EXIT INT TERM
	[ "$TEST_RC" -ne 0 ] && rc="$TEST_RC"
	cmd_down quiet || true
	exit "$rc"
}

# on_test_signal SIG CODE: pass the signal on to go test's process group
# (go test and the test binaries), let it finish, then exit (EXIT trap: down).
on_test_signal() {
	trap - INT TERM
	if [ -n "$GOTEST_PID" ]; then
		log "got SIG$1: stopping go test"
		kill -s "$1" -- "-$GOTEST_PID" 2>/dev/null || true
		wait "$GOTEST_PID" 2>/dev/null || true
	fi
	TEST_RC="$2"
	exit "$2"
}

cmd_test() {
	if [ -z "${LANEWAY_TESTENV_DIR:-}" ]; then
		reap_stale_test_dirs
		STATE="$(mktemp -d /tmp/laneway-testenv-test.XXXXXX)"
		OWNER_PID=$$
		echo "$OWNER_PID" >"$STATE/owner"
		touch "$STATE/$MARKER"
	fi
	trap on_test_exit EXIT
	trap 'on_test_signal INT 130' INT
	trap 'on_test_signal TERM 143' TERM

	# A port found free can be taken before Kafka binds it (other brokers on
	# a shared machine, sockets of a broker that just stopped): try again,
	# on fresh ports, before giving up.
	local try
	for try in 1 2 3; do
		if (cmd_up >/dev/null); then break; fi
		[ "$try" -lt 3 ] || exit 1
		log "starting the test services failed (attempt $try); retrying"
	done
	# shellcheck disable=SC1091
	source "$STATE/env"
	export LANEWAY_TEST_KAFKA_BROKERS LANEWAY_TEST_REDIS_URL
	log "LANEWAY_TEST_KAFKA_BROKERS=$LANEWAY_TEST_KAFKA_BROKERS LANEWAY_TEST_REDIS_URL=$LANEWAY_TEST_REDIS_URL"

	if [ "$#" -eq 0 ]; then set -- ./...; fi
	cd "$ROOT"
	# go test runs in its own process group (set -m) in the background so a
	# signal to this script runs the trap at once and reaches the test binaries.
	set -m
	go test -race -count=1 -timeout 20m "$@" &
	GOTEST_PID=$!
	set +m
	wait "$GOTEST_PID" || TEST_RC=$?
	GOTEST_PID=""
	exit "$TEST_RC"
}

# ------------------------------------------------- fault injection (chaos) --

# need_env fails unless `up` has run in $STATE.
need_env() {
	[ -f "$STATE/env" ] && [ -f "$STATE/server.properties" ] && [ -e "$STATE/$MARKER" ] ||
		die "no test env in $STATE (run: $0 up)"
}

kafka_ports() {
	KPORT="$(sed -n 's|^listeners=PLAINTEXT://127\.0\.0\.1:\([0-9]*\),.*|\1|p' "$STATE/server.properties")"
	CPORT="$(sed -n 's|^listeners=.*CONTROLLER://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$STATE/server.properties")"
	[ -n "$KPORT" ] && [ -n "$CPORT" ] || die "no listener ports in $STATE/server.properties"
}

redis_port() {
	RPORT="$(sed -n 's|^export LANEWAY_TEST_REDIS_URL=redis://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$STATE/env")"
	[ -n "$RPORT" ] || die "no redis port in $STATE/env"
}

# kill_now NAME PID: KILL and wait until it is gone.
kill_now() {
	local name="$1" pid="$2" i
	kill -KILL "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		alive "$pid" || return 0
		sleep 0.1
	done
	log "WARNING: $name (pid $pid) still alive after KILL"
}

cmd_kafka_stop() {
	local mode="${1:-}" pid
	need_env
	pid="$(ours "$STATE/kafka.pid" "kafka.Kafka $STATE/server.properties")" || die "kafka is not running in $STATE"
	case "$mode" in
	--kill) kill_now kafka "$pid" ;;
	"") stop_pid kafka "$pid" 60 ;;
	*) die "kafka-stop: unknown option $mode (only --kill)" ;;
	esac
	rm -f "$STATE/kafka.pid"
	log "kafka stopped (pid $pid${mode:+, $mode})"
}

cmd_kafka_start() {
	local t0 pid i
	t0="$(now_ms)"
	need_env
	if pid="$(ours "$STATE/kafka.pid" "kafka.Kafka $STATE/server.properties")"; then
		die "kafka is already running (pid $pid)"
	fi
	kafka_ports
	# A broker just stopped may leave its ports in TIME_WAIT for a moment;
	# Kafka binds with SO_REUSEADDR, so only a listening socket is in the way.
	for ((i = 0; i < 50; i++)); do
		port_in_use "$KPORT" || port_in_use "$CPORT" || break
		sleep 0.1
	done
	if port_in_use "$KPORT" || port_in_use "$CPORT"; then
		die "kafka port $KPORT or $CPORT is in use: cannot restart the broker on its ports"
	fi
	# The same JVM settings as `up`.
	local java=(java -Xmx512m -Xms128m -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
		"-Dlog4j2.configurationFile=file:$LOG4J_CONF" -cp "$LIBS/*")
	start_bg kafka "$STATE/kafka.pid" "$STATE/kafka.log" "${java[@]}" kafka.Kafka "$STATE/server.properties"
	pid="$(cat "$STATE/kafka.pid")"
	local deadline=$(($(date +%s) + READY_TIMEOUT))
	until port_in_use "$KPORT"; do
		if ! alive "$pid"; then
			tail -n 40 "$STATE/kafka.log" >&2 || true
			die "kafka exited while restarting"
		fi
		[ "$(date +%s)" -lt "$deadline" ] || die "kafka port $KPORT not open after ${READY_TIMEOUT}s"
		sleep 0.1
	done
	local left=$((deadline - $(date +%s)))
	[ "$left" -gt 5 ] || left=5
	if [ ! -x "$STATE/kafkaready" ]; then
		(cd "$ROOT" && go build -o "$STATE/kafkaready" ./scripts/kafkaready) || die "could not build scripts/kafkaready"
	fi
	"$STATE/kafkaready" -brokers "127.0.0.1:$KPORT" -timeout "${left}s" -group -txn -q ||
		{ tail -n 40 "$STATE/kafka.log" >&2 || true; die "restarted kafka did not answer metadata/group/transaction requests"; }
	log "kafka restarted in $(elapsed "$t0"): pid $pid on 127.0.0.1:$KPORT"
}

cmd_redis_stop() {
	local mode="${1:-}" pid
	need_env
	pid="$(ours "$STATE/redis.pid" redis-server)" || die "redis is not running in $STATE"
	case "$mode" in
	--kill) kill_now redis "$pid" ;;
	"") stop_pid redis "$pid" 10 ;;
	*) die "redis-stop: unknown option $mode (only --kill)" ;;
	esac
	rm -f "$STATE/redis.pid"
	log "redis stopped (pid $pid${mode:+, $mode})"
}

cmd_redis_start() {
	local t0 pid i
	t0="$(now_ms)"
	need_env
	if pid="$(ours "$STATE/redis.pid" redis-server)"; then die "redis is already running (pid $pid)"; fi
	redis_port
	for ((i = 0; i < 50; i++)); do
		port_in_use "$RPORT" || break
		sleep 0.1
	done
	if port_in_use "$RPORT"; then die "redis port $RPORT is in use: cannot restart redis on its port"; fi
	start_bg redis "$STATE/redis.pid" "$STATE/redis.log" redis-server --port "$RPORT" --bind 127.0.0.1 \
		--save '' --appendonly no --daemonize no --dir "$STATE/redis" --protected-mode yes
	pid="$(cat "$STATE/redis.pid")"
	for ((i = 0; ; i++)); do
		[ "$(redis-cli -h 127.0.0.1 -p "$RPORT" ping 2>/dev/null || true)" = PONG ] && break
		if ! alive "$pid" || [ "$i" -ge 200 ]; then
			tail -n 20 "$STATE/redis.log" >&2 || true
			die "redis did not become ready on 127.0.0.1:$RPORT"
		fi
		sleep 0.1
	done
	log "redis restarted in $(elapsed "$t0"): pid $pid on 127.0.0.1:$RPORT"
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

sub="${1:-}"
[ "$#" -gt 0 ] && shift
case "$sub" in
up) cmd_up ;;
down) cmd_down ;;
env) cmd_env ;;
test) cmd_test "$@" ;;
kafka-stop) cmd_kafka_stop "$@" ;;
kafka-start) cmd_kafka_start ;;
redis-stop) cmd_redis_stop "$@" ;;
redis-start) cmd_redis_start ;;
-h | --help | help) usage ;;
*) usage ;;
esac
