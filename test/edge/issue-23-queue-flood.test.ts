/**
 * Issue 23, finding 4: "anonymous senders fill a queue and block it". 1,000 junk POSTs filled a FREE name
 * in 2.6 s; the real Stripe event then got 503 QUEUE_FULL for up to 72 h (no eviction, no bulk discard);
 * each junk event the app refused with 401 was retried 5 times over ~15 s at the head of the queue while
 * real events and live requests waited behind it. Now: a rate per source address and name (429 with
 * Retry-After and RateLimit headers), quotas per name and per account in events and bytes (uploads under
 * way count), a 4xx from the app parks the event at once, a 5xx sets it aside instead of holding the line,
 * and `burrow queue discard NAME --all | --state` empties a name in one go. Real edge, real client, real
 * local server, the real CLI; the edge trusts 127.0.0.1 as a proxy so each request can name its sender.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { test } from 'node:test';
import { sourceKey } from '../../src/edge/offline-queue.js';
import type { TestEdge } from '../helpers.js';
import { call, callPastQueue, createAccount, readBody, runCli, startClient, startEdge, startLocal, tempDir, waitFor } from '../helpers.js';

const STRIPE_SECRET = 'whsec_issue_23_flood';
const STRIPE_ADDRESS = '54.187.174.169';
const ATTACKER = '203.0.113.7';

function stripeEvent(id: string): { body: string; headers: Record<string, string> } {
  const body = JSON.stringify({ id, object: 'event', type: 'invoice.paid', data: { object: { id: 'in_1' } } });
  const t = String(Math.floor(Date.now() / 1000));
  const v1 = createHmac('sha256', STRIPE_SECRET).update(`${t}.${body}`).digest('hex');
  return { body, headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${v1}` } };
}

/** What a Stripe webhook handler checks: 401 unless the signature holds. */
function stripeSignatureValid(header: string | string[] | undefined, body: Buffer): boolean {
  if (typeof header !== 'string') return false;
  const parts = Object.fromEntries(header.split(',').map((part) => part.split('=') as [string, string]));
  return parts.v1 === createHmac('sha256', STRIPE_SECRET).update(`${parts.t}.${body.toString('latin1')}`).digest('hex');
}

async function post(target: TestEdge, name: string, from: string, path: string, body: string | Buffer, headers: Record<string, string> = {}) {
  return call(target, 'POST', path, { host: `${name}.localhost:${target.port}`, rawBody: body, headers: { 'x-forwarded-for': from, ...headers } });
}

async function reserve(target: TestEdge, token: string, subdomain: string): Promise<void> {
  const response = await call(target, 'POST', '/api/v1/reserved-subdomains', { token, body: { subdomain, offline: 'queue' } });
  assert.equal(response.status, 201, response.text);
}

test('issue 23.4: sources are counted per IPv4 address and per IPv6 /64', () => {
  assert.equal(sourceKey('203.0.113.7'), '203.0.113.7');
  assert.equal(sourceKey('2001:db8:1:2::a'), '2001:db8:1:2::/64');
  assert.equal(sourceKey('2001:0db8:0001:0002:ffff:0:0:1'), '2001:db8:1:2::/64');
  assert.equal(sourceKey('2001:db8::1'), '2001:db8:0:0::/64');
  assert.equal(sourceKey('::1'), '0:0:0:0::/64');
  assert.notEqual(sourceKey('2001:db8:1:3::a'), sourceKey('2001:db8:1:2::a'));
});

