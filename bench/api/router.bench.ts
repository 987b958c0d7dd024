/**
 * Micro-benchmark of the /api/v1 route lookup (tinybench), on the API's real route table: static hits,
 * parameter hits, HEAD served by a GET route, and misses (404 and 405).
 *
 * Run: npx tsc -p . && node dist/bench/api/router.bench.js [--time MS]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Bench } from 'tinybench';
import { Api, type ApiOptions } from '../../src/api/api.js';
import type { Router } from '../../src/api/router.js';
import { Store } from '../../src/store/store.js';
import { printBenchTable } from '../micro-table.js';

const { values } = parseArgs({ options: { time: { type: 'string', default: '1000' } } });
const time = Number(values.time);

// Building the Api only defines its routes; the handlers (never called here) close over these.
// The store only hands out its session table and limiters here.
const unused = {} as never;
const dir = mkdtempSync(join(tmpdir(), 'burrow-router-bench-'));
const store = Store.open(dir);
const api = new Api({ store, heldEvents: store.queue, captures: unused, usage: unused, tunnels: unused, instance: { build: 'bench', region: 'bench' } } satisfies ApiOptions);
const router = (api as unknown as { router: Router<unknown> }).router;

const lookups: [name: string, method: string, path: string][] = [
  ['hit  GET /api/v1/auth/me', 'GET', '/api/v1/auth/me'],
  ['hit  GET /api/v1/billing/summary', 'GET', '/api/v1/billing/summary'],
  ['hit  GET /api/v1/tokens/ (trailing slash)', 'GET', '/api/v1/tokens/'],
  ['hit  HEAD /api/v1/tunnels (GET route)', 'HEAD', '/api/v1/tunnels'],
  ['param DELETE /api/v1/tokens/:id', 'DELETE', '/api/v1/tokens/tok_0123abcd'],
  ['param GET /api/v1/tunnels/:subdomain', 'GET', '/api/v1/tunnels/quiet-river-42'],
  ['param POST /api/v1/requests/:id/replay', 'POST', '/api/v1/requests/req_00000001000000000abc/replay'],
  ['param percent-encoded', 'GET', '/api/v1/tunnels/quiet%2Driver%2D42'],
  ['miss 404 /api/v1/health', 'GET', '/api/v1/health'],
  ['miss 404 deep unknown path', 'GET', '/api/v1/tokens/tok_0123abcd/scopes/admin'],
  ['miss 404 /favicon.ico', 'GET', '/favicon.ico'],
  ['miss 405 PUT /api/v1/tokens', 'PUT', '/api/v1/tokens'],
];

const bench = new Bench({ time, warmupTime: Math.min(250, time) });
let sink = 0;
for (const [name, method, path] of lookups) {
  bench.add(name, () => {
    sink += router.lookup(method, path).kind.length;
  });
}
await bench.run();

printBenchTable('router lookup', bench, `${time} ms per task`);
if (sink === 0) console.log('(nothing was measured)');
await store.close();
rmSync(dir, { recursive: true, force: true });
