#!/usr/bin/env bash
# Make sure the two local Redis setups the failover tests kill masters on run and are healthy:
#   - a Redis Cluster of 3 masters with a replica each (ports 7111-7116, cluster-node-timeout
#     1000 ms), through ensure-redis-cluster.sh (see replica_cluster_env in lib.sh);
#   - a master, a replica and three Sentinels (7121-7122, 26391-26393, master "surge"), through
#     ensure-redis-sentinel.sh.
# Only what does not run is started; a node that a test killed comes back as a replica of the
# one promoted in its place. On success prints one line, usable with eval:
#   SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS='127.0.0.1:7111,...' SURGE_REPLICA_CLUSTER_STARTED='...' SURGE_TEST_REDIS_SENTINEL_ADDRS='127.0.0.1:26391,...' SURGE_TEST_REDIS_SENTINEL_MASTER='surge' SURGE_SENTINEL_STARTED='...'
# The *_STARTED lists name the ports this run started (empty when all ran already).
#
# Environment: SURGE_REPLICA_CLUSTER_DIR, SURGE_REPLICA_CLUSTER_PORTS,
# SURGE_REPLICA_CLUSTER_NODE_TIMEOUT (lib.sh), and those of ensure-redis-sentinel.sh.
# Stop both with scripts/stop-redis-failover.sh.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here=$(dirname "${BASH_SOURCE[0]}")

line=$(replica_cluster_env bash "$here/ensure-redis-cluster.sh")
SURGE_TEST_REDIS_CLUSTER_ADDRS= SURGE_CLUSTER_STARTED=
eval "$line"
cluster="SURGE_TEST_REDIS_REPLICA_CLUSTER_ADDRS=$(shell_quote "$SURGE_TEST_REDIS_CLUSTER_ADDRS") SURGE_REPLICA_CLUSTER_STARTED=$(shell_quote "$SURGE_CLUSTER_STARTED")"
line=$(bash "$here/ensure-redis-sentinel.sh")
echo "$cluster ${line%% \# *} # redis cluster with replicas and redis sentinel ok"
