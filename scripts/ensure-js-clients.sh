#!/usr/bin/env bash
# Makes sure the JavaScript clients the tests drive (Apollo Client with its PersistedQueryLink and
# BatchHttpLink, graphql-ws, and ws for graphql-ws on Node) are installed in a cache directory,
# and GraphQL Codegen with its client preset (which writes persisted-documents manifests) in
# another; prints SURGE_JS_CLIENTS_DIR=<dir> and SURGE_CODEGEN_DIR=<dir>, the directories whose
# node_modules hold them. Idempotent: installs once per set of versions, then only checks. Needs
# node (>= 20) and npm; the npm registry must be reachable for the first run.
set -euo pipefail
SURGE_SCRIPT=ensure-js-clients.sh
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

apollo=${SURGE_APOLLO_CLIENT_VERSION:-4.3.8}
graphql_ws=${SURGE_GRAPHQL_WS_VERSION:-6.4.2}
graphql=${SURGE_GRAPHQL_JS_VERSION:-16.11.0}
rxjs=${SURGE_RXJS_VERSION:-7.8.2}
ws=${SURGE_WS_VERSION:-8.18.3}
codegen=${SURGE_CODEGEN_VERSION:-7.4.3}
client_preset=${SURGE_CLIENT_PRESET_VERSION:-6.2.0}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/surge
dir=${SURGE_JS_CLIENTS_DIR:-$cache/js-clients-$apollo-$graphql_ws}
codegen_dir=${SURGE_CODEGEN_DIR:-$cache/codegen-$codegen-$client_preset}

npm_ensure "$dir" "@apollo/client@$apollo" "graphql-ws@$graphql_ws" "graphql@$graphql" "rxjs@$rxjs" "ws@$ws"
npm_ensure "$codegen_dir" "@graphql-codegen/cli@$codegen" "@graphql-codegen/client-preset@$client_preset" "graphql@$graphql"
echo "SURGE_JS_CLIENTS_DIR=$dir"
echo "SURGE_CODEGEN_DIR=$codegen_dir"
