/**
 * docs/api.md against the API: its endpoint table lists exactly the routes the API defines, and each
 * documented endpoint answers on a real edge (401 without a token, or 200 for the public one), so the
 * reference cannot drift from the code.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, ROOT, startEdge, type TestEdge } from '../helpers.js';

/** Rows of the endpoint table: | METHOD | [`/api/v1/...`](#anchor) | ... */
function documentedRoutes(): string[] {
  const text = readFileSync(join(ROOT, 'docs', 'api.md'), 'utf8');
  const routes: string[] = [];
  for (const line of text.split('\n')) {
    const match = /^\| (GET|POST|DELETE|PUT|PATCH) \| \[`([^`]+)`\]/.exec(line);
    if (match !== null) routes.push(`${match[1]} ${match[2]!.replace(/\?.*$/, '')}`);
  }
  return routes;
}

let target: TestEdge;
before(async () => {
  target = await startEdge({ authFailureLimit: 1_000 });
});
after(() => target.close());

test('the endpoint table of docs/api.md lists exactly the routes of the API', () => {
  const defined = target.edge.api.routes.map(({ method, pattern }) => `${method} ${pattern}`).sort();
  assert.deepEqual(documentedRoutes().sort(), defined);
});

test('each documented endpoint answers: 200 for the public one, 403 for a sign-in from no page, 204 for "which session?" without one, 401 without a token for the rest', async () => {
  for (const route of documentedRoutes()) {
    const [method, pattern] = route.split(' ') as [string, string];
    const path = pattern.replace(/:[a-z]+/g, 'x-y-z');
    const response = await call(target, method, path);
    const expected = path === '/api/v1/instance' ? 200 : route === 'POST /api/v1/session' ? 403 : route === 'GET /api/v1/session' ? 204 : 401;
    assert.equal(response.status, expected, `${route}: ${response.text}`);
  }
});
