/**
 * Offline modes of reserved subdomains (issue 18, docs/offline.md), in-process: `off` answers as
 * before, `reject` 503 with Retry-After, `queue` 202 with an event id; duplicates, limits, ordering
 * behind the queue, retries and parking, redelivery. Real edge, real client, real local server.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { test } from 'node:test';
import { assertApiError, call, callPastQueue, createAccount, freePort, readBody, tempDir, startClient, startEdge, startLocal, waitFor, type TestEdge } from '../helpers.js';

interface Received {
  path: string;
  delivery: string | undefined;
  receivedAt: string | undefined;
  body: Buffer;
}

async function reserve(target: TestEdge, token: string, subdomain: string, offline?: string): Promise<void> {
  const response = await call(target, 'POST', '/api/v1/reserved-subdomains', { token, body: offline === undefined ? { subdomain } : { subdomain, offline } });
  assert.ok(response.status === 201 || response.status === 200, response.text);
}

test('off answers 404 TUNNEL_NOT_FOUND as before; reject answers 503 with Retry-After', async () => {
  const target = await startEdge();
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'quiet-off');
    await reserve(target, account.token, 'quiet-reject', 'reject');
    const off = await call(target, 'POST', '/hook', { host: `quiet-off.localhost:${target.port}`, rawBody: '{}' });
    assertApiError(off, 'TUNNEL_NOT_FOUND');
    const rejected = await call(target, 'POST', '/hook', { host: `quiet-reject.localhost:${target.port}`, rawBody: '{}' });
    assertApiError(rejected, 'TUNNEL_UNAVAILABLE');
    assert.equal(rejected.status, 503);
    assert.match(String(rejected.headers['retry-after']), /^[0-9]+$/);
    assert.equal(rejected.headers['burrow-error'], 'TUNNEL_UNAVAILABLE');
    // The mode is shown, and changed with PATCH (and back with a re-POST).
    const listed = await call(target, 'GET', '/api/v1/reserved-subdomains', { token: account.token });
    const modes = Object.fromEntries(listed.json.reserved_subdomains.map((r: { subdomain: string; offline: string }) => [r.subdomain, r.offline]));
    assert.deepEqual(modes, { 'quiet-off': 'off', 'quiet-reject': 'reject' });
    const patched = await call(target, 'PATCH', '/api/v1/reserved-subdomains/quiet-reject', { token: account.token, body: { offline: 'queue' } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.json.offline, 'queue');
    const bad = await call(target, 'PATCH', '/api/v1/reserved-subdomains/quiet-reject', { token: account.token, body: { offline: 'later' } });
    assertApiError(bad, 'INVALID_REQUEST');
    const queued = await call(target, 'POST', '/hook', { host: `quiet-reject.localhost:${target.port}`, rawBody: '{}' });
    assert.equal(queued.status, 202, queued.text);
    await reserve(target, account.token, 'quiet-reject', 'off');
    const offAgain = await call(target, 'POST', '/hook', { host: `quiet-reject.localhost:${target.port}`, rawBody: '{}' });
    assertApiError(offAgain, 'TUNNEL_NOT_FOUND');
  } finally {
    await target.close();
  }
});

test('queue: 202 with an event id, duplicates answered with the first id, full queue 503, 413 past the body limit', async () => {
  const target = await startEdge({ plans: { FREE: { queuedEvents: 3 } }, offlineQueue: { maxEventBody: 1000 } });
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'held', 'queue');
    const host = `held.localhost:${target.port}`;
    const first = await call(target, 'POST', '/gh', { host, rawBody: '{"a":1}', headers: { 'x-github-delivery': 'd-1' } });
    assert.equal(first.status, 202, first.text);
    assert.match(String(first.headers['burrow-event-id']), /^evt_[0-9a-f]{24}$/);
    assert.deepEqual(first.json, { event_id: first.headers['burrow-event-id'], state: 'queued', duplicate: false });
    const again = await call(target, 'POST', '/gh', { host, rawBody: '{"a":1}', headers: { 'x-github-delivery': 'd-1' } });
    assert.equal(again.status, 202);
    assert.equal(again.headers['burrow-event-id'], first.headers['burrow-event-id']);
    assert.equal(again.json.duplicate, true);
    const stripeBody = JSON.stringify({ id: 'evt_stripe_1', object: 'event', type: 'charge.succeeded' });
    const stripe = await call(target, 'POST', '/stripe', { host, rawBody: stripeBody, headers: { 'stripe-signature': 't=1,v1=x' } });
    const stripeAgain = await call(target, 'POST', '/stripe', { host, rawBody: stripeBody, headers: { 'stripe-signature': 't=2,v1=y' } });
    assert.equal(stripeAgain.headers['burrow-event-id'], stripe.headers['burrow-event-id']);
    const svix = await call(target, 'POST', '/svix', { host, rawBody: 'x', headers: { 'webhook-id': 'msg_1' } });
    assert.equal(svix.status, 202);
    const full = await call(target, 'POST', '/more', { host, rawBody: 'x' });
    assertApiError(full, 'QUEUE_FULL');
    assert.match(String(full.headers['retry-after']), /^[0-9]+$/);
    const big = await call(target, 'POST', '/big', { host, rawBody: Buffer.alloc(1001, 97) });
    assertApiError(big, 'PAYLOAD_TOO_LARGE');
    const listed = await call(target, 'GET', '/api/v1/queue?subdomain=held', { token: account.token });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.json.queue.map((e: { path: string }) => e.path), ['/gh', '/stripe', '/svix']);
    assert.deepEqual(listed.json.queue.map((e: { state: string }) => e.state), ['queued', 'queued', 'queued']);
    // Another account sees none of it.
    const other = await createAccount(target);
    assertApiError(await call(target, 'GET', '/api/v1/queue?subdomain=held', { token: other.token }), 'NOT_FOUND');
    assertApiError(await call(target, 'DELETE', `/api/v1/queue/${first.headers['burrow-event-id']}`, { token: other.token }), 'NOT_FOUND');
    // Discarding makes room.
    const discarded = await call(target, 'DELETE', `/api/v1/queue/${svix.headers['burrow-event-id']}`, { token: account.token });
    assert.equal(discarded.status, 204);
    assert.equal((await call(target, 'POST', '/more', { host, rawBody: 'x' })).status, 202);
    // Released, the name's held events go with it: the next account to reserve it gets none.
    assert.equal((await call(target, 'DELETE', '/api/v1/reserved-subdomains/held', { token: account.token })).status, 204);
    await reserve(target, other.token, 'held', 'queue');
    const inherited = await call(target, 'GET', '/api/v1/queue?subdomain=held', { token: other.token });
    assert.deepEqual([inherited.json.queue, inherited.json.events], [[], 0]);
    const reused = await call(target, 'POST', '/gh', { host, rawBody: '{"a":1}', headers: { 'x-github-delivery': 'd-1' } });
    assert.equal(reused.json.duplicate, false, 'the duplicate index went with the events');
  } finally {
    await target.close();
  }
});

test('delivery on connect: in order, byte-exact, with delivery headers; live requests wait behind the queue', async () => {
  const target = await startEdge();
  const received: Received[] = [];
  let release: (() => void) | null = null;
  const local = await startLocal((req, res) => {
    void readBody(req).then(async (body) => {
      received.push({ path: req.url!, delivery: req.headers['burrow-delivery'] as string | undefined, receivedAt: req.headers['burrow-received-at'] as string | undefined, body });
      // The first delivery is held a moment: a live request sent meanwhile must not overtake the queue.
      if (received.length === 1) await new Promise<void>((resolve) => (release = resolve));
      res.end('ok');
    });
  });
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'ordered', 'queue');
    const host = `ordered.localhost:${target.port}`;
    for (let i = 0; i < 5; i++) {
      const response = await call(target, 'POST', `/e/${i}`, { host, rawBody: Buffer.from([i, 0, 255, 13, 10]) });
      assert.equal(response.status, 202);
    }
    const { client } = await startClient(target, account.token, local.port, { subdomain: 'ordered' });
    try {
      await waitFor(() => received.length === 1, 5_000, 'first delivery');
      const live = await call(target, 'POST', '/live', { host, rawBody: 'live' });
      assert.equal(live.status, 202, 'a live request while the queue drains is queued behind it');
      release!();
      await waitFor(() => received.length === 6, 10_000, 'all deliveries');
      assert.deepEqual(received.map((r) => r.path), ['/e/0', '/e/1', '/e/2', '/e/3', '/e/4', '/live']);
      for (let i = 0; i < 5; i++) assert.deepEqual([...received[i]!.body], [i, 0, 255, 13, 10]);
      for (const r of received) {
        assert.equal(r.delivery, '1');
        assert.match(r.receivedAt ?? '', /^\d{4}-\d{2}-\d{2}T/);
      }
      // Drained: live traffic goes straight through again. (The API may show the last event delivered a
      // moment before the edge looked for a next one; a request in that moment is held, then delivered.)
      const direct = await callPastQueue(target, 'GET', '/direct', host);
      assert.equal(direct.status, 200);
      assert.equal(direct.text, 'ok');
      // Every attempt is a capture that names its event.
      const requests = await call(target, 'GET', '/api/v1/requests?subdomain=ordered&limit=100', { token: account.token });
      const captured = requests.json.requests as { id: string; path: string }[];
      const delivery = captured.find((c) => c.path === '/e/0')!;
      const detail = await call(target, 'GET', `/api/v1/requests/${delivery.id}`, { token: account.token });
      assert.match(detail.json.event_id, /^evt_/);
      assert.equal(detail.json.replay_of, null);
    } finally {
      await client.close();
    }
  } finally {
    await local.close();
    await target.close();
  }
});

test('a local 500 sets the event aside and retries it with backoff while the rest go on, then parks it as failed; deliver sends it again', async () => {
  const target = await startEdge({ offlineQueue: { retryDelaysMs: [20, 40, 80, 160] } });
  const received: Received[] = [];
  let broken = true;
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      received.push({ path: req.url!, delivery: req.headers['burrow-delivery'] as string | undefined, receivedAt: req.headers['burrow-received-at'] as string | undefined, body });
      res.statusCode = broken && req.url === '/e/4' ? 500 : 200;
      res.end();
    });
  });
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'flaky', 'queue');
    const host = `flaky.localhost:${target.port}`;
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push(String((await call(target, 'POST', `/e/${i}`, { host, rawBody: `event ${i}` })).headers['burrow-event-id']));
    const { client } = await startClient(target, account.token, local.port, { subdomain: 'flaky' });
    try {
      await waitFor(() => received.length === 12, 10_000, 'the rest delivered, the failing one tried five times');
      const paths = received.map((r) => r.path);
      // First attempts in arrival order; the retries of /e/4 fall wherever their backoff puts them.
      assert.deepEqual(paths.filter((path, i) => paths.indexOf(path) === i), ['/e/0', '/e/1', '/e/2', '/e/3', '/e/4', '/e/5', '/e/6', '/e/7']);
      assert.deepEqual(paths.filter((path) => path !== '/e/4'), ['/e/0', '/e/1', '/e/2', '/e/3', '/e/5', '/e/6', '/e/7']);
      assert.deepEqual(received.filter((r) => r.path === '/e/4').map((r) => r.delivery), ['1', '2', '3', '4', '5']);
      await waitFor(async () => (await call(target, 'GET', '/api/v1/queue?subdomain=flaky', { token: account.token })).json.queue[4].state === 'failed', 5_000, 'parked');
      const listed = await call(target, 'GET', '/api/v1/queue?subdomain=flaky', { token: account.token });
      const failed = listed.json.queue.find((e: { id: string }) => e.id === ids[4]);
      assert.equal(failed.state, 'failed');
      assert.equal(failed.attempts, 5);
      assert.equal(failed.last_status, 500);
      broken = false;
      const again = await call(target, 'POST', `/api/v1/queue/${ids[4]}/deliver`, { token: account.token });
      assert.equal(again.status, 202, again.text);
      await waitFor(() => received.length === 13, 5_000, 'redelivery');
      assert.equal(received[12]!.path, '/e/4');
      assert.equal(received[12]!.delivery, '6');
      assert.equal(received[12]!.body.toString(), 'event 4');
      await waitFor(async () => (await call(target, 'GET', '/api/v1/queue?subdomain=flaky', { token: account.token })).json.queue[4].state === 'delivered', 5_000, 'delivered');
    } finally {
      await client.close();
    }
  } finally {
    await local.close();
    await target.close();
  }
});

test('pause holds delivery and live requests; resume delivers them in order', async () => {
  const target = await startEdge();
  const paths: string[] = [];
  const local = await startLocal((req, res) => {
    paths.push(req.url!);
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'paused', 'queue');
    const host = `paused.localhost:${target.port}`;
    const pause = await call(target, 'POST', '/api/v1/queue/pause?subdomain=paused', { token: account.token });
    assert.equal(pause.status, 200, pause.text);
    assert.equal(pause.json.paused, true);
    assert.equal((await call(target, 'POST', '/a', { host, rawBody: 'a' })).status, 202);
    const { client } = await startClient(target, account.token, local.port, { subdomain: 'paused' });
    try {
      assert.equal((await call(target, 'POST', '/b', { host, rawBody: 'b' })).status, 202, 'held while paused, tunnel or not');
      assert.deepEqual(paths, []);
      const resume = await call(target, 'POST', '/api/v1/queue/resume?subdomain=paused', { token: account.token });
      assert.equal(resume.json.paused, false);
      await waitFor(() => paths.length === 2, 5_000, 'deliveries after resume');
      assert.deepEqual(paths, ['/a', '/b']);
    } finally {
      await client.close();
    }
  } finally {
    await local.close();
    await target.close();
  }
});

test('events older than the plan\'s age limit are dropped, counted as expired, and never delivered', async () => {
  const target = await startEdge({ plans: { FREE: { queueMaxAgeMs: 100 } }, offlineQueue: { expirySweepMs: 50 } });
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'stale', 'queue');
    const host = `stale.localhost:${target.port}`;
    assert.equal((await call(target, 'POST', '/old', { host, rawBody: 'old' })).status, 202);
    await waitFor(async () => (await call(target, 'GET', '/api/v1/queue?subdomain=stale', { token: account.token })).json.expired === 1, 5_000, 'expiry');
    const listed = await call(target, 'GET', '/api/v1/queue?subdomain=stale', { token: account.token });
    assert.deepEqual([listed.json.queue, listed.json.events, listed.json.bytes], [[], 0, 0]);
  } finally {
    await target.close();
  }
});

test('a full queue makes room by dropping delivered events, oldest first, never undelivered ones', async () => {
  const target = await startEdge({ plans: { FREE: { queuedEvents: 2 } } });
  const local = await startLocal((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'roomy', 'queue');
    const host = `roomy.localhost:${target.port}`;
    const post = async (path: string) => call(target, 'POST', path, { host, rawBody: path });
    const paths = async () => (await call(target, 'GET', '/api/v1/queue?subdomain=roomy', { token: account.token })).json.queue.map((e: { path: string; state: string }) => `${e.path}:${e.state}`);
    assert.equal((await post('/a')).status, 202);
    assert.equal((await post('/b')).status, 202);
    const { client } = await startClient(target, account.token, local.port, { subdomain: 'roomy' });
    await waitFor(async () => (await paths()).join() === '/a:delivered,/b:delivered', 5_000, 'delivered');
    await client.close();
    await waitFor(() => target.edge.registry.session('roomy') === undefined, 5_000, 'tunnel gone');
    assert.equal((await post('/c')).status, 202);
    assert.deepEqual(await paths(), ['/b:delivered', '/c:queued']);
    assert.equal((await post('/d')).status, 202);
    assert.deepEqual(await paths(), ['/c:queued', '/d:queued']);
    const full = await post('/e');
    assert.equal(full.status, 503);
    assert.equal(full.json.error.code, 'QUEUE_FULL');
  } finally {
    await local.close();
    await target.close();
  }
});

test('an unreachable local server: each event is retried, then parked failed with LOCAL_UNREACHABLE; redelivered once it listens', async () => {
  const target = await startEdge({ offlineQueue: { retryDelaysMs: [10, 20] } });
  const port = await freePort();
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'nobody-home', 'queue');
    const host = `nobody-home.localhost:${target.port}`;
    const ids: string[] = [];
    for (const path of ['/a', '/b']) ids.push(String((await call(target, 'POST', path, { host, rawBody: path })).headers['burrow-event-id']));
    const { client } = await startClient(target, account.token, port, { subdomain: 'nobody-home' });
    try {
      const queue = async () => (await call(target, 'GET', '/api/v1/queue?subdomain=nobody-home', { token: account.token })).json.queue as { state: string; attempts: number; last_error: string | null; last_status: number }[];
      await waitFor(async () => (await queue()).every((e) => e.state === 'failed'), 10_000, 'both parked');
      for (const event of await queue()) assert.deepEqual([event.attempts, event.last_error, event.last_status], [3, 'LOCAL_UNREACHABLE', 502]);
      const paths: string[] = [];
      const local = createServer((req, res) => {
        paths.push(req.url!);
        req.resume();
        req.on('end', () => res.end());
      });
      local.listen(port, '127.0.0.1');
      await once(local, 'listening');
      try {
        for (const id of ids) assert.equal((await call(target, 'POST', `/api/v1/queue/${id}/deliver`, { token: account.token })).status, 202);
        await waitFor(() => paths.length === 2, 5_000, 'redeliveries');
        assert.deepEqual(paths, ['/a', '/b']);
      } finally {
        local.closeAllConnections();
        await new Promise((resolve) => local.close(resolve));
      }
    } finally {
      await client.close();
    }
  } finally {
    await target.close();
  }
});

test('held and refused requests are access-logged like any public request: 202 with the event id, 503 with its code', async () => {
  const file = join(tempDir(), 'access.log');
  const target = await startEdge({ accessLog: file });
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'logged-queue', 'queue');
    await reserve(target, account.token, 'logged-reject', 'reject');
    const queued = await call(target, 'POST', '/q?x=1', { host: `logged-queue.localhost:${target.port}`, rawBody: 'abc' });
    assert.equal((await call(target, 'POST', '/r', { host: `logged-reject.localhost:${target.port}`, rawBody: 'abc' })).status, 503);
    await target.close();
    const lines = readFileSync(file, 'utf8').trim().split('\n').map((line) => JSON.parse(line));
    assert.deepEqual(
      lines.map((l) => [l.subdomain, l.method, l.path, l.status, l.bytes_in, l.request_id, l.error]),
      [
        ['logged-queue', 'POST', '/q?x=1', 202, 3, queued.headers['burrow-event-id'], null],
        ['logged-reject', 'POST', '/r', 503, 0, null, 'TUNNEL_UNAVAILABLE'],
      ],
    );
  } finally {
    await target.close();
  }
});
