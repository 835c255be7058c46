#!/usr/bin/env bash
# Runs a command (make test's go test) with a local Redis Cluster, and leaves the machine's
# clusters as it found them:
#   - SURGE_TEST_REDIS_CLUSTER_ADDRS set: that cluster is used; nothing is started or stopped.
#   - else ensure-redis-cluster.sh makes sure one runs on SURGE_CLUSTER_PORTS (default
#     7101-7103) and its SURGE_TEST_REDIS_CLUSTER_ADDRS is exported to the command, so the
#     tests use those ports; when the command ends (passed, failed or interrupted), the nodes
#     this run started are stopped (stop-redis-cluster.sh) and a cluster that was already
#     running, which other programs may be using, is left running. Runs at once share the
#     cluster: the nodes any of them started are stopped when the last of them ends.
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

cluster_settings
# Runs that use this cluster at once (two `make test` on one machine) each hold a lease, a
# file named by their pid; the nodes a run started are noted in "started". Whichever run ends
# last stops those nodes, so no run stops a cluster that another one is still testing on,
# and a cluster that ran before any of them (no note) is left running.
users="$dir/.users-$(IFS=-; echo "${ports[*]}")"
mkdir -p "$users"
exec 8>"$dir/.users.lock" # not ensure/stop's .lock, which they take themselves
flock -w 600 8 || die "another with-redis-cluster.sh run holds $dir/.users.lock"
line=$(bash "$(dirname "${BASH_SOURCE[0]}")/ensure-redis-cluster.sh" 8>&-)
echo "$line"
SURGE_CLUSTER_STARTED=
eval "$line"
export SURGE_TEST_REDIS_CLUSTER_ADDRS
if [ -n "$SURGE_CLUSTER_STARTED" ]; then
	echo "$SURGE_CLUSTER_STARTED" >>"$users/started"
fi
: >"$users/$$"
flock -u 8

leave() {
	flock -w 600 8 || die "another with-redis-cluster.sh run holds $dir/.users.lock"
	rm -f "$users/$$"
	local f others=0
	for f in "$users"/[0-9]*; do
		[ -e "$f" ] || continue
		if kill -0 "${f##*/}" 2>/dev/null; then
			others=$((others + 1))
		else
			rm -f "$f" # a run that ended without leaving (killed)
		fi
	done
	if [ "$others" -gt 0 ]; then
		echo "redis cluster: left running ($others other run(s) use it)"
	elif [ -s "$users/started" ]; then
		local started
		started=$(tr -s ' ' '\n' <"$users/started" | sort -un | tr '\n' ' ')
		rm -f "$users/started"
		SURGE_CLUSTER_PORTS=$started bash "$(dirname "${BASH_SOURCE[0]}")/stop-redis-cluster.sh" 8>&-
	else
		echo "redis cluster: left running (it was running before this run)"
	fi
	flock -u 8
}
trap leave EXIT
rc=0
"$@" 8>&- || rc=$?
exit "$rc"
