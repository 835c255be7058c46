#!/usr/bin/env bash
# Make sure a local Redis master with a replica, watched by three Sentinels, runs (default: data
# nodes 7121 and 7122, Sentinels 26391-26393, master name "surge"): every Sentinel names the same
# master and knows the other Sentinels and the replicas, the master has its replicas connected,
# and each replica's link is up.
#
# Each process lives in $SURGE_SENTINEL_DIR/<port> (redis.log, redis.pid; a Sentinel's
# sentinel.conf, which it rewrites); no persistence. Only what does not answer is started:
#   - a data node as a replica of the current master (what the Sentinels name, else the data
#     node that says it is master, else the first port for a new setup), so a master killed
#     and started again comes back as a replica of the one promoted in its place;
#   - a Sentinel with a fresh configuration monitoring the current master, quorum 2,
#     down-after-milliseconds SURGE_SENTINEL_DOWN_AFTER (1000), failover-timeout 3000 (a
#     failover that aborts is tried again 6 s later): a dead master's replica is promoted
#     within about 1.5-3 s.
# A port that answers as something else (a Cluster node, another directory's Redis or Sentinel)
# is refused, never touched. Idempotent; concurrent runs are serialised with flock.
# On success prints one line, usable with eval:
#   SURGE_TEST_REDIS_SENTINEL_ADDRS='127.0.0.1:26391,127.0.0.1:26392,127.0.0.1:26393' SURGE_TEST_REDIS_SENTINEL_MASTER='surge' SURGE_SENTINEL_STARTED='7121 7122 26391 26392 26393' # ...
# SURGE_SENTINEL_STARTED lists the ports this run started (empty when all ran already), so that
# a caller stops only those (scripts/with-redis-failover.sh does).
#
# Environment:
#   SURGE_SENTINEL_DIR         base directory                        (default /tmp/surge-sentinel)
#   SURGE_SENTINEL_DATA_PORTS  Redis data nodes, at least 2          (default "7121 7122")
#   SURGE_SENTINEL_PORTS       Sentinels, at least 3                 (default "26391 26392 26393")
#   SURGE_SENTINEL_MASTER      the master's name in Sentinel         (default surge)
#   SURGE_SENTINEL_DOWN_AFTER  down-after-milliseconds of new Sentinels (default 1000)
#   SURGE_SENTINEL_WAIT        seconds to wait for all of it          (default 30)
# Stop and clean up with scripts/stop-redis-sentinel.sh.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sentinel_settings
wait_s=${SURGE_SENTINEL_WAIT:-30}
down_after=${SURGE_SENTINEL_DOWN_AFTER:-1000}
check_uint SURGE_SENTINEL_WAIT "$wait_s"
check_uint SURGE_SENTINEL_DOWN_AFTER "$down_after"
[ "${#data_ports[@]}" -ge 2 ] || die "SURGE_SENTINEL_DATA_PORTS needs a master and at least one replica, got '${data_ports[*]}'"
[ "${#sentinel_ports[@]}" -ge 3 ] || die "SURGE_SENTINEL_PORTS needs at least 3 Sentinels (a quorum of 2 that survives one), got '${sentinel_ports[*]}'"
for port in "${data_ports[@]}" "${sentinel_ports[@]}"; do check_uint "SURGE_SENTINEL_*PORTS entry" "$port"; done
[[ $master_name =~ ^[A-Za-z0-9._-]+$ ]] || die "SURGE_SENTINEL_MASTER must be letters, digits, '.', '_' or '-', got '$master_name'"

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	apt_install redis-server redis-tools
fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock -w 120 9 || die "another ensure/stop-redis-sentinel run holds $dir/.lock"

field() { sed -n "s/^$1://p"; }

# ours PORT KIND: the process answering on PORT is this setup's KIND (data or sentinel): a
# standalone Redis working in $dir/PORT, or a Sentinel whose configuration file is there.
ours() {
	local info
	info=$(redis_reply "$1" info server)
	case $2 in
	data)
		[ "$(field redis_mode <<<"$info")" = standalone ] &&
			[ "$(redis_reply "$1" config get dir | sed -n 2p)" = "$dir/$1" ]
		;;
	sentinel)
		[ "$(field redis_mode <<<"$info")" = sentinel ] &&
			[ "$(field config_file <<<"$info")" = "$dir/$1/sentinel.conf" ]
		;;
	esac
}

# Check every port before starting anything: refuse what is not ours.
missing_data=() missing_sentinels=()
for port in "${data_ports[@]}"; do
	if ! redis_pong "$port"; then
		missing_data+=("$port")
	elif ! ours "$port" data; then
		die "127.0.0.1:$port answers but is not this setup's Redis (not standalone, or not working in $dir/$port); stop it or set SURGE_SENTINEL_DATA_PORTS"
	fi
done
for port in "${sentinel_ports[@]}"; do
	if ! redis_pong "$port"; then
		missing_sentinels+=("$port")
	elif ! ours "$port" sentinel; then
		die "127.0.0.1:$port answers but is not this setup's Sentinel (config file not $dir/$port/sentinel.conf); stop it or set SURGE_SENTINEL_PORTS"
	fi
done

