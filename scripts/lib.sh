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
