/**
 * The billing summary in cluster mode counts every edge's traffic: each edge adds its counts to Redis,
 * and any edge answers the account's total (before the fix the edge counted into its own LMDB, and each
 * edge's summary showed only its own share).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { call, createAccount, startClient, waitFor } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

const redis = redisSkip === false ? await TestRedis.start() : null;

test('requests through tunnels on two edges add up in the summary that a third edge answers', { skip: redisSkip }, async () => {
  const options = { plans: { FREE: { activeTunnels: 2 } } };
  const a = await startClusterEdge(redis!.url, 'usage-a', options);
  const b = await startClusterEdge(redis!.url, 'usage-b', options);
  const c = await startClusterEdge(redis!.url, 'usage-c', options);
  const local = await startNamed('counted');
  try {
    const account = await createAccount(a);
    const onA = await startClient(a, account.token, local.port);
    const onB = await startClient(b, account.token, local.port);
    for (let i = 0; i < 3; i++) assert.equal((await publicGet(a, onA.subdomain)).status, 200);
    for (let i = 0; i < 2; i++) assert.equal((await publicGet(b, onB.subdomain)).status, 200);
    // Edges flush their counts every second.
    await waitFor(
      async () => (await call(c, 'GET', '/api/v1/billing/summary', { token: account.token })).json.usage.requests === 5,
      10_000,
      'the summary on C to count the five requests served by A and B',
    );
    const summary = (await call(a, 'GET', '/api/v1/billing/summary', { token: account.token })).json;
    assert.equal(summary.usage.requests, 5);
    assert.equal(summary.usage.active_tunnels, 2);
    assert.ok(summary.usage.bytes_out > 0);
    await onA.client.close();
    await onB.client.close();
  } finally {
    await local.close();
    await Promise.all([a.close(), b.close(), c.close()]);
  }
});
