/**
 * Offline modes in cluster mode (docs/cluster.md): held webhooks live in the LMDB of the edge that took
 * them, and the tunnel may come back on another edge, so `reject` and `queue` are refused with a clear
 * error instead of being accepted and silently never applied; `off` reservations work as on one edge.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertApiError, call, createAccount } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { startClusterEdge } from './cluster-helpers.js';

const redis = redisSkip === false ? await TestRedis.start() : null;

test('a cluster edge reserves names "off" and refuses "reject" and "queue" with 400 INVALID_REQUEST', { skip: redisSkip }, async () => {
  const a = await startClusterEdge(redis!.url, 'offline-a');
  const b = await startClusterEdge(redis!.url, 'offline-b');
  try {
    const account = await createAccount(a, 'PRO');
    for (const offline of ['queue', 'reject']) {
      const refused = await call(a, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: `held-${offline}`, offline } });
      assertApiError(refused, 'INVALID_REQUEST');
      assert.match(refused.json.error.message, /not available in cluster mode/);
    }
    const reserved = await call(a, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'kept-name' } });
    assert.equal(reserved.status, 201);
    assert.equal(reserved.json.offline, 'off');
    assertApiError(await call(b, 'PATCH', '/api/v1/reserved-subdomains/kept-name', { token: account.token, body: { offline: 'queue' } }), 'INVALID_REQUEST');
    const listed = await call(b, 'GET', '/api/v1/reserved-subdomains', { token: account.token });
    assert.deepEqual(listed.json.reserved_subdomains.map((r: { subdomain: string; offline: string }) => [r.subdomain, r.offline]), [['kept-name', 'off']]);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});
