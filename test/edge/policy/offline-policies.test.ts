/**
 * Issue 26: a policy stored on a reservation holds while its client is offline, in `queue` and `reject`
 * modes: access rules refuse before the offline answer, and a queued name with `verify_webhook` holds
 * only verified events. A flood of 10,000 unsigned POSTs (undici, 64 keep-alive connections) stores
 * nothing in the queue, and at most REJECTED_CAPTURES of them are kept as captures marked rejected; the
 * one genuine event is held and delivered when the client comes. The edge trusts 127.0.0.1 as a proxy,
 * so each request names its sender in X-Forwarded-For.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { after, before, test } from 'node:test';
import { Pool } from 'undici';
import { REJECTED_CAPTURES } from '../../../src/edge/policy-gate.js';
import { call, createAccount, readBody, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../../helpers.js';

const SECRET = 'offline-github-secret';
const sign = (body: string): string => `sha256=${createHmac('sha256', SECRET).update(body).digest('hex')}`;
const basic = (pair: string): string => `Basic ${Buffer.from(pair).toString('base64')}`;

let edge: TestEdge;
let account: TestAccount;
let local: LocalServer;
const delivered: { url: string; body: string }[] = [];

before(async () => {
  edge = await startEdge({ trustProxy: '127.0.0.1/32' });
  account = await createAccount(edge, 'PRO');
  local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      delivered.push({ url: req.url!, body: body.toString() });
      res.end('ok');
    });
  });
});

after(async () => {
  await local.close();
  await edge.close();
});

async function reserve(subdomain: string, offline: 'queue' | 'reject', policy: object): Promise<string> {
  const created = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain, offline } });
  assert.equal(created.status, 201, created.text);
  const put = await call(edge, 'PUT', `/api/v1/reserved-subdomains/${subdomain}/policy`, { token: account.token, body: policy });
  assert.equal(put.status, 200, put.text);
  return `${subdomain}.localhost:${edge.port}`;
}

const send = (host: string, path: string, options: { method?: string; from?: string; headers?: Record<string, string>; body?: string } = {}) =>
  call(edge, options.method ?? 'GET', path, { host, headers: { 'x-forwarded-for': options.from ?? '203.0.113.5', ...options.headers }, ...(options.body === undefined ? {} : { rawBody: options.body }) });

async function queued(subdomain: string): Promise<{ events: number; queue: { path: string }[] }> {
  const listed = await call(edge, 'GET', `/api/v1/queue?subdomain=${subdomain}`, { token: account.token });
  assert.equal(listed.status, 200, listed.text);
  return listed.json;
}

async function captures(subdomain: string): Promise<{ status: number; rejected?: string; path: string }[]> {
  const listed = await call(edge, 'GET', `/api/v1/requests?subdomain=${subdomain}&limit=1000`, { token: account.token });
  return listed.status === 404 ? [] : listed.json.requests;
}

test('queue mode, client offline: basic auth, CIDR and the rate limit refuse before anything is held; with the right credentials the request is held (202)', async () => {
  const host = await reserve('off-auth', 'queue', { basic_auth: [{ user: 'ann', password: 's3cret' }], deny_cidr: ['2001:db8:bad::/48'], rate_limit: { requests: 4, period_seconds: 60 } });
  const none = await send(host, '/in', { method: 'POST', body: '{}' });
  assert.deepEqual([none.status, none.json.error.code, none.headers['www-authenticate']], [401, 'AUTHENTICATION_REQUIRED', 'Basic realm="off-auth", charset="UTF-8"']);
  const wrong = await send(host, '/in', { method: 'POST', body: '{}', headers: { authorization: basic('ann:nope') } });
  assert.deepEqual([wrong.status, wrong.json.error.message], [401, 'The user name or password is wrong.']);
  const denied = await send(host, '/in', { method: 'POST', body: '{}', from: '2001:db8:bad:1::9', headers: { authorization: basic('ann:s3cret') } });
  assert.deepEqual([denied.status, denied.json.error.code, denied.json.error.message], [403, 'ADDRESS_FORBIDDEN', 'Requests from 2001:db8:bad:1::9 are not allowed on this tunnel.']);
  const held = await send(host, '/in', { method: 'POST', body: '{"n":1}', headers: { authorization: basic('ann:s3cret') } });
  assert.equal(held.status, 202, held.text);
  // The rate limit counted every request of 203.0.113.5 (3 so far): one more passes, the next is 429.
  assert.equal((await send(host, '/in', { method: 'POST', body: '{"n":2}', headers: { authorization: basic('ann:s3cret') } })).status, 202);
  const limited = await send(host, '/in', { method: 'POST', body: '{"n":3}', headers: { authorization: basic('ann:s3cret') } });
  assert.deepEqual([limited.status, limited.json.error.code, limited.headers['ratelimit-limit'], limited.headers['ratelimit-remaining']], [429, 'RATE_LIMITED', '4', '0']);
  assert.match(String(limited.headers['retry-after']), /^[1-9][0-9]*$/);
  assert.equal((await queued('off-auth')).events, 2, 'only the two allowed requests are held');
});

test('reject mode, client offline: the access rules answer first (401/403), the offline 503 only to those they let through', async () => {
  const host = await reserve('off-reject', 'reject', { basic_auth: [{ user: 'ann', password: 's3cret' }], allow_cidr: ['198.51.100.0/24', '2001:db8:aa::/48'] });
  assert.equal((await send(host, '/x', { from: '198.51.100.4' })).status, 401);
  const outside = await send(host, '/x', { from: '2001:db8:bb::1', headers: { authorization: basic('ann:s3cret') } });
  assert.deepEqual([outside.status, outside.json.error.code], [403, 'ADDRESS_FORBIDDEN']);
  const through = await send(host, '/x', { from: '2001:db8:aa::7', headers: { authorization: basic('ann:s3cret') } });
  assert.deepEqual([through.status, through.json.error.code], [503, 'TUNNEL_UNAVAILABLE']);
});

test('queue mode with verify_webhook: 10,000 unsigned POSTs store nothing (401 each, a bounded number captured as rejected); the signed event is held, then delivered when the client connects', { timeout: 180_000 }, async () => {
  const host = await reserve('off-hooks', 'queue', { verify_webhook: [{ provider: 'github', secret: SECRET }] });
  const pool = new Pool(edge.base, { connections: 64, pipelining: 1 });
  const statuses = new Map<number, number>();
  const junk = JSON.stringify({ junk: true, pad: 'x'.repeat(200) });
  try {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < 10_000) {
        next++;
        const response = await pool.request({ path: '/github', method: 'POST', headers: { host, 'content-type': 'application/json', 'x-forwarded-for': `198.51.100.${next % 250}` }, body: junk });
        await response.body.dump();
        statuses.set(response.statusCode, (statuses.get(response.statusCode) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: 64 }, worker));
  } finally {
    await pool.close();
  }
  assert.deepEqual([...statuses], [[401, 10_000]]);
  const afterFlood = await queued('off-hooks');
  assert.equal(afterFlood.events, 0, 'nothing held');
  const rejected = await captures('off-hooks');
  assert.ok(rejected.length > 0 && rejected.length <= REJECTED_CAPTURES, `${rejected.length} captures`);
  assert.ok(rejected.every((entry) => entry.status === 401 && entry.rejected === 'signature'));

  // A forgery with a signature header is refused once its body is read: captured with its body, not held.
  const forged = await send(host, '/github', { method: 'POST', body: '{"forged":1}', headers: { 'x-hub-signature-256': sign('{"other":1}') } });
  assert.deepEqual([forged.status, forged.json.error.code], [401, 'SIGNATURE_INVALID']);
  const genuine = JSON.stringify({ action: 'opened', n: 1 });
  const held = await send(host, '/github', { method: 'POST', body: genuine, headers: { 'content-type': 'application/json', 'x-hub-signature-256': sign(genuine) } });
  assert.equal(held.status, 202, held.text);
  assert.deepEqual((await queued('off-hooks')).queue.map((event) => event.path), ['/github']);

  const started = await startClient(edge, account.token, local.port, { subdomain: 'off-hooks' });
  try {
    await waitFor(() => delivered.some((entry) => entry.url === '/github'), 10_000, 'the held event delivered');
    assert.deepEqual(delivered.filter((entry) => entry.url === '/github').map((entry) => entry.body), [genuine], 'only the verified event reached the app');
  } finally {
    await started.client.close();
  }
});
