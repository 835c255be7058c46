#!/usr/bin/env bash
# Make sure the tools `make test` needs besides the services are there: Go (the version go.mod
# names), a C compiler that links (go test -race needs cgo), make, Node.js 20 or newer and npm
# (the JavaScript clients and GraphQL Codegen the tests drive need Node 20), and the small
# utilities the other scripts use (flock, timeout, pgrep). `make test` runs it first.
#
# Installs what apt-get can install (gcc libc6-dev, make, nodejs when apt-get's is new
# enough, npm, util-linux, coreutils, procps) when it runs as root or with passwordless sudo.
# Otherwise, and for what apt-get cannot give (Go, an older distribution's Node), it prints one
# line per missing thing on stderr, what it is and how to get it, and exits 1. When it cannot
# install, it also names the services the other ensure scripts would install (Redis, MariaDB,
# Chromium, promtool), so that one run lists everything a machine lacks.
# Idempotent. On success prints one line:
#   SURGE_TEST_TOOLS_OK=true # go1.26.8, gcc 12.2.0, node 20.20.2, npm 11.19.1, GNU Make 4.3
#
# Environment:
#   SURGE_CHECK_ONLY   1: install nothing, only check and report (default: install when possible)
set -euo pipefail
SURGE_SCRIPT=ensure-tools.sh
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
min_node=20
want_go=$(sed -n 's/^go \([0-9][0-9.]*\).*/\1/p' "$root/go.mod" | head -n 1)

has() { command -v "$1" >/dev/null 2>&1; }

