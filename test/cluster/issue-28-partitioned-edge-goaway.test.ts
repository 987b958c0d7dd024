/**
 * A partitioned edge tells its clients to move (issue 28, item 5). Edge A reaches Redis through a relay
 * the test cuts (a lost network: calls hang, nothing is refused); B and C reach it directly. A tunnel
 * client whose edges are A then B is connected to A, and traffic for its tunnel goes to all three edges.
 *
 * Before: A kept the session while its lease lapsed, served nothing (rightly), and the client stayed on
 * A until the partition healed; the tunnel was down meanwhile. Now: when the lease lapses, A asks B and
 * C whether they reach the store; they do, so A is the one cut off and sends GOAWAY STORE_UNREACHABLE;
 * the client moves to B at once, B takes the name over (A answers the release call that it does not
 * hold it any more), and the tunnel answers through every edge again. Checked as well: at no instant two
 * edges serve the name (every edge is in this process, so a look at every registry is one instant), A
 * never serves the name after its lease lapsed, and after the partition heals A forwards to B.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, waitFor, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { RedisRelay, publicGet, startClusterEdge, startNamed } from './cluster-helpers.js';

const TIMINGS = { leaseTtlMs: 4_000, renewEveryMs: 500, marginMs: 500, heartbeatTtlMs: 2_000 };
const NAME = 'partitioned';

test('an edge cut off from Redis alone sends its lapsed sessions GOAWAY STORE_UNREACHABLE: the client moves at once and is served through every edge', {
  skip: redisSkip,
  timeout: 90_000,
}, async () => {
  const redis = await TestRedis.start();
  const relay = await RedisRelay.start(redis.port);
  const edges: TestEdge[] = [];
  const local = await startNamed('the-app');
  let client: TunnelClient | null = null;
  let watch: NodeJS.Timeout | null = null;
  try {
    edges.push(await startClusterEdge(relay.url, 'a', { clusterTimings: TIMINGS }));
    edges.push(await startClusterEdge(redis.url, 'b', { clusterTimings: TIMINGS }));
    edges.push(await startClusterEdge(redis.url, 'c', { clusterTimings: TIMINGS }));
    const [a, b, c] = edges as [TestEdge, TestEdge, TestEdge];
    const account = await createAccount(b);
    client = new TunnelClient({ edge: [a.url, b.url], token: account.token, routes: new RouteTable(local.port), subdomain: NAME, minBackoffMs: 50, maxBackoffMs: 500 });
    const reconnects: { reason: string; delayMs: number; edge: string }[] = [];
    client.on('reconnecting', (event: { reason: string; delayMs: number; edge: string }) => reconnects.push(event));
    await client.start();
    await waitFor(async () => (await Promise.all(edges.map((edge) => publicGet(edge, NAME)))).every((answer) => answer.status === 200), 5_000, 'every edge to answer the tunnel');

    // One instant at a time: how many edges serve the name, and whether A serves it after its lease lapsed.
    let mostServing = 0;
    let lapsedAt = -1;
    let aServedAfterLapse = false;
    watch = setInterval(() => {
      const serving = edges.filter((edge) => edge.edge.registry.session(NAME) !== undefined);
      mostServing = Math.max(mostServing, serving.length);
      if (lapsedAt < 0 && a.edge.cluster!.lapsed(NAME)) lapsedAt = performance.now();
      if (lapsedAt >= 0 && serving.includes(a)) aServedAfterLapse = true;
    }, 2);

    relay.cut();
    // The client is told to go, tries B at once, and B takes the name over.
    await waitFor(() => b.edge.registry.session(NAME) !== undefined, 20_000, 'the tunnel to be served by B');
    const moved = reconnects[0];
    assert.ok(moved !== undefined, 'the client reconnected');
    assert.match(moved.reason, /lost the cluster store/, 'the GOAWAY reason reached the client');
    assert.equal(moved.delayMs, 0, 'at once, to the next edge');
    assert.ok(moved.edge.includes(String(b.port)), `to B, not ${moved.edge}`);
    // B and C serve it; A cannot know the owner while cut off: 503, never its own stale session.
    assert.deepEqual(await publicGet(b, NAME), { status: 200, text: 'the-app' });
    assert.deepEqual(await publicGet(c, NAME), { status: 200, text: 'the-app' });
    const fromA = await publicGet(a, NAME);
    assert.equal(fromA.status, 503, `A answers ${JSON.stringify(fromA)}`);

    relay.heal();
    // Healed: A is in step with Redis again and forwards to B.
    await waitFor(async () => (await publicGet(a, NAME)).status === 200, 15_000, 'A to forward the tunnel to B');
    clearInterval(watch);
    watch = null;
    assert.ok(lapsedAt >= 0, "A's lease lapsed while it was cut off");
    assert.equal(aServedAfterLapse, false, 'A never served the name after its lease lapsed');
    assert.ok(mostServing <= 1, `${mostServing} edges served ${NAME} at once`);
    assert.equal(reconnects.length, 1, `one move: ${JSON.stringify(reconnects)}`);
  } finally {
    if (watch !== null) clearInterval(watch);
    await client?.close();
    await local.close();
    for (const edge of edges) await edge.close();
    await relay.close();
  }
});
