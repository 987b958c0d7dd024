/**
 * Issue 26 in the offline queue: a reserved name in `queue` mode with a stored `verify_webhook` policy
 * holds only verified events. 1,000 unsigned POSTs are refused 401 SIGNATURE_INVALID from their heads
 * (no body read, nothing written); forged signatures are refused once their bodies are read, their
 * pieces dropped, before duplicate detection; a signed event, sent whole or streamed in chunks, is held
 * and delivered when the tunnel connects. A secret this edge cannot open fails closed (503). Real edge,
 * real client, real local server; the source rate limit raised so every request meets the verifier.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import { SecretBox } from '../../src/store/secret-box.js';
import { call, createAccount, readBody, startClient, startEdge, startLocal, tempDir, waitFor, type TestAccount, type TestEdge } from '../helpers.js';
import { join } from 'node:path';

const SECRET = 'issue-26-queue-secret';
const NAME = 'verified-hooks';

let edge: TestEdge;
let account: TestAccount;

function sign(body: string | Buffer): string {
  return `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
}

async function post(body: string, headers: Record<string, string> = {}, name = NAME) {
  return call(edge, 'POST', '/github', { host: `${name}.localhost:${edge.port}`, rawBody: body, headers: { 'content-type': 'application/json', ...headers } });
}

async function held(name = NAME): Promise<{ id: string; state: string }[]> {
  const listed = await call(edge, 'GET', `/api/v1/queue?subdomain=${name}`, { token: account.token });
  assert.equal(listed.status, 200, listed.text);
  return listed.json.queue;
}

/** Body pieces in the queue's LMDB database, finished or not (a refused upload's are dropped). */
function storedPieces(): number {
  return (edge.edge.store.queue as unknown as { pieces: { getKeysCount(): number } }).pieces.getKeysCount();
}

before(async () => {
  edge = await startEdge({ offlineQueue: { sourceRateLimit: 100_000, retryDelaysMs: [200] } });
  account = await createAccount(edge, 'PRO');
  const reserved = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: NAME, offline: 'queue' } });
  assert.equal(reserved.status, 201, reserved.text);
  const policy = await call(edge, 'PUT', `/api/v1/reserved-subdomains/${NAME}/policy`, { token: account.token, body: { verify_webhook: [{ provider: 'github', secret: SECRET }] } });
  assert.equal(policy.status, 200, policy.text);
});
after(async () => {
  await edge.close();
});

test('1,000 unsigned POSTs to a queued name store nothing; forged ones neither; signed ones are held and delivered', async () => {
  const statuses = new Map<string, number>();
  let sample: Awaited<ReturnType<typeof post>> | null = null;
  for (let wave = 0; wave < 1_000; wave += 25) {
    const answers = await Promise.all(Array.from({ length: 25 }, (_, i) => post(JSON.stringify({ junk: wave + i, pad: 'x'.repeat(512) }))));
    for (const answer of answers) {
      const key = `${answer.status} ${answer.json?.error?.code}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
      sample ??= answer;
    }
  }
  assert.deepEqual([...statuses], [['401 SIGNATURE_INVALID', 1_000]]);
  assert.equal(sample!.headers['burrow-error'], 'SIGNATURE_INVALID');
  assert.equal(sample!.json.error.message, 'The webhook signature does not verify: github: no X-Hub-Signature-256 header.');

  // A forged signature costs a body read: refused after it, its stored pieces dropped.
  const forged = await Promise.all(Array.from({ length: 20 }, (_, i) => post(JSON.stringify({ forged: i, pad: 'y'.repeat(4096) }), { 'x-hub-signature-256': sign('something else') })));
  assert.deepEqual(new Set(forged.map((answer) => `${answer.status} ${answer.json.error.code}`)), new Set(['401 SIGNATURE_INVALID']));
  assert.match(forged[0]!.json.error.message, /X-Hub-Signature-256 signature does not match the body/);
  assert.deepEqual(await held(), []);
  assert.deepEqual(edge.edge.store.queue.metaOf(NAME).events, 0);
  await waitFor(() => storedPieces() === 0, 5_000, 'the forged uploads dropped');

  // The real events: one whole, one streamed in chunks (the HMAC runs over the pieces as they arrive).
  const whole = JSON.stringify({ action: 'opened', number: 1 });
  const first = await post(whole, { 'x-hub-signature-256': sign(whole) });
  assert.equal(first.status, 202, first.text);
  const streamedBody = Buffer.from(JSON.stringify({ action: 'edited', text: 'z'.repeat(200_000) }));
  const pieces = Array.from({ length: 9 }, (_, i) => streamedBody.subarray(i * 25_000, (i + 1) * 25_000));
  const streamed = await request(`${edge.base}/github`, {
    method: 'POST',
    headers: { host: `${NAME}.localhost:${edge.port}`, 'content-type': 'application/json', 'x-hub-signature-256': sign(streamedBody) },
    body: Readable.from(pieces),
  });
  assert.equal(streamed.statusCode, 202, await streamed.body.text());
  assert.deepEqual((await held()).map((event) => event.state), ['queued', 'queued']);

  const deliveries: { signature: string | undefined; body: Buffer }[] = [];
  const local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      deliveries.push({ signature: req.headers['x-hub-signature-256'] as string | undefined, body });
      res.end('ok');
    });
  });
  const { client } = await startClient(edge, account.token, local.port, { subdomain: NAME });
  try {
    await waitFor(() => deliveries.length === 2, 10_000, 'both held events delivered');
    assert.deepEqual(deliveries.map((delivery) => delivery.body.toString()), [whole, streamedBody.toString()]);
    assert.deepEqual(deliveries.map((delivery) => delivery.signature), [sign(whole), sign(streamedBody)]);
    await waitFor(async () => (await held()).every((event) => event.state === 'delivered'), 5_000, 'delivered');
  } finally {
    await client.close();
    await local.close();
  }
});

test('a stored secret this edge cannot open holds nothing: 503 POLICY_UNAVAILABLE, never an unverified event', async () => {
  const name = 'sealed-elsewhere';
  const reserved = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: name, offline: 'queue' } });
  assert.equal(reserved.status, 201, reserved.text);
  // A policy sealed under another edge's key (a cluster edge whose key file was not copied here).
  const elsewhere = SecretBox.open(join(tempDir(), 'secret.key'));
  await edge.edge.accounts.setPolicy(account.id, name, { webhooks: [{ id: 'wh_00000001', provider: 'github', secret: elsewhere.seal(SECRET) }] });
  const body = JSON.stringify({ action: 'opened' });
  const answer = await post(body, { 'x-hub-signature-256': sign(body) }, name);
  assert.equal(answer.status, 503, answer.text);
  assert.equal(answer.json.error.code, 'POLICY_UNAVAILABLE');
  assert.equal(answer.headers['retry-after'], '30');
  assert.deepEqual(await held(name), []);
});
