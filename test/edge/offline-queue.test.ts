/**
 * Issue 18 acceptance: webhooks posted while the laptop is offline are held, survive kill -9 of the edge,
 * and reach the local server exactly once, in order, byte-exact (their Stripe and GitHub signatures still
 * verify), with the delivery headers. A local server that fails one event: retries, parking, `burrow
 * queue deliver`. Real edge processes, the real client, real local servers, the real CLI.
 */
import assert from 'node:assert/strict';
import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { test } from 'node:test';
import { request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { createAccount, freePort, readBody, runCli, spawnCli, startEdge, startLocal, tempDir, waitFor } from '../helpers.js';

const STRIPE_SECRET = 'whsec_test_offline_queue';
const GITHUB_SECRET = 'github-offline-queue-secret';
const EVENTS = 100;
const MIB = 1024 * 1024;

interface Sent {
  index: number;
  kind: 'stripe' | 'github';
  body: Buffer;
  headers: Record<string, string>;
  eventId: string;
}

function hmacHex(secret: string, data: Buffer): string {
  return createHmac('sha256', secret).update(data).digest('hex');
}

function equalHex(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

/** Event `index`: sizes from a few bytes to 1 MiB; odd ones Stripe-style JSON, even ones GitHub-style raw bytes. */
function makeEvent(index: number): Omit<Sent, 'eventId'> {
  const size = index % 10 === 9 ? MIB : index % 10 === 0 ? 16 : 1_000 + ((index * 7_919) % 120_000);
  if (index % 2 === 1) {
    const head = `{"id":"evt_offline_${index}","object":"event","type":"invoice.paid","data":{"pad":"`;
    const tail = '"}}';
    const pad = randomBytes(size).toString('base64url').slice(0, Math.max(0, size - head.length - tail.length));
    const body = Buffer.from(head + pad + tail);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signature = hmacHex(STRIPE_SECRET, Buffer.concat([Buffer.from(`${timestamp}.`), body]));
    return { index, kind: 'stripe', body, headers: { 'content-type': 'application/json', 'stripe-signature': `t=${timestamp},v1=${signature}` } };
  }
  // Raw bytes, CR LF and NUL included: the body must cross byte for byte for the signature to hold.
  const body = randomBytes(size);
  return {
    index,
    kind: 'github',
    body,
    headers: {
      'content-type': 'application/octet-stream',
      'x-github-event': 'push',
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': `sha256=${hmacHex(GITHUB_SECRET, body)}`,
    },
  };
}

/** What the local server checks on every delivery, as a webhook handler would. */
function signatureValid(headers: Record<string, string | string[] | undefined>, body: Buffer): boolean {
  const stripe = headers['stripe-signature'];
  if (typeof stripe === 'string') {
    const parts = Object.fromEntries(stripe.split(',').map((part) => part.split('=') as [string, string]));
    return equalHex(parts.v1 ?? '', hmacHex(STRIPE_SECRET, Buffer.concat([Buffer.from(`${parts.t}.`), body])));
  }
  const github = headers['x-hub-signature-256'];
  return typeof github === 'string' && equalHex(github, `sha256=${hmacHex(GITHUB_SECRET, body)}`);
}

interface Delivered {
  path: string;
  digest: string;
  signatureValid: boolean;
  delivery: string | undefined;
  receivedAt: string | undefined;
}

test('100 webhooks held across kill -9 of the edge are delivered exactly once, in order, byte-exact, signatures valid', async () => {
  const dataDir = tempDir();
  const env = { XDG_CONFIG_HOME: tempDir() };
  const port = await freePort();
  const start = () => spawnCli(['edge', '--port', String(port), '--data', dataDir], env, /listening on/);
  let edge = await start();
  const delivered: Delivered[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      delivered.push({
        path: req.url!,
        digest: createHash('sha256').update(body).digest('hex'),
        signatureValid: signatureValid(req.headers, body),
        delivery: req.headers['burrow-delivery'] as string | undefined,
        receivedAt: req.headers['burrow-received-at'] as string | undefined,
      });
      res.end('ok');
    });
  });
  let client: TunnelClient | null = null;
  try {
    const created = await runCli(['admin', 'create-account', '--email', 'offline@example.test', '--plan', 'FREE', '--data', dataDir, '--json'], env);
    const token = JSON.parse(created.stdout).token.token as string;
    const cli = { ...env, BURROW_EDGE: `http://localhost:${port}`, BURROW_TOKEN: token };
    const reserved = await runCli(['reserve', 'laptop-hooks', '--offline', 'queue', '--json'], cli);
    assert.equal(reserved.code, 0, reserved.stderr);
    assert.equal(JSON.parse(reserved.stdout).offline, 'queue');
    const listed = await runCli(['reservations'], cli);
    assert.match(listed.stdout, /laptop-hooks +\S+ \S+ +queue/);

    const host = `laptop-hooks.localhost:${port}`;
    const post = async (event: Omit<Sent, 'eventId'>) => {
      const response = await request(`http://127.0.0.1:${port}/hooks/${event.index}`, { method: 'POST', headers: { host, ...event.headers }, body: event.body });
      const answer = (await response.body.json()) as { event_id: string; duplicate: boolean };
      assert.equal(response.statusCode, 202, JSON.stringify(answer));
      assert.equal(response.headers['burrow-event-id'], answer.event_id);
      return answer;
    };
    const sent: Sent[] = [];
    for (let index = 0; index < EVENTS; index++) {
      const event = makeEvent(index);
      const answer = await post(event);
      assert.equal(answer.duplicate, false);
      sent.push({ ...event, eventId: answer.event_id });
    }
    assert.equal(new Set(sent.map((s) => s.eventId)).size, EVENTS);
    // GitHub retries a delivery it thinks failed: same X-GitHub-Delivery, same event, not queued twice.
    const retried = await post(sent[2]!);
    assert.deepEqual([retried.event_id, retried.duplicate], [sent[2]!.eventId, true]);

    // The edge dies at once after the last 202, and comes back on the same data.
    edge.child.kill('SIGKILL');
    await edge.exited;
    edge = await start();
    const retriedAfterRestart = await post(sent[4]!);
    assert.deepEqual([retriedAfterRestart.event_id, retriedAfterRestart.duplicate], [sent[4]!.eventId, true]);

    // The laptop comes back.
    client = new TunnelClient({ edge: `http://localhost:${port}`, token, routes: new RouteTable(local.port), subdomain: 'laptop-hooks', minBackoffMs: 50, maxBackoffMs: 500 });
    await client.start();
    await waitFor(() => delivered.length >= EVENTS, 60_000, 'all deliveries');
    // Anything delivered twice would show up now or in the listing below.
    const queue = await runCli(['queue', 'list', 'laptop-hooks', '--json'], cli);
    assert.equal(queue.code, 0, queue.stderr);
    const events = JSON.parse(queue.stdout).queue as { id: string; state: string; attempts: number }[];
    assert.deepEqual(events.map((e) => e.id), sent.map((s) => s.eventId));
    assert.ok(events.every((e) => e.state === 'delivered' && e.attempts === 1), queue.stdout.slice(0, 500));

    assert.equal(delivered.length, EVENTS, 'exactly once');
    assert.deepEqual(delivered.map((d) => d.path), sent.map((s) => `/hooks/${s.index}`), 'in arrival order');
    for (let i = 0; i < EVENTS; i++) {
      const got = delivered[i]!;
      assert.equal(got.digest, createHash('sha256').update(sent[i]!.body).digest('hex'), `event ${i} byte-exact`);
      assert.ok(got.signatureValid, `event ${i}: the ${sent[i]!.kind} signature verifies`);
      assert.equal(got.delivery, '1');
      assert.match(got.receivedAt ?? '', /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    }
  } finally {
    await client?.close();
    await local.close();
    edge.child.kill('SIGKILL');
    await edge.exited;
  }
});

