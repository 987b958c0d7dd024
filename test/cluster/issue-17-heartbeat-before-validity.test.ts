/**
 * Never two owners when an edge is cut off from Redis but still serves (issue 17). An edge keeps serving
 * a tunnel until its last renewal's start + lease TTL − margin (src/edge/cluster/registry.ts), so nobody
 * else may be granted the name before then. A same-account takeover through another edge skips the
 * release call when the holder's heartbeat is gone (`isGone`): with a heartbeat TTL shorter than the
 * lease's validity (10 s against 13 s by default), an edge that only lost Redis looked gone while it
 * still served, and the name was granted elsewhere: two edges served it at once. Now only a heartbeat of
 * another boot (or a refused connection) counts as gone; a missing one means asking the holder.
 *
 * Edge A reaches Redis through a TCP relay the test closes (a partition between A and Redis only); B
 * reaches Redis directly. Timings asked for: lease 6 s, margin 0.5 s, heartbeat 2 s, so A serves for
 * about 5.5 s after its last renewal; 3 s after the cut a client of the same account asks for the name
 * through B. Either B is refused, or A is asked over the hop and lets go first: never both serving.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, startClient, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { RedisRelay, publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

const TIMINGS = { leaseTtlMs: 6_000, renewEveryMs: 500, marginMs: 500, heartbeatTtlMs: 2_000 };

test("an edge cut off from Redis is not taken for gone while its leases are still valid: no second owner", {
  skip: redisSkip,
  timeout: 60_000,
}, async () => {
  const redis = await TestRedis.start();
  // A's way to Redis: a relay the test can cut.
  const relay = await RedisRelay.start(redis.port);
  const relayUrl = relay.url;

  const edges: TestEdge[] = [];
  const clients: TunnelClient[] = [];
  const first = await startNamed('first');
  const second = await startNamed('second');
  try {
    const a = await startClusterEdge(relayUrl, 'a', { clusterTimings: TIMINGS });
    edges.push(a);
    const b = await startClusterEdge(redis.url, 'b', { clusterTimings: TIMINGS });
    edges.push(b);
    const account = await createAccount(b);
    const onA = await startClient(a, account.token, first.port, { subdomain: 'cut-off' });
    clients.push(onA.client);
    assert.deepEqual(await publicGet(a, 'cut-off'), { status: 200, text: 'first' });

    // The partition: A loses Redis (and only Redis).
    relay.cut();
    // Past the heartbeat TTL asked for, well inside the lease's validity: A still serves.
    await new Promise((resolve) => setTimeout(resolve, TIMINGS.heartbeatTtlMs + 1_000));
    assert.deepEqual(await publicGet(a, 'cut-off'), { status: 200, text: 'first' }, 'A still serves its tunnel');

    // A second client of the same account takes the name over (--replace) through B.
    const onB = await startClient(b, account.token, second.port, { subdomain: 'cut-off', replace: true }).catch((error: Error) => error);
    if (!(onB instanceof Error)) clients.push(onB.client);
    const servedByA = a.edge.registry.session('cut-off') !== undefined;
    const servedByB = b.edge.registry.session('cut-off') !== undefined;
    assert.ok(!(servedByA && servedByB), `both edges serve cut-off at once (A answers ${JSON.stringify(await publicGet(a, 'cut-off'))}, B answers ${JSON.stringify(await publicGet(b, 'cut-off'))})`);
  } finally {
    for (const client of clients) await client.close();
    await first.close();
    await second.close();
    for (const edge of edges) await edge.close();
    await relay.close();
  }
});
