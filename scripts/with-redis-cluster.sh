#!/usr/bin/env bash
# Runs a command (make test's go test) with a local Redis Cluster, and leaves the machine's
# clusters as it found them:
#   - SURGE_TEST_REDIS_CLUSTER_ADDRS set: that cluster is used; nothing is started or stopped.
#   - else ensure-redis-cluster.sh makes sure one runs on SURGE_CLUSTER_PORTS (default
#     7101-7103) and its SURGE_TEST_REDIS_CLUSTER_ADDRS is exported to the command, so the
#     tests use those ports; when the command ends (passed, failed or interrupted), the nodes
#     this run started are stopped (stop-redis-cluster.sh) and a cluster that was already
#     running, which other programs may be using, is left running.
# Exits with the command's status.
#
#   bash scripts/with-redis-cluster.sh go test ./...
set -euo pipefail
SURGE_SCRIPT=with-redis-cluster.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ "$#" -gt 0 ] || die "usage: with-redis-cluster.sh COMMAND [ARG...]"

if [ -n "${SURGE_TEST_REDIS_CLUSTER_ADDRS:-}" ]; then
	echo "redis cluster: using SURGE_TEST_REDIS_CLUSTER_ADDRS=$SURGE_TEST_REDIS_CLUSTER_ADDRS"
	exec "$@"
fi

line=$(bash "$(dirname "${BASH_SOURCE[0]}")/ensure-redis-cluster.sh")
echo "$line"
SURGE_CLUSTER_STARTED=
eval "$line"
export SURGE_TEST_REDIS_CLUSTER_ADDRS

stop_started() {
	if [ -n "$SURGE_CLUSTER_STARTED" ]; then
		SURGE_CLUSTER_PORTS=$SURGE_CLUSTER_STARTED bash "$(dirname "${BASH_SOURCE[0]}")/stop-redis-cluster.sh"
	else
		echo "redis cluster: left running (it was running before this run)"
	fi
}
trap stop_started EXIT
rc=0
"$@" || rc=$?
exit "$rc"
