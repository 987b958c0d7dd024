/**
 * Redis down (issue 28, item 1): three edges, a tunnel on each, steady traffic for every tunnel sent to
 * every edge; Redis is killed for 20 s and started again on its data.
 *
 * Before: an edge that did not hold the tunnel looked its owner up in Redis per request (cached 1 s), so
 * from the first second of the outage every request it had to forward failed with 503, and after Redis
 * came back requests were answered 404 TUNNEL_NOT_FOUND until the owner's next renewal round (up to 3 s,
 * after ioredis' reconnect delay of up to 2 s) claimed again the lease that had expired meanwhile: the
 * other edges read "no lease" and the owner itself read its own lapsed lease as "not mine".
 *
 * Now: every edge keeps the last-known owner of every name, pushed by Redis itself (the lease scripts
 * publish each grant, release and renewal round), so requests to any edge reach the owner for as long
 * as its lease is valid; past that an owner that still has the session answers 503 STORE_UNAVAILABLE
 * (never 404), and once Redis is back it renews (or claims again) at once. Checked: every request sent
 * inside the validity window is answered 200 by the right local server, no request is answered 404 after
 * Redis is back, the traffic is all 200 again, the clients were never disconnected, and each edge said
 * once that the store was unavailable and once that it recovered ('store-status').
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import type { StoreStatus } from '../../src/edge/cluster/registry.js';
import { createAccount, startClient, waitFor, type LocalServer, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { startClusterEdge, startNamed, steadyLoad, tally } from './cluster-helpers.js';

/** Leases of 10 s, renewed every second, served until 9 s after a renewal's start. */
const TIMINGS = { leaseTtlMs: 10_000, renewEveryMs: 1_000, marginMs: 1_000, heartbeatTtlMs: 5_000 };
/** Every lease is valid at least this long after the kill (its last renewal started at most a round, plus the round's own time, before). */
const VALID_AFTER_KILL_MS = TIMINGS.leaseTtlMs - TIMINGS.marginMs - TIMINGS.renewEveryMs - 500;
const OUTAGE_MS = 20_000;
const NAMES = ['down-a', 'down-b', 'down-c'];

test('Redis down 20 s under load on three edges: held tunnels answer through every edge while their leases are valid, and no 404 after Redis returns', {
  skip: redisSkip,
  timeout: 120_000,
}, async () => {
  const redis = await TestRedis.start();
  const edges: TestEdge[] = [];
  const clients: TunnelClient[] = [];
  const locals: LocalServer[] = [];
  try {
    for (const nodeId of ['a', 'b', 'c']) edges.push(await startClusterEdge(redis.url, nodeId, { clusterTimings: TIMINGS }));
    const statuses: StoreStatus[][] = edges.map(() => []);
    edges.forEach((edge, i) => edge.edge.cluster!.on('store-status', (status: StoreStatus) => statuses[i]!.push(status)));
    const account = await createAccount(edges[0]!);
    let reconnects = 0;
    for (let i = 0; i < NAMES.length; i++) {
      const local = await startNamed(NAMES[i]!);
      locals.push(local);
      const started = await startClient(edges[i]!, account.token, local.port, { subdomain: NAMES[i]! });
      started.client.on('reconnecting', () => reconnects++);
      clients.push(started.client);
    }
    // Every edge knows every owner before the outage.
    await waitFor(async () => {
      for (const edge of edges) for (const name of NAMES) if ((await edge.edge.cluster!.ownerOf(name).catch(() => null)) === null) return false;
      return true;
    }, 5_000, 'every edge to know every owner');

    const load = steadyLoad(edges, NAMES, 20);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const killedAt = performance.now();
    await redis.kill();
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
    await redis.restart();
    const backAt = performance.now();
    // Traffic goes on until every edge has answered every tunnel with 200 for a while.
    await waitFor(() => {
      const recent = load.outcomes.filter((outcome) => outcome.sentAt > performance.now() - 1_000);
      return recent.length > 0 && recent.every((outcome) => outcome.status === 200);
    }, 15_000, 'all traffic to be answered 200 again');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const outcomes = await load.stop();

    const before = outcomes.filter((outcome) => outcome.sentAt < killedAt);
    const inValidity = outcomes.filter((outcome) => outcome.sentAt >= killedAt && outcome.sentAt < killedAt + VALID_AFTER_KILL_MS);
    const lapsed = outcomes.filter((outcome) => outcome.sentAt >= killedAt + VALID_AFTER_KILL_MS && outcome.sentAt < backAt);
    const after = outcomes.filter((outcome) => outcome.sentAt >= backAt);
    const report = JSON.stringify({ before: tally(before), inValidity: tally(inValidity), lapsed: tally(lapsed), after: tally(after) });
    assert.ok(inValidity.length > 100, `enough traffic inside the validity window: ${report}`);
    for (const outcome of [...before, ...inValidity]) {
      assert.equal(outcome.status, 200, `${outcome.path} (sent ${Math.round(outcome.sentAt - killedAt)} ms after the kill): ${outcome.code}; ${report}`);
      assert.equal(outcome.text, outcome.subdomain, `${outcome.path} reached its own local server`);
    }
    for (const outcome of after) {
      assert.notEqual(outcome.status, 404, `${outcome.path} (sent ${Math.round(outcome.sentAt - backAt)} ms after Redis was back): 404 ${outcome.code}; ${report}`);
    }
    // Past the validity the owners stop serving (they cannot renew): refused as unavailable, never as unknown.
    for (const outcome of lapsed) assert.ok(outcome.status === 200 || outcome.status === 503, `${outcome.path}: ${outcome.status} ${outcome.code}; ${report}`);
    assert.equal(reconnects, 0, 'the clients stayed connected: Redis was down for every edge, moving would not help');
    for (const [i, seen] of statuses.entries()) {
      assert.deepEqual(seen.map((status) => status.available), [false, true], `edge ${i} said unavailable once and recovered once`);
    }
    const lastRefusal = Math.max(0, ...after.filter((outcome) => outcome.status !== 200).map((outcome) => outcome.answeredAt - backAt));
    console.log(`# issue 28 Redis down: ${report}; the last refusal after Redis was back answered ${Math.round(lastRefusal)} ms after it`);
  } finally {
    for (const client of clients) await client.close();
    for (const local of locals) await local.close();
    for (const edge of edges) await edge.close();
  }
});