# version_at_least HAVE WANT: true if version HAVE >= WANT (dotted numbers).
version_at_least() {
	[ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Each check prints nothing when the tool is fine, else "<apt packages>|<what is missing and
# how to get it>" (no packages: apt-get cannot help).
check_go() {
	local v
	if ! has go; then
		echo "|go: not found; install Go $want_go or newer (https://go.dev/dl/) and put its bin directory on PATH"
		return
	fi
	if ! v=$(cd "$root" && go env GOVERSION 2>&1); then
		echo "|go: 'go env' fails in $root: $(printf '%s' "$v" | head -n 1); install Go $want_go or newer (https://go.dev/dl/)"
		return
	fi
	version_at_least "${v#go}" "$want_go" ||
		echo "|go: $v is older than go.mod's go $want_go; install Go $want_go or newer (https://go.dev/dl/)"
}

check_cc() {
	if [ "${CGO_ENABLED:-}" = 0 ]; then
		echo "|cgo: CGO_ENABLED=0 is set, and go test -race needs cgo; unset it"
		return
	fi
	local cc=gcc
	has go && cc=$(cd "$root" && go env CC 2>/dev/null) && [ -n "$cc" ] || cc=gcc
	printf 'int main(void) { return 0; }\n' >"$work/cc.c"
	if ! has "${cc%% *}"; then
		echo "gcc libc6-dev|$cc: not found, and go test -race needs a C compiler (cgo); apt-get install gcc libc6-dev"
	elif ! $cc -o "$work/cc.out" "$work/cc.c" >"$work/cc.log" 2>&1; then
		echo "gcc libc6-dev|$cc cannot build a C program ($(head -n 1 "$work/cc.log")), and go test -race needs one (cgo); apt-get install gcc libc6-dev"
	fi
}

# apt_node_major: the major version of apt-get's nodejs (empty when it has none).
apt_node_major() {
	{ apt-cache policy nodejs 2>/dev/null || true; } | sed -n 's/^ *Candidate: *\([0-9:]*:\)\{0,1\}\([0-9]*\).*/\2/p' | head -n 1
}

# node_package: "nodejs" when this run installs and apt-get's nodejs is new enough.
node_package() {
	local m
	[ -n "${installing:-}" ] || return 0
	m=$(apt_node_major)
	if [ -n "$m" ] && [ "$m" -ge "$min_node" ]; then echo nodejs; fi
}

check_node() {
	local v how="install Node.js $min_node or newer (apt-get install nodejs where the distribution's is $min_node+, e.g. Debian 13; else nodejs.org or NodeSource's packages)"
	if ! has node; then
		echo "$(node_package)|node: not found, and the tests drive JavaScript clients (Node.js $min_node or newer); $how"
		return
	fi
	v=$(node -p 'process.versions.node' 2>/dev/null) || v=unknown
	if [ "${v%%.*}" = unknown ] || [ "${v%%.*}" -lt "$min_node" ]; then
		echo "$(node_package)|node: version $v is older than $min_node (GraphQL Codegen and graphql-ws, which the tests run, need $min_node); $how"
	fi
}

check_cmd() { # check_cmd NAME PACKAGES WHY
	has "$1" || echo "$2|$1: not found ($3); apt-get install $2"
}

# Services the other ensure scripts install with apt-get; checked only when this run cannot
# install, to name them together with the rest.
check_services() {
	if ! has redis-server || ! has redis-cli; then
		echo "|redis-server, redis-cli: not found (the tests use Redis and a local Redis Cluster); apt-get install redis-server redis-tools"
	fi
	if ! has mariadbd && ! has mysqld && [ ! -x /usr/sbin/mariadbd ] && [ ! -x /usr/sbin/mysqld ]; then
		echo "|mariadbd: not found (the tests use MariaDB); apt-get install mariadb-server mariadb-client"
	fi
	if [ ! -x /usr/bin/chromium ] && ! has chromium && ! has chromium-browser && ! has google-chrome && ! has google-chrome-stable; then
		echo "|chromium: not found (the playground and browser tests run headless Chromium); apt-get install chromium"
	fi
	check_cmd promtool prometheus "deploy/'s alert rules are tested with it"
}

check_all() {
	check_go
	check_cc
	check_cmd make make "make test is a make target"
	check_node
	check_cmd npm npm "the scripts install the tests' JavaScript clients with it"
	check_cmd flock util-linux "the Redis Cluster scripts serialise with it"
	check_cmd timeout coreutils "the scripts bound their Redis calls with it"
	check_cmd pgrep procps "ensure-promtool.sh looks for a Prometheus server with it"
}

installing=""
if [ "${SURGE_CHECK_ONLY:-}" != 1 ] && has apt-get && can_root; then
	installing=1
fi

missing=$(check_all)
if [ -n "$missing" ] && [ -n "$installing" ]; then
	# apt-cache's candidate nodejs is known only after an update: update first, then check
	# again to learn what apt-get can install.
	log=/tmp/surge-apt-install.log
	: >"$log"
	run_logged "$log" as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=120 -q update
	packages=$(check_all | cut -d'|' -f1 | tr ' ' '\n' | sed '/^$/d' | sort -u | tr '\n' ' ')
	packages=${packages% }
	if [ -n "$packages" ]; then
		echo "ensure-tools.sh: installing with apt-get: $packages" >&2
		# shellcheck disable=SC2086 # a list of package names
		apt_install $packages
	fi
	missing=$(check_all)
fi
if [ -z "$installing" ]; then
	missing=$(printf '%s\n%s\n' "$missing" "$(check_services)" | sed '/^$/d')
fi

if [ -n "$missing" ]; then
	n=0
	while IFS= read -r line; do
		printf '%s: missing: %s\n' "$SURGE_SCRIPT" "${line#*|}" >&2
		n=$((n + 1))
	done <<<"$missing"
	if [ -z "$installing" ] && [ "${SURGE_CHECK_ONLY:-}" != 1 ]; then
		echo "$SURGE_SCRIPT: $n prerequisites of make test missing; as root (or with passwordless sudo) on Debian or Ubuntu, this script installs what apt-get can" >&2
	fi
	exit 1
fi

cc=$(cd "$root" && go env CC)
printf 'SURGE_TEST_TOOLS_OK=true # %s, %s, node %s, npm %s, %s\n' \
	"$(cd "$root" && go env GOVERSION)" "$($cc --version 2>/dev/null | head -n 1)" \
	"$(node -p 'process.versions.node')" "$(npm --version 2>/dev/null)" "$(make --version | head -n 1)"
