// Entry of the embedded GraphiQL playground. build.mjs bundles it into ../dist.
import React from 'react';
import { createRoot } from 'react-dom/client';
import { GraphiQL } from 'graphiql';
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
const endpoint = new URL(config.endpoint || '/query', window.location.href).toString();

// Plain HTTP POST fetcher (no subscriptions, no websockets): only the configured
// endpoint is ever contacted.
async function fetcher(graphQLParams, opts) {
  const headers = {
    Accept: 'application/graphql-response+json, application/json',
    'Content-Type': 'application/json',
    ...((opts && opts.headers) || {}),
  };
  const res = await fetch(endpoint, {
    method: 'POST',
    headers,
    body: JSON.stringify(graphQLParams),
    credentials: 'same-origin',
  });
  const text = await res.text();
  try {
    return JSON.parse(text);
  } catch {
    return { errors: [{ message: `HTTP ${res.status} ${res.statusText}: ${text}` }] };
  }
}

const params = new URLSearchParams(window.location.search);
const param = (name) => (params.has(name) ? params.get(name) : undefined);

const defaultQuery = `# Surge GraphQL playground
#
# Type a query here and press Ctrl-Enter (or the run button) to execute it.
# Add request headers below, e.g. {"Authorization": "Bearer <token>"}.
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
