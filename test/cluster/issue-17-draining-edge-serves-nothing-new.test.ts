/**
 * Regression (found by the never-two-owners race, issue 17): an edge draining for shutdown had closed its
 * listener, so another edge's takeover call was refused ("the process is gone") and the name moved; yet
 * the draining edge kept serving the tunnel to requests on public connections kept alive past the
 * listener: two edges served one subdomain at once. Now a draining edge serves nothing new.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Agent, request } from 'undici';
import { createAccount, startClient, startLocal, waitFor } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

test('a draining edge serves none of its tunnels to new requests once its listener is closed', { skip: redisSkip }, async () => {
  const redis = await TestRedis.start();
  const a = await startClusterEdge(redis.url, 'a');
  const b = await startClusterEdge(redis.url, 'b');
  const slowLocal = await startLocal((req, res) => {
    req.resume();
    setTimeout(() => res.end('old'), req.url === '/slow' ? 1_500 : 0);
  });
  const newLocal = await startNamed('new');
  const agent = new Agent({ connections: 2, keepAliveTimeout: 60_000 });
  const get = async (path: string): Promise<{ status: number; text: string }> => {
    const response = await request(`${a.base}${path}`, { headers: { host: `draining.localhost:${a.port}` }, dispatcher: agent });
    return { status: response.statusCode, text: await response.body.text() };
  };
  try {
    const account = await createAccount(a);
    const old = await startClient(a, account.token, slowLocal.port, { subdomain: 'draining' });
    // Two kept-alive connections to A: one carries a slow request through the drain, one probes.
    assert.deepEqual(await Promise.all([get('/warm-1'), get('/warm-2')]), [{ status: 200, text: 'old' }, { status: 200, text: 'old' }]);
    const slow = get('/slow');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const closing = a.edge.close(5_000);
    await waitFor(() => a.edge.draining, 1_000, 'A to drain');
    // The same account takes the name over through B: A's listener refuses the release call, so the name moves.
    const fresh = await startClient(b, account.token, newLocal.port, { subdomain: 'draining', replace: true });
    assert.deepEqual(await publicGet(b, 'draining'), { status: 200, text: 'new' });
    const probe = await get('/after-takeover');
    assert.notEqual(probe.text, 'old', `the draining edge answered ${probe.status} ${probe.text}`);
    // The request in flight when the name moved is cut when A's renewal finds the lease lost (502).
    await slow;
    await closing;
    await Promise.all([old.client.close(), fresh.client.close()]);
  } finally {
    await agent.close();
    await slowLocal.close();
    await newLocal.close();
    await a.close();
    await b.close();
  }
});