test('issue 23.4: 1,000 junk POSTs from one address hold 120 events, the rest get 429; the real Stripe event is held; the app\'s 401s park the junk at once; discard --state failed clears it', async () => {
  const target = await startEdge({ trustProxy: '127.0.0.1/32' });
  const hits: { path: string; status: number }[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      res.statusCode = req.url === '/stripe' && stripeSignatureValid(req.headers['stripe-signature'], body) ? 200 : 401;
      hits.push({ path: req.url!, status: res.statusCode });
      res.end();
    });
  });
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'pay-hooks');
    const statuses = new Map<number, number>();
    let refused: Awaited<ReturnType<typeof post>> | null = null;
    for (let wave = 0; wave < 1_000; wave += 25) {
      const answers = await Promise.all(Array.from({ length: 25 }, (_, i) => post(target, 'pay-hooks', ATTACKER, '/stripe', `{"junk":${wave + i}}`)));
      for (const answer of answers) {
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        if (answer.status === 429) refused ??= answer;
      }
    }
    assert.deepEqual([...statuses].sort(), [[202, 120], [429, 880]]);
    assert.equal(refused!.json.error.code, 'RATE_LIMITED');
    assert.equal(refused!.headers['burrow-error'], 'RATE_LIMITED');
    assert.match(String(refused!.headers['retry-after']), /^[1-9][0-9]*$/);
    assert.equal(refused!.headers['ratelimit-limit'], '120');
    assert.equal(refused!.headers['ratelimit-remaining'], '0');
    assert.match(String(refused!.headers['ratelimit-reset']), /^[1-9][0-9]*$/);

    const real = stripeEvent('evt_real_1');
    const held = await post(target, 'pay-hooks', STRIPE_ADDRESS, '/stripe', real.body, real.headers);
    assert.equal(held.status, 202, held.text);

    // The laptop comes back: every junk event gets its 401 once and is parked; the real one is delivered.
    const { client } = await startClient(target, account.token, local.port, { subdomain: 'pay-hooks' });
    try {
      await waitFor(() => hits.length === 121, 20_000, 'one attempt per held event');
      const queue = async () => (await call(target, 'GET', '/api/v1/queue?subdomain=pay-hooks', { token: account.token })).json.queue as { id: string; state: string; attempts: number; last_status: number }[];
      await waitFor(async () => (await queue()).every((event) => event.state === 'failed' || event.state === 'delivered'), 5_000, 'all settled');
      const events = await queue();
      assert.deepEqual(events.filter((event) => event.state === 'failed').map((event) => [event.attempts, event.last_status]), Array.from({ length: 120 }, () => [1, 401]));
      assert.deepEqual(events.filter((event) => event.state === 'delivered').map((event) => event.id), [held.json.event_id]);
      assert.deepEqual(hits.filter((hit) => hit.status === 200).length, 1);
      const live = await call(target, 'GET', '/stripe', { host: `pay-hooks.localhost:${target.port}` });
      assert.equal(live.status, 401, 'live requests go straight to the app again');

      // Bulk discard with the real CLI.
      const cli = { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: target.url, BURROW_TOKEN: account.token };
      const both = await runCli(['queue', 'discard', 'pay-hooks', '--all', '--state', 'failed'], cli);
      assert.equal(both.code, 2, both.stderr);
      const discarded = await runCli(['queue', 'discard', 'pay-hooks', '--state', 'failed', '--json'], cli);
      assert.equal(discarded.code, 0, discarded.stderr);
      assert.deepEqual([JSON.parse(discarded.stdout).discarded, JSON.parse(discarded.stdout).events], [120, 1]);
      const all = await runCli(['queue', 'discard', 'pay-hooks', '--all'], cli);
      assert.equal(all.code, 0, all.stderr);
      assert.match(all.stdout, /^discarded 1 event of pay-hooks; 0 held$/m);
      const bad = await call(target, 'DELETE', '/api/v1/queue?subdomain=pay-hooks&state=sometimes', { token: account.token });
      assert.equal(bad.status, 400);
      assert.equal(bad.json.error.code, 'INVALID_REQUEST');
    } finally {
      await client.close();
    }
  } finally {
    await local.close();
    await target.close();
  }
});

