#!/usr/bin/env bash
# Runs a command (make test's go test) with the two local Redis setups the failover tests kill
# masters on (ensure-redis-failover.sh: a Cluster with replicas, a master + replica + Sentinels),
# and leaves them as it found them, like with-redis-cluster.sh does the Cluster:
#   - SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS and SURGE_TEST_REDIS_SENTINEL_ADDRS both set: those
#     are used; nothing is started or stopped.
#   - else ensure-redis-failover.sh makes sure both run and exports their variables
#     (SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS, SURGE_TEST_REDIS_SENTINEL_ADDRS,
#     SURGE_TEST_REDIS_SENTINEL_MASTER) to the command; when the command ends (passed, failed or
#     interrupted), the last run to end stops what the runs started (stop-redis-cluster.sh,
#     stop-redis-sentinel.sh, on those ports only); what ran before is left running. A node a
#     test killed and started again on a port this run started is stopped with the others.
# Exits with the command's status.
#
#   bash scripts/with-redis-failover.sh go test ./internal/faults
set -euo pipefail
SURGE_SCRIPT=with-redis-failover.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here=$(dirname "${BASH_SOURCE[0]}")
[ "$#" -gt 0 ] || die "usage: with-redis-failover.sh COMMAND [ARG...]"

if [ -n "${SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS:-}" ] && [ -n "${SURGE_TEST_REDIS_SENTINEL_ADDRS:-}" ]; then
	echo "redis failover setups: using SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS=$SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS SURGE_TEST_REDIS_SENTINEL_ADDRS=$SURGE_TEST_REDIS_SENTINEL_ADDRS"
	exec "$@"
fi

sentinel_settings
sentinel_dir=$dir

# The note of a run: its started ports, the Cluster's as c<port>, the Sentinel setup's as s<port>.
ensure() {
	local line
	line=$(bash "$here/ensure-redis-failover.sh" 8>&-)
	echo "$line"
	SURGE_REPLICA_CLUSTER_STARTED= SURGE_SENTINEL_STARTED=
	eval "$line"
	export SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS SURGE_TEST_REDIS_SENTINEL_ADDRS SURGE_TEST_REDIS_SENTINEL_MASTER
	local p notes=()
	for p in $SURGE_REPLICA_CLUSTER_STARTED; do notes+=("c$p"); done
	for p in $SURGE_SENTINEL_STARTED; do notes+=("s$p"); done
	started=${notes[*]}
}

stop() {
	local words cluster=() data=() sentinels=() w
	words=$(port_union "$@" | tr ' ' '\n' | sed -n 's/^\([cs]\)\([0-9]*\)$/\1 \2/p')
	while read -r kind port; do
		if [ "$kind" = c ]; then
			cluster+=("$port")
		elif [[ " ${sentinel_ports[*]} " == *" $port "* ]]; then
			sentinels+=("$port")
		else
			data+=("$port")
		fi
	done <<<"$words"
	if [ "${#cluster[@]}" -gt 0 ]; then
		SURGE_REPLICA_CLUSTER_PORTS="${cluster[*]}" replica_cluster_env bash "$here/stop-redis-cluster.sh" 8>&-
	fi
	if [ "${#data[@]}" -gt 0 ] || [ "${#sentinels[@]}" -gt 0 ]; then
		# An empty list must stop nothing: a port no process has stands in for it.
		SURGE_SENTINEL_DATA_PORTS="${data[*]:-}" SURGE_SENTINEL_PORTS="${sentinels[*]:-}" \
			bash "$here/stop-redis-sentinel.sh" 8>&-
	fi
}

leased_run "$sentinel_dir/.users.lock" "$sentinel_dir/.users-failover" "redis failover setups" ensure stop "$@"