# named_master: the data port the running Sentinels name as master (most of them), if any.
named_master() {
	local port
	for port in "${sentinel_ports[@]}"; do
		redis_reply "$port" sentinel get-master-addr-by-name "$master_name" | sed -n 2p
	done | { grep -xE "$(IFS='|'; echo "${data_ports[*]}")" || true; } | sort | uniq -c | sort -rn | awk 'NR==1 {print $2}'
}

# The current master: the running data node that says it is master (the one the Sentinels name,
# if several do), else the one the Sentinels name, else the first port for a new setup. A master
# that was killed is still named for a moment after its replica was promoted.
named=$(named_master)
master=
for port in "${data_ports[@]}"; do
	if [ "$(redis_reply "$port" info replication | field role)" = master ]; then
		[ -n "$master" ] && [ "$port" != "$named" ] || master=$port
	fi
done
master=${master:-${named:-${data_ports[0]}}}

# start_data PORT: a data node, a replica of $master unless it is $master. `9>&-`: daemons must
# not inherit (and keep) the lock.
start_data() {
	local port=$1 d="$dir/$1" role=()
	mkdir -p "$d"
	[ ! -s "$d/redis.log" ] || mv -f "$d/redis.log" "$d/redis.log.old"
	[ "$port" = "$master" ] || role=(--replicaof 127.0.0.1 "$master")
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--repl-diskless-sync-delay 0 "${role[@]}" --daemonize yes \
		--dir "$d" --logfile "$d/redis.log" --pidfile "$d/redis.pid" >/dev/null 2>&1 9>&- ||
		die "redis-server failed to daemonize on port $port (log: $d/redis.log)"
}

# start_sentinel PORT: a Sentinel with a fresh configuration (it finds the replicas and the
# other Sentinels through the master).
start_sentinel() {
	local port=$1 d="$dir/$1"
	mkdir -p "$d"
	[ ! -s "$d/redis.log" ] || mv -f "$d/redis.log" "$d/redis.log.old"
	cat >"$d/sentinel.conf" <<CONF
port $port
bind 127.0.0.1
daemonize yes
dir $d
logfile $d/redis.log
pidfile $d/redis.pid
sentinel monitor $master_name 127.0.0.1 $master 2
sentinel down-after-milliseconds $master_name $down_after
sentinel failover-timeout $master_name 3000
sentinel parallel-syncs $master_name 1
CONF
	redis-server "$d/sentinel.conf" --sentinel >/dev/null 2>&1 9>&- ||
		die "redis-server --sentinel failed to daemonize on port $port (log: $d/redis.log)"
}

started=()
# The master first, so that the replicas started with it find it.
for port in "${missing_data[@]}"; do
	[ "$port" = "$master" ] || continue
	start_data "$port"
	started+=("$port")
done
for port in "${missing_data[@]}"; do
	[ "$port" != "$master" ] || continue
	start_data "$port"
	started+=("$port")
done
for port in "${missing_sentinels[@]}"; do
	start_sentinel "$port"
	started+=("$port")
done

# healthy: every Sentinel names the same master (set in $master; it may move while this
# waits), sees it up with the other Sentinels and the replicas, the master has every replica
# connected, and each replica's link to it is up.
healthy() {
	local port m replicas=$((${#data_ports[@]} - 1)) others=$((${#sentinel_ports[@]} - 1))
	master=$(named_master)
	[ -n "$master" ] || return 1
	for port in "${sentinel_ports[@]}"; do
		[ "$(redis_reply "$port" sentinel get-master-addr-by-name "$master_name" | sed -n 2p)" = "$master" ] || return 1
		m=$(redis_reply "$port" sentinel master "$master_name" | paste - -)
		[ "$(awk '$1 == "flags" {print $2}' <<<"$m")" = master ] || return 1
		[ "$(awk '$1 == "num-other-sentinels" {print $2}' <<<"$m")" = "$others" ] || return 1
		[ "$(awk '$1 == "num-slaves" {print $2}' <<<"$m")" -ge "$replicas" ] || return 1
	done
	[ "$(redis_reply "$master" info replication | field connected_slaves)" = "$replicas" ] || return 1
	for port in "${data_ports[@]}"; do
		[ "$port" != "$master" ] || continue
		m=$(redis_reply "$port" info replication)
		[ "$(field master_port <<<"$m")" = "$master" ] && [ "$(field master_link_status <<<"$m")" = up ] || return 1
	done
}

if ! wait_until "$wait_s" healthy; then
	for port in "${data_ports[@]}" "${sentinel_ports[@]}"; do
		echo "--- 127.0.0.1:$port: last lines of $dir/$port/redis.log ---" >&2
		tail -n 8 "$dir/$port/redis.log" >&2 2>/dev/null || true
	done
	die "master $master_name on 127.0.0.1:$master, its replicas and Sentinels not all up and agreed within ${wait_s}s (a setup left half-changed: scripts/stop-redis-sentinel.sh, then run this again)"
fi

action="already running"
[ "${#started[@]}" -eq 0 ] || action="started ${started[*]}"
addrs=$(printf '127.0.0.1:%s,' "${sentinel_ports[@]}")
echo "SURGE_TEST_REDIS_SENTINEL_ADDRS=$(shell_quote "${addrs%,}") SURGE_TEST_REDIS_SENTINEL_MASTER=$(shell_quote "$master_name") SURGE_SENTINEL_STARTED=$(shell_quote "${started[*]}") # redis sentinel ok, master $master_name on 127.0.0.1:$master, $action"
