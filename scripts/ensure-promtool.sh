#!/usr/bin/env bash
# Make sure promtool (Prometheus's rule checker) is on PATH, for deploy/deploy_test.go.
#
# Installs Debian's "prometheus" package with apt when promtool is missing. That package
# also ships a Prometheus server that its install may start as a service: if it was not
# running before and is running after, it is stopped and disabled again, so that nothing is
# left listening on :9090. A Prometheus that ran before is left alone.
# Idempotent. On success prints one line:
#   SURGE_PROMTOOL='/usr/bin/promtool' # promtool, version 2.42.0+ds ...
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

prometheus_running() {
	pgrep -x prometheus >/dev/null 2>&1
}

if ! command -v promtool >/dev/null 2>&1; then
	ran_before=false
	if prometheus_running; then ran_before=true; fi
	apt_install prometheus
	command -v promtool >/dev/null 2>&1 || die "promtool still not on PATH after apt-get install prometheus"
	if [ "$ran_before" = false ] && prometheus_running; then
		if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
			as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
		else
			as_root service prometheus stop >/dev/null 2>&1 || true
		fi
		wait_until 10 bash -c '! pgrep -x prometheus >/dev/null' || die "the prometheus service the package started is still running"
	fi
fi

path=$(command -v promtool)
printf "SURGE_PROMTOOL=%s # %s\n" "$(shell_quote "$path")" "$(promtool --version 2>&1 | head -n 1)"
