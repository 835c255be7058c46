# shellcheck shell=bash
# Helpers shared by scripts/ensure-*.sh and scripts/stop-redis-cluster.sh.
# Sourced, never executed. Callers run with `set -euo pipefail`.

SURGE_SCRIPT=${SURGE_SCRIPT:-$(basename "$0")}

die() {
	printf '%s: error: %s\n' "$SURGE_SCRIPT" "$*" >&2
	exit 1
}

# can_root: true if we are root or have passwordless sudo.
can_root() {
	[ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; }
}

# as_root CMD...: run CMD as root (directly, or through passwordless sudo).
# Check can_root first: this function does not report the failure itself.
as_root() {
	if [ "$(id -u)" -eq 0 ]; then
		"$@"
	else
		sudo -n "$@"
	fi
}

# run_logged LOG CMD...: run CMD with its output appended to LOG; on failure
# print the tail of LOG and die.
run_logged() {
	local log=$1
	shift
	if ! "$@" >>"$log" 2>&1; then
		echo "--- last lines of $log ---" >&2
		tail -n 25 "$log" >&2 || true
		die "failed: $* (full log: $log)"
	fi
}

# apt_install PKG...: apt-get update + install, quietly.
apt_install() {
	command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install these packages by hand: $*"
	can_root || die "installing $* needs root or passwordless sudo"
	local log=/tmp/surge-apt-install.log
	: >"$log"
	run_logged "$log" as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get -o DPkg::Lock::Timeout=120 -q update
	run_logged "$log" as_root env DEBIAN_FRONTEND=noninteractive \
		apt-get -o DPkg::Lock::Timeout=120 -q -y --no-install-recommends install "$@"
}

# wait_until SECONDS CMD...: poll CMD every 0.2 s until it succeeds.
# Returns 1 if it still fails after SECONDS.
wait_until() {
	local deadline=$(($(date +%s) + $1))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$deadline" ] || return 1
		sleep 0.2
	done
}

# check_uint NAME VALUE: die unless VALUE is a positive integer.
check_uint() {
	case $2 in
	'' | *[!0-9]* | 0) die "$1 must be a positive integer, got '$2'" ;;
	esac
}

# redis_reply PORT CMD...: the reply of a local Redis (CRs stripped), or
# nothing if no server answers within 3 s.
redis_reply() {
	local port=$1
	shift
	timeout 3 redis-cli -h 127.0.0.1 -p "$port" "$@" 2>/dev/null | tr -d '\r' || true
}

redis_pong() {
	[ "$(redis_reply "$1" ping)" = PONG ]
}

