#!/usr/bin/env bash
# Make sure a local Redis Cluster (default: 3 masters, no replicas, ports 7101-7103)
# runs and reports cluster_state:ok on every node, and, with SURGE_CLUSTER_REPLICAS,
# that every master has its replicas with their replication link up.
#
# Each node lives in $SURGE_CLUSTER_DIR/<port> (nodes-<port>.conf, redis.log,
# redis.pid); no persistence. Nodes that do not answer are started; the cluster
# is created only if it is not formed yet. A stale or half-formed cluster (slots
# unassigned, nodes not knowing each other, a node that lost its config) is
# wiped (FLUSHALL + CLUSTER RESET HARD on each node) and created again.
# Idempotent; concurrent runs are serialised with flock.
# On success prints one line, usable with eval:
#   SURGE_TEST_REDIS_CLUSTER_ADDRS='127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103' SURGE_CLUSTER_STARTED='7101 7102 7103' # ...
# SURGE_CLUSTER_STARTED lists the nodes this run started (empty when the cluster was already
# running), so that a caller stops only those (scripts/with-redis-cluster.sh does).
#
# Environment:
#   SURGE_CLUSTER_DIR     base directory of the nodes                (default /tmp/surge-cluster)
#   SURGE_CLUSTER_PORTS   space-separated ports, at least 3 masters  (default "7101 7102 7103")
#   SURGE_CLUSTER_REPLICAS  replicas per master: the ports are masters  (default 0)
#                         x (1 + replicas); redis-cli picks the roles
#   SURGE_CLUSTER_NODE_TIMEOUT  cluster-node-timeout of new nodes, ms:
#                         how long a master may not answer before its
#                         replica takes over                         (default 15000)
#   SURGE_CLUSTER_APPENDONLY  yes: new nodes keep an AOF (appendfsync always), so a
#                         node killed and started again comes back with its data (default no)
#   SURGE_CLUSTER_WAIT    seconds to wait for nodes / cluster_state  (default 30)
#   SURGE_CLUSTER_SETTLE  seconds a formed but not-ok cluster gets to
#                         recover before it is reset                 (default 5)
# Stop and clean up with scripts/stop-redis-cluster.sh.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cluster_settings
wait_s=${SURGE_CLUSTER_WAIT:-30}
settle_s=${SURGE_CLUSTER_SETTLE:-5}
check_uint SURGE_CLUSTER_WAIT "$wait_s"
check_uint SURGE_CLUSTER_SETTLE "$settle_s"
replicas=${SURGE_CLUSTER_REPLICAS:-0}
node_timeout=${SURGE_CLUSTER_NODE_TIMEOUT:-15000}
case $replicas in '' | *[!0-9]*) die "SURGE_CLUSTER_REPLICAS must be 0 or a positive integer, got '$replicas'" ;; esac
check_uint SURGE_CLUSTER_NODE_TIMEOUT "$node_timeout"
appendonly=${SURGE_CLUSTER_APPENDONLY:-no}
case $appendonly in yes | no) ;; *) die "SURGE_CLUSTER_APPENDONLY must be yes or no, got '$appendonly'" ;; esac
n=${#ports[@]}
masters=$((n / (replicas + 1)))
[ $((masters * (replicas + 1))) -eq "$n" ] && [ "$masters" -ge 3 ] ||
	die "SURGE_CLUSTER_PORTS needs at least 3 masters with $replicas replica(s) each (a multiple of $((replicas + 1)) ports, redis-cli --cluster create), got '${ports[*]}'"
for port in "${ports[@]}"; do check_uint "SURGE_CLUSTER_PORTS entry" "$port"; done

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	apt_install redis-server redis-tools
fi

mkdir -p "$dir"
exec 9>"$dir/.lock"
flock -w 120 9 || die "another ensure/stop-redis-cluster run holds $dir/.lock"

# start_node PORT. `9>&-`: the daemon must not inherit (and keep) the lock. A node that was
# a master and comes back after its replica took over rejoins as that replica's replica (its
# nodes-PORT.conf); a replica resyncs at once (no diskless-sync delay). With replicas, a replica
# takes over however long its link was down (validity factor 0): a lagging replica promoted is
# a case the tests make on purpose.
start_node() {
	local port=$1 d="$dir/$1"
	mkdir -p "$d"
	[ ! -s "$d/redis.log" ] || mv -f "$d/redis.log" "$d/redis.log.old"
	local extra=()
	[ "$replicas" -eq 0 ] || extra=(--cluster-replica-validity-factor 0)
	redis-server --port "$port" --bind 127.0.0.1 \
		--cluster-enabled yes --cluster-config-file "nodes-$port.conf" \
		--cluster-node-timeout "$node_timeout" --repl-diskless-sync-delay 0 "${extra[@]}" \
		--save '' --appendonly "$appendonly" --appendfsync always --daemonize yes \
		--dir "$d" --logfile "$d/redis.log" --pidfile "$d/redis.pid" >/dev/null 2>&1 9>&- ||
		die "redis-server failed to daemonize on port $port (log: $d/redis.log)"
}

all_pong() {
	local port
	for port in "${ports[@]}"; do redis_pong "$port" || return 1; done
}

# info PORT FIELD: a field of CLUSTER INFO.
info() {
	redis_reply "$1" cluster info | sed -n "s/^$2://p"
}

# replication PORT FIELD: a field of INFO replication.
replication() {
	redis_reply "$1" info replication | sed -n "s/^$2://p"
}

# replicated: as many masters and replicas as asked, each replica's link up and each master
# with its replicas connected (after a failover the roles have moved; any arrangement will do).
replicated() {
	local port role m=0
	for port in "${ports[@]}"; do
		role=$(replication "$port" role)
		case $role in
		master)
			m=$((m + 1))
			[ "$(replication "$port" connected_slaves)" = "$replicas" ] || return 1
			;;
		slave) [ "$(replication "$port" master_link_status)" = up ] || return 1 ;;
		*) return 1 ;;
		esac
	done
	[ "$m" -eq "$masters" ]
}

