// Runs the GraphQL-over-HTTP audit of graphql-http (serverAudits) against one endpoint and
// prints one JSON object: {ok, notice, warn, error, results: [{id, name, status, reason}]}.
// Usage: node graphql-http-audit.mjs <url>   (module resolution: NODE_PATH or the cwd)
import { createRequire } from 'node:module';
import path from 'node:path';

const url = process.argv[2];
if (!url) {
  console.error('usage: node graphql-http-audit.mjs <url>');
  process.exit(2);
}
// The package lives in the cache directory of scripts/ensure-graphql-http.sh, not beside
// this file: resolve it from SURGE_GRAPHQL_HTTP_DIR.
const dir = process.env.SURGE_GRAPHQL_HTTP_DIR;
if (!dir) {
  console.error('SURGE_GRAPHQL_HTTP_DIR is not set: run scripts/ensure-graphql-http.sh');
  process.exit(2);
}
const require = createRequire(path.join(dir, 'package.json'));
const { serverAudits } = require('graphql-http');

const counts = { ok: 0, notice: 0, warn: 0, error: 0 };
const results = [];
for (const audit of serverAudits({ url })) {
  const r = await audit.fn();
  counts[r.status]++;
  const out = { id: r.id, name: r.name, status: r.status };
  if (r.status !== 'ok') {
    out.reason = r.reason;
    try {
      out.response = { status: r.response.status, contentType: r.response.headers.get('content-type'), body: (await r.response.text()).slice(0, 300) };
    } catch {}
  }
  results.push(out);
}
console.log(JSON.stringify({ ...counts, results }));
