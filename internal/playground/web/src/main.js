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

// The token of the last login run in this page. Every operation that carries no
// Authorization header of its own (the headers editor of its tab) is sent with it, so
// the walkthrough's tabs work one after the other without copying the token; a logout
// forgets it. It lives in this page only (a reload forgets it too).
let session = null;

const hasAuthorization = (headers) =>
  Object.keys(headers || {}).some((k) => k.toLowerCase() === 'authorization');

function remember(result) {
  const data = result && result.data;
  if (data && data.login && typeof data.login.token === 'string') session = data.login.token;
  if (data && data.logout === true) session = null;
  return result;
}

const sessionFetcher = (params, opts) => {
  const headers = { ...(opts && opts.headers) };
  if (session && !hasAuthorization(headers)) headers.Authorization = `Bearer ${session}`;
  const result = fetcher(params, { ...opts, headers });
  return result && typeof result.then === 'function' ? result.then(remember) : result;
};

const params = new URLSearchParams(window.location.search);
const param = (name) => (params.has(name) ? params.get(name) : undefined);

// The first screen is the README's walkthrough, one tab per step, the demo data first.
// Comment lines stay short: the query editor of a 1 400 px window shows about 60
// characters (playground_test.go checks that no line of any tab runs past its edge).
const demoVoucher = '17179869186'; // the seeded SECKILL voucher (stock 100)
const walkthrough = [
  `# Surge playground: the demo data.
# Run it: Ctrl-Enter or the run button.
# The next tabs follow the README: send a
# login code, log in, grab the seckill
# voucher, read your order, watch stock.

query DemoData {
  shopTypes { id name }
  onSale: shops(
    first: 3
    where: {hasVouchers: true}
  ) {
    edges {
      node {
        id
        name
        vouchers {
          id title kind payValue
          stock beginAt endAt
        }
      }
    }
  }
  shops(first: 5) {
    totalCount
    edges {
      node { id name score type { name } }
    }
  }
}
`,
  `# Step 1: a login code for the demo admin.
# Dev mode (go run, make run) returns it as
# devCode. Production never does: the code
# goes where SURGE_LOGIN_CODE_SENDER says
# (compose: docker compose logs app).

mutation SendLoginCode {
  sendLoginCode(phone: "13800000000") {
    devCode
    expiresIn
    retryAfter
  }
}
`,
  `# Step 2: put the code in place of <code>
# and run. This page then sends the token
# with every tab's requests (unless a tab's
# Headers set their own Authorization).

mutation Login {
  login(phone: "13800000000", code: "<code>") {
    token
    user { id phone role }
  }
}
`,
  `# Step 3: grab the seckill voucher (log in
# first). One order per user; QUEUED until
# the order consumer writes it, then CREATED.

mutation Grab {
  seckillVoucher(voucherId: "${demoVoucher}") {
    orderId
    status
  }
}
`,
  `# Step 4: your orders, newest first.

query MyOrders {
  myOrders(first: 5) {
    totalCount
    edges {
      node {
        id status createdAt
        voucher { title }
      }
    }
  }
}
`,
  `# Watch an order: put its id (Grab or
# MyOrders) in place of <orderId> and run.
# QUEUED, then CREATED, and the stream ends.

subscription OrderStatus {
  orderStatus(orderId: "<orderId>")
}
`,
  `# The voucher's stock, live: each grab, by
# anyone, sends the new count. No login
# needed. The run button stops it.

subscription VoucherStock {
  voucherStock(voucherId: "${demoVoucher}")
}
`,
].map((query) => ({ query }));

// A link with ?query= (and ?variables=, ?headers=) opens on its operation, the
// walkthrough in the tabs after it (on a first visit).
const linked = params.has('query')
  ? [{ query: param('query'), variables: param('variables'), headers: param('headers') }]
  : [];

// A tab added with "+" starts here.
const defaultQuery = `# Write an operation; Ctrl-Enter runs it.
# Headers (below): {"Authorization":
#   "Bearer <token>"}, unless you logged in
# in this page, which sends its token.

{ shopTypes { name } }
`;

createRoot(document.getElementById('graphiql')).render(
  React.createElement(GraphiQL, {
    fetcher: sessionFetcher,
    defaultQuery,
    defaultTabs: [...linked, ...walkthrough],
    // Also with tabs kept from an earlier visit (localStorage): GraphiQL then adds the
    // linked operation as a tab of its own, or selects the tab that holds it.
    query: param('query'),
    variables: param('variables'),
    headers: param('headers'),
    isHeadersEditorEnabled: true,
    shouldPersistHeaders: false,
    defaultEditorToolsVisibility: params.has('variables') && !params.has('headers') ? 'variables' : 'headers',
  }),
);