# shell_quote VALUE: VALUE in single quotes, safe for `eval`.
shell_quote() {
	printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# npm_has DIR PKG VERSION: true if DIR/node_modules holds PKG at exactly VERSION.
npm_has() {
	[ -f "$1/node_modules/$2/package.json" ] &&
		node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
			"$1/node_modules/$2/package.json" "$3"
}

# npm_ensure DIR PKG@VERSION...: install the exact versions into DIR (a cache directory, never
# the repository) unless all are there already. Needs node and npm; the npm registry must be
# reachable for the first run.
npm_ensure() {
	local dir=$1 spec missing=
	shift
	command -v node >/dev/null 2>&1 || die "node not found: install Node.js 20 or newer (scripts/ensure-tools.sh says how)"
	command -v npm >/dev/null 2>&1 || die "npm not found: install npm (apt-get install npm)"
	for spec in "$@"; do
		npm_has "$dir" "${spec%@*}" "${spec##*@}" || missing=1
	done
	[ -z "$missing" ] && return 0
	mkdir -p "$dir"
	local log="$dir/npm-install.log"
	: >"$log"
	[ -f "$dir/package.json" ] || printf '{"private":true}\n' >"$dir/package.json"
	run_logged "$log" npm install --prefix "$dir" --no-audit --no-fund --silent "$@"
	for spec in "$@"; do
		npm_has "$dir" "${spec%@*}" "${spec##*@}" ||
			die "${spec%@*} ${spec##*@} still missing in $dir after npm install (log: $log)"
	done
}

# cluster_settings: the local Redis Cluster's base directory ($dir) and ports ($ports, an
# array), from SURGE_CLUSTER_DIR and SURGE_CLUSTER_PORTS or their defaults; ensure, stop and
# with-redis-cluster.sh share them.
cluster_settings() {
	dir=${SURGE_CLUSTER_DIR:-/tmp/surge-cluster}
	read -r -a ports <<<"${SURGE_CLUSTER_PORTS:-7101 7102 7103}"
}

# replica_cluster_env CMD...: runs CMD (ensure- or stop-redis-cluster.sh) on the local Redis
# Cluster with replicas the failover tests use: 3 masters with a replica each, from
# SURGE_REPLICA_CLUSTER_DIR (default /tmp/surge-cluster-replicas), SURGE_REPLICA_CLUSTER_PORTS
# (default 7111-7116) and SURGE_REPLICA_CLUSTER_NODE_TIMEOUT (default 1000 ms: a dead master's
# replica takes over within about 2-3 s). It gets 20 s to settle after a node comes back.
replica_cluster_env() {
	SURGE_CLUSTER_DIR=${SURGE_REPLICA_CLUSTER_DIR:-/tmp/surge-cluster-replicas} \
		SURGE_CLUSTER_PORTS=${SURGE_REPLICA_CLUSTER_PORTS:-7111 7112 7113 7114 7115 7116} \
		SURGE_CLUSTER_REPLICAS=1 \
		SURGE_CLUSTER_NODE_TIMEOUT=${SURGE_REPLICA_CLUSTER_NODE_TIMEOUT:-1000} \
		SURGE_CLUSTER_SETTLE=${SURGE_CLUSTER_SETTLE:-20} \
		"$@"
}

# sentinel_settings: the local master + replicas + Sentinels of ensure/stop-redis-sentinel.sh:
# their base directory ($dir), the Redis data nodes' ports ($data_ports: the first is the
# master of a new setup), the Sentinels' ports ($sentinel_ports) and the master's name
# ($master_name), from SURGE_SENTINEL_DIR, SURGE_SENTINEL_DATA_PORTS, SURGE_SENTINEL_PORTS and
# SURGE_SENTINEL_MASTER or their defaults. A port list set empty stays empty (stop nothing of it).
sentinel_settings() {
	dir=${SURGE_SENTINEL_DIR:-/tmp/surge-sentinel}
	read -r -a data_ports <<<"${SURGE_SENTINEL_DATA_PORTS-7121 7122}"
	read -r -a sentinel_ports <<<"${SURGE_SENTINEL_PORTS-26391 26392 26393}"
	master_name=${SURGE_SENTINEL_MASTER:-surge}
}

# pid_in DIR PORT: the pid in DIR/redis.pid if that process is still the redis-server of PORT on
# loopback (its title reads "redis-server 127.0.0.1:PORT ..."; a Sentinel's too).
pid_in() {
	local f="$1/redis.pid" pid title
	[ -f "$f" ] || return 1
	pid=$(cat "$f")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = redis-server ] || return 1
	title=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
	[[ "$title " == *" 127.0.0.1:$2 "* ]] || return 1
	echo "$pid"
}

# leased_run LOCK USERS NAME ENSURE STOP CMD...: runs CMD (make test's go test) on local
# services that runs at once share, and leaves the machine's services as it found them. Each run
# holds a lease, a file USERS/<its pid>. Under LOCK (a lock of its own, not the ensure/stop
# scripts'), ENSURE (a function) makes sure the services run, exports what CMD needs and sets
# $started to a note of what it started (empty: nothing), kept in USERS/started. When CMD ends
# (passed, failed or interrupted), the last run to leave calls STOP (a function) with every
# run's notes as its arguments; services that ran before any run (no note) are left running, and
# none is stopped while another run still uses it. NAME starts the messages. Exits with CMD's
# status.
leased_run() {
	local lock=$1 users=$2 name=$3 ensure=$4 stop=$5
	shift 5
	mkdir -p "$users"
	exec 8>"$lock"
	flock -w 600 8 || die "another run holds $lock"
	started=
	"$ensure"
	[ -z "$started" ] || echo "$started" >>"$users/started"
	: >"$users/$$"
	flock -u 8
	# shellcheck disable=SC2064 # the values are fixed now
	trap "lease_leave $(shell_quote "$lock") $(shell_quote "$users") $(shell_quote "$name") $(shell_quote "$stop")" EXIT
	local rc=0
	"$@" 8>&- || rc=$?
	exit "$rc"
}

# lease_leave LOCK USERS NAME STOP: leased_run's end of a run.
lease_leave() {
	local lock=$1 users=$2 name=$3 stop=$4 f others=0 notes=()
	flock -w 600 8 || die "another run holds $lock"
	rm -f "$users/$$"
	for f in "$users"/[0-9]*; do
		[ -e "$f" ] || continue
		if kill -0 "${f##*/}" 2>/dev/null; then
			others=$((others + 1))
		else
			rm -f "$f" # a run that ended without leaving (killed)
		fi
	done
	if [ "$others" -gt 0 ]; then
		echo "$name: left running ($others other run(s) use it)"
	elif [ -s "$users/started" ]; then
		mapfile -t notes <"$users/started"
		rm -f "$users/started"
		"$stop" "${notes[@]}"
	else
		echo "$name: left running (it was running before this run)"
	fi
	flock -u 8
}

# port_union NOTE...: the distinct words (ports) of the notes, sorted, space-separated.
port_union() {
	printf '%s\n' "$@" | tr -s ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ' | sed 's/ $//'
}
