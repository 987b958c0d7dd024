/**
 * Request ids across the edges of a cluster started with `cluster` (what `burrow edge --cluster` does):
 * a tunnel whose requests were captured on A and then, after it moved, on B has captures on two edges,
 * and each must keep an id of its own, so that listing, `before` paging and GET /api/v1/requests/:id
 * through any edge find the right one. Each edge numbers its rings in its own span (clusterRingIds,
 * src/store/captures.ts); found by the failover acceptance work: in cluster mode the span was only
 * given to edges built with `clusterHop` (the hop's own tests), so every edge numbered its rings from 1
 * and the first capture of one subdomain on A and on B were both req_00000001…0.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import type { ClosedInfo } from '../../src/client/tunnel-client.js';
import { call, createAccount, startClient } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

test('captures of one tunnel on two edges have ids of their own, and each id shows its own capture through a third edge', { skip: redisSkip, timeout: 60_000 }, async () => {
  const redis = await TestRedis.start();
  const a = await startClusterEdge(redis.url, 'a');
  const b = await startClusterEdge(redis.url, 'b');
  const c = await startClusterEdge(redis.url, 'c');
  const local = await startNamed('local');
  const clients: { close(): Promise<void> }[] = [];
  try {
    const account = await createAccount(a);
    const first = await startClient(a, account.token, local.port, { subdomain: 'moved-captures' });
    clients.push(first.client);
    assert.equal((await publicGet(a, 'moved-captures', '/on-a')).status, 200);
    const replaced = once(first.client, 'closed') as Promise<[ClosedInfo]>;
    const second = await startClient(b, account.token, local.port, { subdomain: 'moved-captures', replace: true });
    clients.push(second.client);
    await replaced;
    assert.equal((await publicGet(b, 'moved-captures', '/on-b')).status, 200);

    const listed = await call(c, 'GET', '/api/v1/requests?subdomain=moved-captures', { token: account.token });
    assert.equal(listed.status, 200, listed.text);
    const captures = listed.json.requests as { id: string; path: string }[];
    assert.deepEqual(captures.map((capture) => capture.path).sort(), ['/on-a', '/on-b']);
    assert.equal(new Set(captures.map((capture) => capture.id)).size, 2, `one id each: ${captures.map((capture) => capture.id).join(', ')}`);
    for (const capture of captures) {
      const shown = await call(c, 'GET', `/api/v1/requests/${capture.id}`, { token: account.token });
      assert.equal(shown.status, 200, shown.text);
      assert.equal(shown.json.path, capture.path, `${capture.id} shows its own capture`);
    }
  } finally {
    for (const client of clients) await client.close();
    await local.close();
    await Promise.all([a.close(), b.close(), c.close()]);
  }
});
