#!/usr/bin/env bash
# Makes sure the graphql-http audit (the reference test suite of the GraphQL-over-HTTP spec, an
# npm package) is installed in a cache directory and prints SURGE_GRAPHQL_HTTP_DIR=<dir>, the
# directory whose node_modules hold it. Idempotent: installs once per version, then only checks.
# Needs node (>= 20) and npm; the npm registry must be reachable for the first run.
set -euo pipefail
SURGE_SCRIPT=ensure-graphql-http.sh
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

version=${SURGE_GRAPHQL_HTTP_VERSION:-1.23.1}
graphql_version=${SURGE_GRAPHQL_JS_VERSION:-16.11.0}
dir=${SURGE_GRAPHQL_HTTP_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/surge/graphql-http-$version}

npm_ensure "$dir" "graphql-http@$version" "graphql@$graphql_version"
echo "SURGE_GRAPHQL_HTTP_DIR=$dir"
