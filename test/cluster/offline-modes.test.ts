/**
 * Offline modes in cluster mode (issue 28, item 4; docs/offline.md, "In cluster mode"). Before, a cluster
 * edge refused `reject` and `queue` (held events lived in the LMDB of the edge that took them); now
 * held events live in one Redis stream per name, so any edge takes them and the edge holding the tunnel
 * when it comes back delivers them.
 *
 * Two edges on one real Redis: `reject` answers 503 TUNNEL_UNAVAILABLE with Retry-After through either
 * edge; `queue` holds requests sent to either edge (202 with Burrow-Event-Id), a sender's retry (same
 * Idempotency-Key, same body) sent to the other edge is answered as a duplicate with the same event id,
 * the name's bound answers 503 QUEUE_FULL with Retry-After, and a client connecting to the other edge
 * gets every held event once, in the order they were held, with the event id and the delivery number;
 * a live request sent meanwhile waits behind them; once the queue is empty live requests pass again.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { request } from 'undici';
import { call, createAccount, readBody, startClient, startLocal, waitFor, type TestEdge } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { startClusterEdge } from './cluster-helpers.js';

const redis = redisSkip === false ? await TestRedis.start() : null;
const BOUND = 5;

async function post(edge: TestEdge, subdomain: string, body: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; json: any }> {
  const response = await request(`${edge.base}/hook`, { method: 'POST', body, headers: { host: `${subdomain}.localhost:${edge.port}`, 'content-type': 'application/json', ...headers } });
  const text = await response.body.text();
  return { status: response.statusCode, headers: response.headers, json: text.startsWith('{') ? JSON.parse(text) : text };
}

test('a cluster holds webhooks for a reserved name in queue mode on any edge, and the edge holding the tunnel delivers them in order, once', { skip: redisSkip, timeout: 60_000 }, async () => {
  const plans = { FREE: { queuedEvents: BOUND } };
  const a = await startClusterEdge(redis!.url, 'offline-a', { plans });
  const b = await startClusterEdge(redis!.url, 'offline-b', { plans });
  const got: { body: string; event: string; delivery: string }[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      got.push({ body: body.toString(), event: String(req.headers['burrow-event-id']), delivery: String(req.headers['burrow-delivery']) });
      // Slow enough that a live request sent during the delivery finds events still held.
      setTimeout(() => res.end('ok'), 50);
    });
  });
  try {
    const account = await createAccount(a);
    const rejecting = await call(a, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'held-reject', offline: 'reject' } });
    assert.equal(rejecting.status, 201, rejecting.text);
    for (const edge of [a, b]) {
      const refused = await post(edge, 'held-reject', '{}');
      assert.equal(refused.status, 503);
      assert.equal(refused.json.error.code, 'TUNNEL_UNAVAILABLE');
      assert.equal(refused.headers['retry-after'], '60');
    }

    const queued = await call(b, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'held-queue', offline: 'queue' } });
    assert.equal(queued.status, 201, queued.text);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const held = await post(i % 2 === 0 ? a : b, 'held-queue', `{"n":${i}}`, { 'idempotency-key': `key-${i}` });
      assert.equal(held.status, 202, JSON.stringify(held.json));
      assert.equal(held.headers['burrow-event-id'], held.json.event_id);
      assert.deepEqual({ state: held.json.state, duplicate: held.json.duplicate }, { state: 'queued', duplicate: false });
      ids.push(held.json.event_id);
    }
    // The sender's retry through the other edge: the same event.
    const retry = await post(b, 'held-queue', '{"n":0}', { 'idempotency-key': 'key-0' });
    assert.equal(retry.status, 202);
    assert.deepEqual({ id: retry.json.event_id, duplicate: retry.json.duplicate }, { id: ids[0], duplicate: true });
    // The same key with another body is not a duplicate (anyone can send any key).
    const other = await post(a, 'held-queue', '{"n":4}', { 'idempotency-key': 'key-0' });
    assert.equal(other.status, 202);
    assert.equal(other.json.duplicate, false);
    ids.push(other.json.event_id);
    // The bound of the name: 5 events.
    const full = await post(b, 'held-queue', '{"n":5}');
    assert.equal(full.status, 503);
    assert.equal(full.json.error.code, 'QUEUE_FULL');
    assert.equal(full.headers['retry-after'], '60');
    assert.match(full.json.error.message, /limit of 5 events/);

    // The API lists them from any edge; the queue's other routes are not there in cluster mode yet.
    const listing = await call(a, 'GET', '/api/v1/queue?subdomain=held-queue', { token: account.token });
    assert.equal(listing.status, 200, listing.text);
    assert.equal(listing.json.events, 5);
    assert.deepEqual(listing.json.queue.map((event: { id: string; state: string }) => [event.id, event.state]), ids.map((id) => [id, 'queued']));
    const pause = await call(b, 'POST', '/api/v1/queue/pause?subdomain=held-queue', { token: account.token });
    assert.equal(pause.status, 400);
    assert.match(pause.json.error.message, /not available in cluster mode yet/);

    // The tunnel comes back on the other edge: every event once, in order.
    const { client } = await startClient(b, account.token, local.port, { subdomain: 'held-queue' });
    try {
      // A live request while events are still held waits behind them (through the edge without the tunnel too).
      await waitFor(() => got.length >= 2, 10_000, 'the delivery under way');
      const live = await post(a, 'held-queue', '{"n":"live"}');
      assert.equal(live.status, 202, JSON.stringify(live.json));
      ids.push(live.json.event_id);
      await waitFor(() => got.length >= 6, 10_000, 'the held events delivered');
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.deepEqual(got.map((entry) => entry.body), [...[0, 1, 2, 3, 4].map((n) => `{"n":${n}}`), '{"n":"live"}']);
      assert.deepEqual(got.map((entry) => entry.event), ids);
      assert.ok(got.every((entry) => entry.delivery === '1'));
      // Delivered events leave the queue: there is room again.
      const room = await post(a, 'held-queue', '{"n":6}');
      assert.equal(room.status, 200, 'a live tunnel answers now');
      // Replaying a delivery is a new request: it reaches the local server, without the event's id.
      const listed = await call(a, 'GET', '/api/v1/requests?subdomain=held-queue&limit=100', { token: account.token });
      // Newest first: the oldest capture is the first event's delivery.
      const delivery = (listed.json.requests as { id: string }[]).at(-1)!;
      const replayed = await call(a, 'POST', `/api/v1/requests/${delivery.id}/replay`, { token: account.token, body: {} });
      assert.equal(replayed.status, 200, replayed.text);
      await waitFor(() => got.length >= 8, 5_000, 'the replay at the local server');
      assert.deepEqual(got[7], { body: '{"n":0}', event: 'undefined', delivery: '1' });
    } finally {
      await client.close();
    }
    const listed = await call(b, 'GET', '/api/v1/reserved-subdomains', { token: account.token });
    assert.deepEqual(
      listed.json.reserved_subdomains.map((r: { subdomain: string; offline: string }) => [r.subdomain, r.offline]).sort(),
      [['held-queue', 'queue'], ['held-reject', 'reject']],
    );
  } finally {
    await Promise.all([a.close(), b.close()]);
    await local.close();
  }
});

test('an event held longer than the plan allows is dropped when its turn comes, never delivered', { skip: redisSkip, timeout: 30_000 }, async () => {
  const a = await startClusterEdge(redis!.url, 'expiry-a', { plans: { FREE: { queueMaxAgeMs: 200 } } });
  const got: string[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      got.push(body.toString());
      res.end('ok');
    });
  });
  try {
    const account = await createAccount(a);
    assert.equal((await call(a, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'aged-queue', offline: 'queue' } })).status, 201);
    assert.equal((await post(a, 'aged-queue', '{"n":"old"}')).status, 202);
    await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal((await post(a, 'aged-queue', '{"n":"new"}')).status, 202);
    const { client } = await startClient(a, account.token, local.port, { subdomain: 'aged-queue' });
    try {
      await waitFor(() => got.length >= 1, 10_000, 'the young event delivered');
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepEqual(got, ['{"n":"new"}']);
      assert.match(await redis!.command('XRANGE', 'burrow:cluster:q:aged-queue:failed', '-', '+'), /expired: held longer than 200 ms/);
    } finally {
      await client.close();
    }
  } finally {
    await a.close();
    await local.close();
  }
});


test("releasing a name drops what it held and gives the account's bounds back", { skip: redisSkip, timeout: 30_000 }, async () => {
  const a = await startClusterEdge(redis!.url, 'release-a');
  try {
    const account = await createAccount(a);
    assert.equal((await call(a, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'released-queue', offline: 'queue' } })).status, 201);
    for (let i = 0; i < 3; i++) assert.equal((await post(a, 'released-queue', `{"n":${i}}`)).status, 202);
    assert.match(await redis!.command('HGET', `burrow:cluster:q:acct:${account.id}`, 'events'), /\r\n3\r\n/);
    assert.equal((await call(a, 'DELETE', '/api/v1/reserved-subdomains/released-queue', { token: account.token })).status, 204);
    await waitFor(async () => /^:0\r\n/.test(await redis!.command('XLEN', 'burrow:cluster:q:released-queue')), 5_000, 'the stream dropped');
    assert.match(await redis!.command('HGET', `burrow:cluster:q:acct:${account.id}`, 'events'), /\r\n0\r\n/);
  } finally {
    await a.close();
  }
});
