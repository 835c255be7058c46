#!/usr/bin/env bash
# Stop the two setups of ensure-redis-failover.sh (the Cluster with replicas, through
# stop-redis-cluster.sh; the Sentinel setup, through stop-redis-sentinel.sh) and remove their
# directories. Same environment as ensure-redis-failover.sh. Prints one line per setup.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
here=$(dirname "${BASH_SOURCE[0]}")
replica_cluster_env bash "$here/stop-redis-cluster.sh"
bash "$here/stop-redis-sentinel.sh"