test('issue 23.4: quotas per name and per account, in events and bytes, whatever the senders: 503 QUEUE_FULL with Retry-After; a bulk discard makes room for the real event', async () => {
  const KIB = 1024;
  const target = await startEdge({
    trustProxy: '127.0.0.1/32',
    plans: { FREE: { queuedEvents: 30, queuedBytes: 256 * KIB, accountQueuedEvents: 50, accountQueuedBytes: 400 * KIB } },
  });
  try {
    const account = await createAccount(target);
    for (const name of ['bulk-a', 'bulk-b', 'bulk-c']) await reserve(target, account.token, name);
    const full = (answer: Awaited<ReturnType<typeof post>>, reason: RegExp): void => {
      assert.equal(answer.status, 503, answer.text);
      assert.equal(answer.json.error.code, 'QUEUE_FULL');
      assert.match(answer.json.error.message, reason);
      assert.match(String(answer.headers['retry-after']), /^[0-9]+$/);
    };
    // A name's events, from 30 different addresses.
    for (let i = 0; i < 30; i++) assert.equal((await post(target, 'bulk-a', `198.51.100.${i}`, '/junk', 'x')).status, 202);
    full(await post(target, 'bulk-a', '198.51.100.200', '/junk', 'x'), /holds its limit of 30 events/);
    const real = stripeEvent('evt_real_2');
    full(await post(target, 'bulk-a', STRIPE_ADDRESS, '/stripe', real.body, real.headers), /30 events/);
    // A name's bytes.
    const big = Buffer.alloc(100 * KIB, 0x62);
    assert.equal((await post(target, 'bulk-b', '198.51.100.1', '/big', big)).status, 202);
    assert.equal((await post(target, 'bulk-b', '198.51.100.2', '/big', big)).status, 202);
    full(await post(target, 'bulk-b', '198.51.100.3', '/big', big), /of its 262144 bytes/);
    // The account's bytes, then its events, across its names.
    assert.equal((await post(target, 'bulk-c', '198.51.100.4', '/big', big)).status, 202);
    full(await post(target, 'bulk-c', '198.51.100.5', '/big', big), /the account's queues hold \d+ of their 409600 bytes/);
    for (let i = 0; i < 17; i++) assert.equal((await post(target, 'bulk-c', `198.51.100.${i + 10}`, '/small', 'x')).status, 202);
    full(await post(target, 'bulk-c', '198.51.100.99', '/small', 'x'), /the account's queues hold their limit of 50 events/);

    // The owner clears the junk in one call; the provider's retry of the real event is held.
    const cleared = await call(target, 'DELETE', '/api/v1/queue?subdomain=bulk-a&state=queued', { token: account.token });
    assert.equal(cleared.status, 200, cleared.text);
    assert.deepEqual([cleared.json.discarded, cleared.json.events, cleared.json.bytes], [30, 0, 0]);
    const retried = await post(target, 'bulk-a', STRIPE_ADDRESS, '/stripe', real.body, real.headers);
    assert.equal(retried.status, 202, retried.text);
  } finally {
    await target.close();
  }
});

test('issue 23.4: an upload under way counts against the quota before it is stored', async () => {
  const target = await startEdge({ plans: { FREE: { queuedEvents: 2 } } });
  let socket: Socket | null = null;
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'tight');
    const host = `tight.localhost:${target.port}`;
    assert.equal((await call(target, 'POST', '/one', { host, rawBody: 'one' })).status, 202);
    socket = connect(target.port, '127.0.0.1');
    await once(socket, 'connect');
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.write(`POST /slow HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 4\r\n\r\nsl`);
    await waitFor(() => target.edge.offline.receiving('tight') === 1, 5_000, 'the slow upload under way');
    const third = await call(target, 'POST', '/three', { host, rawBody: 'three' });
    assert.equal(third.status, 503, third.text);
    assert.equal(third.json.error.code, 'QUEUE_FULL');
    socket.write('ow');
    await waitFor(() => answer.includes('\r\n\r\n{'), 5_000, 'the slow upload answered');
    assert.match(answer, /^HTTP\/1\.1 202 /);
  } finally {
    socket?.destroy();
    await target.close();
  }
});

test('issue 23.4: a 5xx sets the event aside: the events behind it and live requests are not held for its retry schedule', async () => {
  // A retry a minute away: if the failing event held the line, nothing behind it would move for a minute.
  const target = await startEdge({ offlineQueue: { retryDelaysMs: [60_000] } });
  const paths: string[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then(() => {
      paths.push(req.url!);
      res.statusCode = req.url === '/e/1' ? 500 : 200;
      res.end('ok');
    });
  });
  try {
    const account = await createAccount(target);
    await reserve(target, account.token, 'aside');
    const host = `aside.localhost:${target.port}`;
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await call(target, 'POST', `/e/${n}`, { host, rawBody: `e${n}` })).json.event_id);
    const { client } = await startClient(target, account.token, local.port, { subdomain: 'aside' });
    try {
      await waitFor(() => paths.length === 3, 10_000, 'the events behind the failing one delivered');
      assert.deepEqual(paths, ['/e/1', '/e/2', '/e/3']);
      const live = await callPastQueue(target, 'GET', '/live', host);
      assert.deepEqual([live.status, live.text], [200, 'ok'], 'a live request goes straight through while the failing event waits');
      const queue = (await call(target, 'GET', '/api/v1/queue?subdomain=aside', { token: account.token })).json.queue as Record<string, unknown>[];
      const failing = queue.find((event) => event.id === ids[0])!;
      assert.deepEqual([failing.state, failing.attempts, failing.last_status], ['queued', 1, 500]);
      assert.match(String(failing.next_attempt_at), /^\d{4}-\d{2}-\d{2}T/);
      assert.deepEqual(queue.filter((event) => ids.slice(1).includes(String(event.id))).map((event) => event.state), ['delivered', 'delivered']);
    } finally {
      await client.close();
    }
  } finally {
    await local.close();
    await target.close();
  }
});