test('a local 500 on the 5th event: retried with backoff while the rest are delivered, parked as failed; burrow queue deliver sends it again', async () => {
  const target = await startEdge({ offlineQueue: { retryDelaysMs: [50, 100, 200, 400] } });
  const paths: { path: string; delivery: string }[] = [];
  let broken = true;
  const local = await startLocal((req, res) => {
    void readBody(req).then(() => {
      paths.push({ path: req.url!, delivery: String(req.headers['burrow-delivery']) });
      res.statusCode = broken && req.url === '/e/5' ? 500 : 204;
      res.end();
    });
  });
  let client: TunnelClient | null = null;
  try {
    const account = await createAccount(target);
    const cli = { XDG_CONFIG_HOME: tempDir(), BURROW_EDGE: target.url, BURROW_TOKEN: account.token };
    assert.equal((await runCli(['reserve', 'flaky-hooks', '--offline', 'queue'], cli)).code, 0);
    const host = `flaky-hooks.localhost:${target.port}`;
    const ids: string[] = [];
    for (let n = 1; n <= 8; n++) {
      const response = await request(`${target.base}/e/${n}`, { method: 'POST', headers: { host }, body: `event ${n}` });
      await response.body.text();
      assert.equal(response.statusCode, 202);
      ids.push(String(response.headers['burrow-event-id']));
    }
    client = new TunnelClient({ edge: target.url, token: account.token, routes: new RouteTable(local.port), subdomain: 'flaky-hooks', minBackoffMs: 50, maxBackoffMs: 500 });
    await client.start();
    await waitFor(() => paths.length === 12, 20_000, 'the rest delivered, the failing one tried five times');
    assert.deepEqual(paths.filter((p) => p.path === '/e/5').map((p) => p.delivery), ['1', '2', '3', '4', '5']);
    assert.deepEqual(paths.map((p) => p.path).filter((p, i, all) => all.indexOf(p) === i), ['/e/1', '/e/2', '/e/3', '/e/4', '/e/5', '/e/6', '/e/7', '/e/8']);

    let listed = await runCli(['queue', 'list', 'flaky-hooks', '--json'], cli);
    await waitFor(async () => {
      listed = await runCli(['queue', 'list', 'flaky-hooks', '--json'], cli);
      return listed.stdout.includes('"failed"');
    }, 10_000, 'parked as failed');
    const failed = (JSON.parse(listed.stdout).queue as { id: string; state: string; last_status: number }[]).filter((e) => e.state === 'failed');
    assert.deepEqual(failed.map((e) => [e.id, e.last_status]), [[ids[4], 500]]);
    const table = await runCli(['queue', 'flaky-hooks'], cli);
    assert.match(table.stdout, new RegExp(`${ids[4]} +failed +5 `));

    broken = false;
    const redeliver = await runCli(['queue', 'deliver', ids[4]!, 'flaky-hooks'], cli);
    assert.equal(redeliver.code, 0, redeliver.stderr);
    await waitFor(() => paths.length === 13, 10_000, 'the redelivery');
    assert.deepEqual(paths[12], { path: '/e/5', delivery: '6' });
    const after = await runCli(['queue', 'list', 'flaky-hooks', '--json'], cli);
    assert.ok((JSON.parse(after.stdout).queue as { state: string }[]).every((e) => e.state === 'delivered'), after.stdout);

    const discard = await runCli(['queue', 'discard', ids[0]!, '--json'], cli);
    assert.equal(discard.code, 0, discard.stderr);
    assert.equal(JSON.parse((await runCli(['queue', 'list', 'flaky-hooks', '--json'], cli)).stdout).queue.length, 7);
  } finally {
    await client?.close();
    await local.close();
    await target.close();
  }
});
