// Entry of the embedded GraphiQL playground. build.mjs bundles it into ../dist.
import React from 'react';
import { createRoot } from 'react-dom/client';
import { GraphiQL } from 'graphiql';
import { createGraphiQLFetcher } from '@graphiql/toolkit';
import 'graphiql/graphiql.css';
import './app.css';

// The Go handler renders the endpoint into this JSON blob (see ../playground.go).
function readConfig() {
  const el = document.getElementById('playground-config');
  try {
    return JSON.parse(el ? el.textContent : '{}') || {};
  } catch {
    return {};
  }
}

const config = readConfig();
const endpoint = new URL(config.endpoint || '/query', window.location.href);

// Subscriptions go over a WebSocket to the same endpoint (graphql-transport-ws,
// the protocol of the bundled graphql-ws client): ws:// next to http://,
// wss:// next to https://.
const subscriptionEndpoint = new URL(endpoint);
subscriptionEndpoint.protocol = endpoint.protocol === 'https:' ? 'wss:' : 'ws:';

// Queries and mutations are POSTed as JSON. An answer that is not JSON (a proxy's
// error page, a 503 from the session store) is shown as a GraphQL error instead
// of a parse failure.
async function postJSON(url, init) {
  const res = await window.fetch(url, { ...init, credentials: 'same-origin' });
  const text = await res.text();
  try {
    JSON.parse(text);
    return new Response(text, { status: res.status, headers: { 'Content-Type': 'application/json' } });
  } catch {
    const errors = [{ message: `HTTP ${res.status} ${res.statusText}: ${text}` }];
    return new Response(JSON.stringify({ errors }), { status: res.status, headers: { 'Content-Type': 'application/json' } });
  }
}

// createGraphiQLFetcher sends subscription operations through a graphql-ws client
// on subscriptionUrl; the headers editor's contents (e.g. {"Authorization":
// "Bearer <token>"}) become the connection_init payload (connectionParams), which
// the server authenticates. Only the configured endpoint is ever contacted.
const fetcher = createGraphiQLFetcher({
  url: endpoint.toString(),
  subscriptionUrl: subscriptionEndpoint.toString(),
  headers: { Accept: 'application/graphql-response+json, application/json' },
  enableIncrementalDelivery: false, // no @defer/@stream on this server
  fetch: postJSON,
});

const params = new URLSearchParams(window.location.search);
const param = (name) => (params.has(name) ? params.get(name) : undefined);

const defaultQuery = `# Surge GraphQL playground
#
# Type a query here and press Ctrl-Enter (or the run button) to execute it.
# Add request headers below, e.g. {"Authorization": "Bearer <token>"}.
# Subscriptions run over a WebSocket; the headers go in its connection_init:
#   subscription { voucherStock(voucherId: "<id>") }
# Links can prefill the editors: ?query=...&variables=...&headers=...

query {
  __typename
}
`;

createRoot(document.getElementById('graphiql')).render(
  React.createElement(GraphiQL, {
    fetcher,
    defaultQuery,
    query: param('query'),
    variables: param('variables'),
    headers: param('headers'),
    isHeadersEditorEnabled: true,
    shouldPersistHeaders: false,
    defaultEditorToolsVisibility: params.has('variables') && !params.has('headers') ? 'variables' : 'headers',
  }),
);
