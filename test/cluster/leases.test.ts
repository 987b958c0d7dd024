/**
 * The lease registry across real edges on one real Redis: grace holds that hold on every edge, and
 * Redis going away under held tunnels and coming back.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { assertApiError, call, createAccount, startClient, waitFor } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { publicGet, refusedConnect, startClusterEdge, startNamed } from './cluster-helpers.js';

test("a dropped tunnel's name is held on every edge: another account is refused elsewhere until the grace period ends", { skip: redisSkip }, async () => {
  const redis = await TestRedis.start();
  const a = await startClusterEdge(redis.url, 'a', { graceMs: 1_500 });
  const b = await startClusterEdge(redis.url, 'b', { graceMs: 1_500 });
  const local = await startNamed('owner');
  try {
    const owner = await createAccount(a);
    const other = await createAccount(b);
    const started = await startClient(a, owner.token, local.port, { subdomain: 'held-name' });
    assert.deepEqual(await publicGet(a, 'held-name'), { status: 200, text: 'owner' });
    await started.client.close();
    await waitFor(() => a.edge.registry.session('held-name') === undefined, 2_000, 'the session to end');
    assertApiError(await refusedConnect(b, other.token, 'held-name'), 'SUBDOMAIN_TAKEN');
    assert.equal(await b.edge.registry.holderOf('held-name'), owner.id);
    // After the grace period the name is anyone's.
    const otherLocal = await startNamed('other');
    try {
      await waitFor(async () => (await b.edge.registry.holderOf('held-name')) === undefined, 5_000, 'the hold to expire');
      const taken = await startClient(b, other.token, otherLocal.port, { subdomain: 'held-name' });
      assert.deepEqual(await publicGet(b, 'held-name'), { status: 200, text: 'other' });
      assertApiError(await refusedConnect(a, owner.token, 'held-name'), 'SUBDOMAIN_TAKEN');
      await taken.client.close();
    } finally {
      await otherLocal.close();
    }
  } finally {
    await local.close();
    await a.close();
    await b.close();
  }
});

test('Redis killed and restarted: held tunnels keep answering, connects get 503 meanwhile, then work again by themselves', { skip: redisSkip }, async () => {
  const redis = await TestRedis.start();
  // Leases of 10 s, served for 9 s after each renewal: longer than the outage below.
  const timings = { leaseTtlMs: 10_000, renewEveryMs: 300, marginMs: 1_000, heartbeatTtlMs: 5_000 };
  const a = await startClusterEdge(redis.url, 'a', { clusterTimings: timings });
  const b = await startClusterEdge(redis.url, 'b', { clusterTimings: timings });
  const local = await startNamed('steady');
  try {
    const account = await createAccount(a);
    const steady = await startClient(a, account.token, local.port, { subdomain: 'steady' });
    await redis.kill();
    const outageEnds = Date.now() + 2_000;
    let answered = 0;
    while (Date.now() < outageEnds) {
      assert.deepEqual(await publicGet(a, 'steady', `/during-outage-${answered}`), { status: 200, text: 'steady' });
      answered++;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const refusal = await refusedConnect(a, account.token, 'while-down');
    assertApiError(refusal, 'STORE_UNAVAILABLE');
    assert.equal(refusal.status, 503);
    assert.match(String(refusal.headers['retry-after']), /^[1-9][0-9]*$/);
    // Account changes are refused the same way, in the spec's error shape.
    const change = await call(b, 'POST', '/api/v1/tokens', { token: account.token, body: { label: 'while-down' } });
    assertApiError(change, 'STORE_UNAVAILABLE');
    assert.match(String(change.headers['retry-after']), /^[1-9][0-9]*$/);
    await redis.restart();
    // The edges were not restarted: their connections come back, and so do connects.
    let fresh: Awaited<ReturnType<typeof startClient>> | undefined;
    await waitFor(
      async () => {
        fresh = await startClient(a, account.token, local.port, { subdomain: 'after-restart' }).catch(() => undefined);
        return fresh !== undefined;
      },
      10_000,
      'a connect after Redis is back',
    );
    assert.deepEqual(await publicGet(a, 'after-restart'), { status: 200, text: 'steady' });
    assert.deepEqual(await publicGet(a, 'steady', '/after-outage'), { status: 200, text: 'steady' });
    // Renewals run again: the tunnel stays served past the validity it had when Redis went away.
    assert.equal((await b.edge.cluster!.ownerOf('steady'))?.nodeId, 'a');
    await fresh!.client.close();
    await steady.client.close();
  } finally {
    await local.close();
    await a.close();
    await b.close();
  }
});

test('a lease that expired while Redis was away is claimed again for its tunnel when Redis is back', { skip: redisSkip }, async () => {
  const redis = await TestRedis.start();
  const timings = { leaseTtlMs: 1_500, renewEveryMs: 200, marginMs: 300, heartbeatTtlMs: 1_000 };
  const a = await startClusterEdge(redis.url, 'a', { clusterTimings: timings });
  const local = await startNamed('comeback');
  let started: Awaited<ReturnType<typeof startClient>> | undefined;
  try {
    const account = await createAccount(a);
    started = await startClient(a, account.token, local.port, { subdomain: 'comeback' });
    const fence = a.edge.cluster!.fenceOf('comeback')!;
    await redis.kill();
    // Past its local validity the edge stops serving the tunnel (it could be someone else's by now).
    // (The miss then asks Redis who holds the name: 503 STORE_UNAVAILABLE while it is away.)
    await waitFor(async () => (await publicGet(a, 'comeback')).status === 503, 5_000, 'the edge to stop serving an unrenewed lease');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await redis.restart();
    await waitFor(async () => (await publicGet(a, 'comeback')).status === 200, 10_000, 'the tunnel to be served again');
    assert.ok(a.edge.cluster!.fenceOf('comeback')! > fence, 'a new grant, with a larger fence');
  } finally {
    // Closed even when an assertion failed: a client left reconnecting keeps the test file alive.
    await started?.client.close();
    await local.close();
    await a.close();
  }
});

test("an edge that shuts down leaves its tunnels' names held for their accounts, not free", { skip: redisSkip }, async () => {
  const redis = await TestRedis.start();
  const a = await startClusterEdge(redis.url, 'a', { graceMs: 30_000 });
  const b = await startClusterEdge(redis.url, 'b', { graceMs: 30_000 });
  const local = await startNamed('owner');
  try {
    const owner = await createAccount(a);
    const stranger = await createAccount(b);
    const started = await startClient(a, owner.token, local.port, { subdomain: 'outlives-its-edge' });
    await a.close();
    const lease = await b.edge.cluster!.ownerOf('outlives-its-edge');
    assert.equal(lease, null, 'no edge serves it');
    assert.equal(await b.edge.registry.holderOf('outlives-its-edge'), owner.id);
    assertApiError(await refusedConnect(b, stranger.token, 'outlives-its-edge'), 'SUBDOMAIN_TAKEN');
    await started.client.close();
  } finally {
    await local.close();
    await a.close();
    await b.close();
  }
});