healthy() {
	local port
	for port in "${ports[@]}"; do
		[ "$(info "$port" cluster_state)" = ok ] || return 1
		[ "$(info "$port" cluster_slots_assigned)" = 16384 ] || return 1
		[ "$(info "$port" cluster_known_nodes)" = "$n" ] || return 1
		[ "$(info "$port" cluster_size)" = "$masters" ] || return 1
	done
	[ "$replicas" -eq 0 ] || replicated
}

# formed: every node knows all nodes and all slots are assigned (it may still
# be converging, e.g. right after a node restarted with its nodes.conf).
formed() {
	local port
	for port in "${ports[@]}"; do
		[ "$(info "$port" cluster_slots_assigned)" = 16384 ] || return 1
		[ "$(info "$port" cluster_known_nodes)" = "$n" ] || return 1
	done
}

# pristine: every node is empty, knows only itself and owns no slots.
pristine() {
	local port
	for port in "${ports[@]}"; do
		[ "$(info "$port" cluster_known_nodes)" = 1 ] || return 1
		[ "$(info "$port" cluster_slots_assigned)" = 0 ] || return 1
		[ "$(redis_reply "$port" dbsize)" = 0 ] || return 1
	done
}

# Check every port before touching any: refuse foreign (non-cluster) servers.
to_start=()
for port in "${ports[@]}"; do
	reply=$(redis_reply "$port" cluster info)
	case $reply in
	'') to_start+=("$port") ;;
	*cluster_state:*) ;;
	*) die "127.0.0.1:$port answers but is not a cluster-enabled Redis (${reply//$'\n'/ }); stop it or set SURGE_CLUSTER_PORTS" ;;
	esac
done
started=()
for port in "${to_start[@]}"; do
	start_node "$port"
	started+=("$port")
done
if ! wait_until "$wait_s" all_pong; then
	for port in "${ports[@]}"; do
		redis_pong "$port" && continue
		echo "--- 127.0.0.1:$port: last lines of $dir/$port/redis.log ---" >&2
		tail -n 10 "$dir/$port/redis.log" >&2 2>/dev/null || true
	done
	die "not every node answered PING within ${wait_s}s"
fi

action="already healthy"
if ! healthy; then
	if formed && wait_until "$settle_s" healthy; then
		action="healthy after settling"
	else
		action="created"
		if ! pristine; then
			for port in "${ports[@]}"; do
				# FLUSHALL fails on a replica (read-only); RESET turns it into an
				# empty master, so flush again afterwards.
				redis_reply "$port" flushall >/dev/null
				reply=$(redis_reply "$port" cluster reset hard)
				[ "$reply" = OK ] || die "CLUSTER RESET HARD on 127.0.0.1:$port: ${reply:-no reply}"
				redis_reply "$port" flushall >/dev/null
			done
			action="reset stale cluster, created"
		fi
		log="$dir/create.log"
		: >"$log"
		nodes=()
		for port in "${ports[@]}"; do nodes+=("127.0.0.1:$port"); done
		run_logged "$log" redis-cli --cluster create "${nodes[@]}" --cluster-replicas "$replicas" --cluster-yes
		wait_until "$wait_s" healthy ||
			die "cluster created but not cluster_state:ok on all nodes within ${wait_s}s (see $log)"
	fi
fi
[ "${#started[@]}" -eq 0 ] || action="started nodes ${started[*]}, $action"

addrs=$(printf '127.0.0.1:%s,' "${ports[@]}")
shape="$masters masters"
[ "$replicas" -eq 0 ] || shape="$shape with $replicas replica(s) each"
echo "SURGE_TEST_REDIS_CLUSTER_ADDRS=$(shell_quote "${addrs%,}") SURGE_CLUSTER_STARTED=$(shell_quote "${started[*]}") # redis cluster ok, $shape, $action"
