#!/usr/bin/env bash
# Makes sure the graphql-http audit (the reference test suite of the GraphQL-over-HTTP spec, an
# npm package) is installed in a cache directory and prints SURGE_GRAPHQL_HTTP_DIR=<dir>, the
# directory whose node_modules hold it. Idempotent: installs once per version, then only checks.
# Needs node (>= 18) and npm; the npm registry must be reachable for the first run.
set -euo pipefail
SURGE_SCRIPT=ensure-graphql-http.sh
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

version=${SURGE_GRAPHQL_HTTP_VERSION:-1.23.1}
graphql_version=${SURGE_GRAPHQL_JS_VERSION:-16.11.0}
dir=${SURGE_GRAPHQL_HTTP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/surge/graphql-http-$version}

command -v node >/dev/null 2>&1 || die "node not found: install Node.js 18 or newer (apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || die "npm not found: install npm (apt-get install npm)"

installed() {
	[ -f "$dir/node_modules/graphql-http/package.json" ] &&
		node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
			"$dir/node_modules/graphql-http/package.json" "$version"
}

if ! installed; then
	mkdir -p "$dir"
	log="$dir/npm-install.log"
	: >"$log"
	[ -f "$dir/package.json" ] || printf '{"private":true}\n' >"$dir/package.json"
	run_logged "$log" npm install --prefix "$dir" --no-audit --no-fund --silent \
		"graphql-http@$version" "graphql@$graphql_version"
	installed || die "graphql-http $version still missing in $dir after npm install (log: $log)"
fi
echo "SURGE_GRAPHQL_HTTP_DIR=$dir"
