#!/usr/bin/env bash
# Stop the local master, replicas and Sentinels started by scripts/ensure-redis-sentinel.sh
# (the Sentinels first, so that they fail nothing over meanwhile) and remove their directories
# ($SURGE_SENTINEL_DIR/<port>), so the next ensure run starts a fresh setup. Data is not saved.
# Refuses to stop a process on those ports that is not this setup's (see ensure-redis-sentinel.sh).
# Idempotent. On success prints one summary line.
#
# Environment (same as ensure-redis-sentinel.sh): SURGE_SENTINEL_DIR, SURGE_SENTINEL_DATA_PORTS,
# SURGE_SENTINEL_PORTS; SURGE_SENTINEL_WAIT seconds to wait per process (default 30).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sentinel_settings
wait_s=${SURGE_SENTINEL_WAIT:-30}
check_uint SURGE_SENTINEL_WAIT "$wait_s"
for port in "${data_ports[@]}" "${sentinel_ports[@]}"; do check_uint "SURGE_SENTINEL_*PORTS entry" "$port"; done
command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found (nothing to stop?)"

if [ -d "$dir" ]; then
	exec 9>"$dir/.lock"
	flock -w 120 9 || die "another ensure/stop-redis-sentinel run holds $dir/.lock"
fi

down() { ! redis_pong "$1" && ! pid_in "$dir/$1" "$1" >/dev/null; }

# Check every port before stopping any: a process that answers must work in $dir/<port>.
for port in "${sentinel_ports[@]}" "${data_ports[@]}"; do
	redis_pong "$port" || continue
	case " ${sentinel_ports[*]} " in
	*" $port "*) [ "$(redis_reply "$port" info server | sed -n 's/^config_file://p')" = "$dir/$port/sentinel.conf" ] ;;
	*) [ "$(redis_reply "$port" config get dir | sed -n 2p)" = "$dir/$port" ] ;;
	esac || die "127.0.0.1:$port answers but is not this setup's (not working in $dir/$port); not stopping anything"
done

stopped=()
for port in "${sentinel_ports[@]}" "${data_ports[@]}"; do
	if pid=$(pid_in "$dir/$port" "$port"); then
		kill "$pid" 2>/dev/null || true # SIGTERM: a Sentinel saves its config, a data node nothing
		stopped+=("$port")
	elif redis_pong "$port"; then
		redis_reply "$port" shutdown nosave >/dev/null
		stopped+=("$port")
	fi
	wait_until "$wait_s" down "$port" || die "127.0.0.1:$port still running after ${wait_s}s"
	# $port is numeric (checked above), so this only ever removes $dir/<number>.
	rm -rf "${dir:?}/$port"
done

if [ "${#stopped[@]}" -eq 0 ]; then
	echo "redis sentinel: nothing running on ${sentinel_ports[*]} ${data_ports[*]}; cleaned $dir"
else
	echo "redis sentinel: stopped ${stopped[*]}; cleaned $dir"
fi
