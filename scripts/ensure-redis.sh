#!/usr/bin/env bash
# Make sure a Redis answers PING on 127.0.0.1:$SURGE_REDIS_PORT.
#
# Installs redis-server/redis-tools with apt if missing; starts a
# non-persistent server if nothing answers; waits for PONG.
# Idempotent. On success prints one line, usable with eval:
#   SURGE_TEST_REDIS_ADDR='127.0.0.1:6379' # redis 7.0.15, already running
#
# Environment:
#   SURGE_REDIS_PORT     port to check / start on           (default 6379)
#   SURGE_REDIS_DIR      working dir of a server we start   (default /tmp/surge-redis-$PORT)
#   SURGE_REDIS_LOGFILE  log file of a server we start      (default $SURGE_REDIS_DIR/redis.log)
#   SURGE_REDIS_WAIT     seconds to wait for PONG           (default 10)
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

port=${SURGE_REDIS_PORT:-6379}
dir=${SURGE_REDIS_DIR:-/tmp/surge-redis-$port}
logfile=${SURGE_REDIS_LOGFILE:-$dir/redis.log}
wait_s=${SURGE_REDIS_WAIT:-10}
check_uint SURGE_REDIS_PORT "$port"
check_uint SURGE_REDIS_WAIT "$wait_s"

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	apt_install redis-server redis-tools
	command -v redis-server >/dev/null 2>&1 || die "redis-server still not on PATH after apt-get install"
	command -v redis-cli >/dev/null 2>&1 || die "redis-cli still not on PATH after apt-get install"
fi

how="already running"
reply=$(redis_reply "$port" ping)
case $reply in
PONG) ;;
'')
	mkdir -p "$dir" "$(dirname "$logfile")" 2>/dev/null ||
		die "cannot create $dir or the directory of $logfile (set SURGE_REDIS_DIR / SURGE_REDIS_LOGFILE)"
	# Keep the previous log of this port around; a failed start shows the new one.
	[ ! -s "$logfile" ] || mv -f "$logfile" "$logfile.old"
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$port" \
		--save "" --appendonly no \
		--dir "$dir" --logfile "$logfile" --pidfile "$dir/redis.pid" >/dev/null 2>&1 ||
		die "redis-server --daemonize failed on port $port (log: $logfile)"
	if ! wait_until "$wait_s" redis_pong "$port"; then
		[ ! -f "$logfile" ] || { echo "--- last lines of $logfile ---" >&2 && tail -n 15 "$logfile" >&2; }
		die "started redis-server on 127.0.0.1:$port but no PONG within ${wait_s}s"
	fi
	how="started (dir $dir, log $logfile)"
	;;
*)
	die "something answers on 127.0.0.1:$port but not with PONG: $reply"
	;;
esac

version=$(redis_reply "$port" info server | sed -n 's/^redis_version://p')
echo "SURGE_TEST_REDIS_ADDR=$(shell_quote "127.0.0.1:$port") # redis ${version:-?}, $how"
