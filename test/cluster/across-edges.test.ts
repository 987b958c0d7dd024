/**
 * Three real edges on one real Redis, sharing accounts (RedisStore) and the lease registry: what one edge
 * does, the others see and enforce.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import type { ClosedInfo } from '../../src/client/tunnel-client.js';
import { assertApiError, call, createAccount, startClient, waitFor, type LocalServer, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { publicGet, refusedConnect, startClusterEdge, startNamed } from './cluster-helpers.js';

// TestRedis.start registers its own after(): started at the top level, not in a hook (which would stop it at the hook's end).
const redis = redisSkip === false ? await TestRedis.start() : null;

describe('three edges, one cluster', { skip: redisSkip }, () => {
  let a: TestEdge;
  let b: TestEdge;
  let c: TestEdge;
  let local: LocalServer;
  let other: LocalServer;

  before(async () => {
    // FREE allows two tunnels here, so the cap is reached with one tunnel on each of two edges.
    const options = { plans: { FREE: { activeTunnels: 2 } }, graceMs: 2_000 };
    a = await startClusterEdge(redis!.url, 'a', options);
    b = await startClusterEdge(redis!.url, 'b', options);
    c = await startClusterEdge(redis!.url, 'c', options);
    local = await startNamed('first');
    other = await startNamed('second');
  });

  after(async () => {
    await local.close();
    await other.close();
    await Promise.all([a.close(), b.close(), c.close()]);
  });

  test('a token created on B authenticates on C; the same accounts and tokens everywhere', async () => {
    const account = await createAccount(a);
    const created = await call(b, 'POST', '/api/v1/tokens', { token: account.token, body: { label: 'made on b' } });
    assert.equal(created.status, 201);
    const me = await call(c, 'GET', '/api/v1/auth/me', { token: created.json.token });
    assert.equal(me.status, 200);
    assert.equal(me.json.id, account.id);
    const listed = await call(a, 'GET', '/api/v1/tokens', { token: created.json.token });
    assert.deepEqual(listed.json.tokens.map((token: { label: string }) => token.label).sort(), ['made on b', 'test']);
  });

  test('the tunnel cap holds across edges, and a closed tunnel frees its slot everywhere', async () => {
    const account = await createAccount(a);
    const first = await startClient(a, account.token, local.port);
    const second = await startClient(b, account.token, local.port);
    assertApiError(await refusedConnect(c, account.token, 'third-tunnel'), 'TUNNEL_LIMIT_REACHED');
    const listed = await call(c, 'GET', '/api/v1/tunnels', { token: account.token });
    assert.deepEqual(listed.json.tunnels.map((tunnel: { subdomain: string }) => tunnel.subdomain).sort(), [first.subdomain, second.subdomain].sort());
    // Taking its own name over on another edge is not a third tunnel.
    const moved = await startClient(c, account.token, other.port, { subdomain: first.subdomain, replace: true });
    assert.deepEqual(await publicGet(c, first.subdomain), { status: 200, text: 'second' });
    await moved.client.close();
    await waitFor(async () => (await call(b, 'GET', '/api/v1/tunnels', { token: account.token })).json.tunnels.length === 1, 3_000, 'the slot to free');
    const third = await startClient(c, account.token, local.port, { subdomain: 'third-tunnel' });
    await Promise.all([first.client.close(), second.client.close(), third.client.close()]);
  });

  test('a takeover through another edge (--replace) moves the name: the old session gets REPLACED, the new edge serves', async () => {
    const account = await createAccount(a);
    const old = await startClient(a, account.token, local.port, { subdomain: 'moving-name' });
    const replaced = once(old.client, 'closed') as Promise<[ClosedInfo]>;
    const fresh = await startClient(b, account.token, other.port, { subdomain: 'moving-name', replace: true });
    const [info] = await replaced;
    assert.equal(info.code, 'REPLACED');
    assert.equal(a.edge.registry.session('moving-name'), undefined);
    assert.deepEqual(await publicGet(b, 'moving-name'), { status: 200, text: 'second' });
    // C learns of the move by pub/sub, which is not part of B's grant: it may arrive after B already serves.
    await waitFor(async () => (await c.edge.cluster!.ownerOf('moving-name'))?.nodeId === 'b', 3_000, 'C to learn the new owner');
    // The other edges forward to the new owner (the hop asks the registry, whose cache the move cleared).
    assert.deepEqual(await publicGet(a, 'moving-name', '/via-a'), { status: 200, text: 'second' });
    assert.deepEqual(await publicGet(c, 'moving-name', '/via-c'), { status: 200, text: 'second' });
    await fresh.client.close();
  });

  test("the grace hold across edges: another account can't take a dropped name anywhere, its owner can", async () => {
    const owner = await createAccount(a);
    const stranger = await createAccount(b);
    const started = await startClient(a, owner.token, local.port, { subdomain: 'graced-name' });
    await started.client.close();
    await waitFor(() => a.edge.registry.session('graced-name') === undefined, 2_000, 'the session to end');
    assertApiError(await refusedConnect(c, stranger.token, 'graced-name'), 'SUBDOMAIN_TAKEN');
    const back = await startClient(b, owner.token, other.port, { subdomain: 'graced-name' });
    assert.deepEqual(await publicGet(b, 'graced-name'), { status: 200, text: 'second' });
    await back.client.close();
  });

  test('closing the tunnel through the API on C ends it on A', async () => {
    const account = await createAccount(a);
    const started = await startClient(a, account.token, local.port, { subdomain: 'close-me' });
    const closed = once(started.client, 'closed') as Promise<[ClosedInfo]>;
    assert.deepEqual(await publicGet(c, 'close-me', '/via-c'), { status: 200, text: 'first' });
    const answer = await call(c, 'DELETE', '/api/v1/tunnels/close-me', { token: account.token });
    assert.equal(answer.status, 204);
    const [info] = await closed;
    assert.equal(info.code, 'CLOSED_BY_API');
    await waitFor(() => a.edge.registry.session('close-me') === undefined, 2_000, 'the session to end on A');
    assertApiError(await call(b, 'GET', '/api/v1/tunnels/close-me', { token: account.token }), 'NOT_FOUND');
    // Closed for good: no grace hold, the name is anyone's at once.
    const stranger = await createAccount(b);
    const taken = await startClient(b, stranger.token, other.port, { subdomain: 'close-me' });
    await taken.client.close();
  });

  test("revoking the token on B closes its tunnels on A", async () => {
    const account = await createAccount(a);
    const created = await call(c, 'POST', '/api/v1/tokens', { token: account.token, body: { label: 'to revoke' } });
    const started = await startClient(a, created.json.token, local.port, { subdomain: 'revoke-me' });
    const closed = once(started.client, 'closed') as Promise<[ClosedInfo]>;
    const answer = await call(b, 'DELETE', `/api/v1/tokens/${created.json.id}`, { token: account.token });
    assert.equal(answer.status, 204);
    const [info] = await closed;
    assert.equal(info.code, 'TOKEN_REVOKED');
    await waitFor(() => a.edge.registry.session('revoke-me') === undefined, 2_000, 'the session to end on A');
    assertApiError(await refusedConnect(c, created.json.token, 'revoke-me'), 'UNAUTHORIZED');
  });
});
