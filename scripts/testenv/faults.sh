# shellcheck shell=bash
# Sourced by scripts/testenv.sh, which sets the configuration ($ROOT,
# $STATE, the ports) and dispatches the subcommands: the fault injection of the chaos harness.

# ------------------------------------------------- fault injection (chaos) --

# need_env fails unless `up` has run in $STATE.
need_env() {
	[ -f "$STATE/env" ] && [ -f "$STATE/server.properties" ] && [ -e "$STATE/$MARKER" ] ||
		die "no test env in $STATE (run: $0 up)"
}

kafka_ports() {
	KPORT="$(sed -n 's|^listeners=PLAINTEXT://127\.0\.0\.1:\([0-9]*\),.*|\1|p' "$STATE/server.properties")"
	SPORT="$(sed -n 's|^listeners=.*SASL_SSL://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$STATE/server.properties")"
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

# stop_service NAME PATTERN GRACE [--kill] stops the NAME this script
# started (pid in $STATE/NAME.pid, command line matching PATTERN): gently,
# killed after GRACE seconds, or at once with --kill.
stop_service() {
	local name="$1" pattern="$2" grace="$3" mode="${4:-}" pid
	need_env
	pid="$(ours "$STATE/$name.pid" "$pattern")" || die "$name is not running in $STATE"
	case "$mode" in
	--kill) kill_now "$name" "$pid" ;;
	"") stop_pid "$name" "$pid" "$grace" ;;
	*) die "$name-stop: unknown option $mode (only --kill)" ;;
	esac
	rm -f "$STATE/$name.pid"
	log "$name stopped (pid $pid${mode:+, $mode})"
}

cmd_kafka_stop() { stop_service kafka "kafka.Kafka $STATE/server.properties" 60 "${1:-}"; }

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
		port_in_use "$KPORT" || port_in_use "$CPORT" || { [ -n "$SPORT" ] && port_in_use "$SPORT"; } || break
		sleep 0.1
	done
	if port_in_use "$KPORT" || port_in_use "$CPORT" || { [ -n "$SPORT" ] && port_in_use "$SPORT"; }; then
		die "kafka port $KPORT, $CPORT or ${SPORT:-(no SASL_SSL)} is in use: cannot restart the broker on its ports"
	fi
	start_bg kafka "$STATE/kafka.pid" "$STATE/kafka.log" "${KAFKA_JAVA[@]}" kafka.Kafka "$STATE/server.properties"
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
		(cd "$ROOT" && go build -o "$STATE/kafkaready" ./internal/testkit/kafkaready) || die "could not build internal/testkit/kafkaready"
	fi
	"$STATE/kafkaready" -brokers "127.0.0.1:$KPORT" -timeout "${left}s" -group -txn -q ||
		{ tail -n 40 "$STATE/kafka.log" >&2 || true; die "restarted kafka did not answer metadata/group/transaction requests"; }
	log "kafka restarted in $(elapsed "$t0"): pid $pid on 127.0.0.1:$KPORT"
}

cmd_redis_stop() { stop_service redis redis-server 10 "${1:-}"; }

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
