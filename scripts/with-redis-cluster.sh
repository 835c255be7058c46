#!/usr/bin/env bash
# Runs a command (make test's go test) with a local Redis Cluster, and leaves the machine's
# clusters as it found them:
#   - SURGE_TEST_REDIS_CLUSTER_ADDRS set: that cluster is used; nothing is started or stopped.
#   - else ensure-redis-cluster.sh makes sure one runs on SURGE_CLUSTER_PORTS (default
#     7101-7103) and its SURGE_TEST_REDIS_CLUSTER_ADDRS is exported to the command, so the
#     tests use those ports; when the command ends (passed, failed or interrupted), the nodes
#     this run started are stopped (stop-redis-cluster.sh) and a cluster that was already
#     running, which other programs may be using, is left running. Runs at once share the
#     cluster: the nodes any of them started are stopped when the last of them ends (a lease
#     per run under $SURGE_CLUSTER_DIR/.users-<ports>: leased_run in lib.sh).
# Exits with the command's status.
#
#   bash scripts/with-redis-cluster.sh go test ./...
set -euo pipefail
SURGE_SCRIPT=with-redis-cluster.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here=$(dirname "${BASH_SOURCE[0]}")
[ "$#" -gt 0 ] || die "usage: with-redis-cluster.sh COMMAND [ARG...]"

if [ -n "${SURGE_TEST_REDIS_CLUSTER_ADDRS:-}" ]; then
	echo "redis cluster: using SURGE_TEST_REDIS_CLUSTER_ADDRS=$SURGE_TEST_REDIS_CLUSTER_ADDRS"
	exec "$@"
fi

cluster_settings

ensure() {
	local line
	line=$(bash "$here/ensure-redis-cluster.sh" 8>&-)
	echo "$line"
	SURGE_CLUSTER_STARTED=
	eval "$line"
	export SURGE_TEST_REDIS_CLUSTER_ADDRS
	started=$SURGE_CLUSTER_STARTED
}

stop() {
	SURGE_CLUSTER_PORTS=$(port_union "$@") bash "$here/stop-redis-cluster.sh" 8>&-
}

leased_run "$dir/.users.lock" "$dir/.users-$(IFS=-; echo "${ports[*]}")" "redis cluster" ensure stop "$@"
