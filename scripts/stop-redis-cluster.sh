#!/usr/bin/env bash
# Stop the local Redis Cluster started by scripts/ensure-redis-cluster.sh and
# remove its node directories ($SURGE_CLUSTER_DIR/<port>: nodes-<port>.conf,
# logs), so the next ensure run creates a fresh cluster. Data is not saved.
# Refuses to stop a Redis on those ports that is not cluster-enabled.
# Idempotent. On success prints one summary line.
#
# Environment (same as ensure-redis-cluster.sh):
#   SURGE_CLUSTER_DIR    base directory of the nodes  (default /tmp/surge-cluster)
#   SURGE_CLUSTER_PORTS  space-separated ports        (default "7101 7102 7103")
#   SURGE_CLUSTER_WAIT   seconds to wait per node     (default 30)
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cluster_settings
wait_s=${SURGE_CLUSTER_WAIT:-30}
check_uint SURGE_CLUSTER_WAIT "$wait_s"
[ "${#ports[@]}" -ge 1 ] || die "SURGE_CLUSTER_PORTS is empty"
for port in "${ports[@]}"; do check_uint "SURGE_CLUSTER_PORTS entry" "$port"; done
command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found (nothing to stop?)"

if [ -d "$dir" ]; then
	exec 9>"$dir/.lock"
	flock -w 120 9 || die "another ensure/stop-redis-cluster run holds $dir/.lock"
fi

# pid_of PORT: pid from the node's pidfile, if that process is still its redis-server.
pid_of() { pid_in "$dir/$1" "$1"; }

down() { ! redis_pong "$1" && ! pid_of "$1" >/dev/null; }

# Check every port before stopping any: leave foreign (non-cluster) servers alone.
for port in "${ports[@]}"; do
	reply=$(redis_reply "$port" cluster info)
	case $reply in
	'' | *cluster_state:*) ;;
	*) die "127.0.0.1:$port answers but is not a cluster-enabled Redis (${reply//$'\n'/ }); not stopping anything" ;;
	esac
done

stopped=()
for port in "${ports[@]}"; do
	if redis_pong "$port"; then
		redis_reply "$port" shutdown nosave >/dev/null
		stopped+=("$port")
	elif pid=$(pid_of "$port"); then
		# Alive but not answering (hung): stop the process from our pidfile.
		kill "$pid" 2>/dev/null || true
		stopped+=("$port")
	fi
	wait_until "$wait_s" down "$port" || die "node 127.0.0.1:$port still running after ${wait_s}s"
	# $port is numeric (checked above), so this only ever removes $dir/<number>.
	rm -rf "${dir:?}/$port"
done
rm -f "$dir/create.log"

if [ "${#stopped[@]}" -eq 0 ]; then
	echo "redis cluster: nothing running on ${ports[*]}; cleaned $dir"
else
	echo "redis cluster: stopped ${stopped[*]}; cleaned $dir"
fi
