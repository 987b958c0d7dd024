/**
 * Issue 26 on live traffic: each tunnel policy through a real edge, a real tunnel client and a real local
 * server, with real public clients (curl, undici, ws). Per rule: allowed, refused, the refusal's status,
 * headers and body (JSON for programs, the HTML page for a browser), what the local server sees and what
 * the capture keeps. The edge trusts 127.0.0.1 as a proxy, so CIDR rules are decided on the address a
 * trusted proxy names (X-Forwarded-For, PROXY v2); nginx as that proxy is in trusted-proxy-cidr.test.ts.
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import { Readable } from 'node:stream';
import { after, before, test } from 'node:test';
import { verify as githubVerify } from '@octokit/webhooks-methods';
import { request } from 'undici';
import WebSocket, { WebSocketServer } from 'ws';
import type { PolicySpec } from '../../../src/protocol/policy.js';
import { call, createAccount, readBody, runCli, startClient, startEdge, startLocal, tempDir, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../../helpers.js';
import { launchChromium } from '../../inspector/browser.js';
import { inspect } from '../../inspector/fixture.js';
import { Inspector } from '../../../src/inspector/server.js';
import type { TunnelClient } from '../../../src/client/tunnel-client.js';
import { curl } from './curl.js';

interface Seen {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

let edge: TestEdge;
let account: TestAccount;
let local: LocalServer;
const seen: Seen[] = [];
const clients: { close(): Promise<void> }[] = [];
const clientOf = new Map<string, TunnelClient>();

before(async () => {
  edge = await startEdge({ trustProxy: '127.0.0.1/32' });
  account = await createAccount(edge, 'PRO');
  local = await startLocal((req, res) => {
    void readBody(req).then((body) => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      res.writeHead(200, { 'content-type': 'application/json', server: 'local-app', 'x-powered-by': 'tests' });
      res.end(JSON.stringify({ ok: true, length: body.length }));
    });
  });
  const sockets = new WebSocketServer({ server: local.server });
  sockets.on('connection', (socket) => socket.on('message', (data, isBinary) => socket.send(data, { binary: isBinary })));
});

after(async () => {
  for (const client of clients) await client.close();
  await local.close();
  await edge.close();
});

/** A tunnel with a one-run policy; its public host. */
async function tunnel(subdomain: string, policy: PolicySpec): Promise<string> {
  const started = await startClient(edge, account.token, local.port, { subdomain, policy });
  clients.push(started.client);
  clientOf.set(subdomain, started.client);
  return started.host;
}

async function publicCall(host: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: string | Buffer | Readable } = {}) {
  const response = await request(`${edge.base}${path}`, { method: (options.method ?? 'GET') as 'GET', headers: { host, ...options.headers }, ...(options.body === undefined ? {} : { body: options.body }) });
  const text = await response.body.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.statusCode, headers: response.headers, text, json };
}

async function captures(subdomain: string): Promise<any[]> {
  const listed = await call(edge, 'GET', `/api/v1/requests?subdomain=${subdomain}`, { token: account.token });
  assert.equal(listed.status, 200, listed.text);
  return listed.json.requests;
}

async function capture(id: string): Promise<any> {
  const detail = await call(edge, 'GET', `/api/v1/requests/${id}`, { token: account.token });
  assert.equal(detail.status, 200, detail.text);
  return detail.json;
}

const seenOn = (path: string): Seen[] => seen.filter((entry) => entry.url === path);

test('basic auth with curl: 401 and WWW-Authenticate without or with wrong credentials (the HTML page for a browser), the right ones pass without Authorization reaching the app', async () => {
  const host = await tunnel('auth-live', { basic_auth: [{ user: 'ann', password: 's3cret' }] });
  const none = await curl(edge.port, host, '/private');
  assert.equal(none.status, 401);
  assert.equal(none.headers['www-authenticate'], 'Basic realm="auth-live", charset="UTF-8"');
  assert.equal(none.headers['burrow-error'], 'AUTHENTICATION_REQUIRED');
  assert.deepEqual(JSON.parse(none.body), { error: { code: 'AUTHENTICATION_REQUIRED', message: 'This tunnel requires a user name and password.' } });

  const browser = await curl(edge.port, host, '/private', ['-H', 'Accept: text/html,application/xhtml+xml,*/*;q=0.8']);
  assert.equal(browser.status, 401);
  assert.match(browser.headers['content-type']!, /^text\/html/);
  assert.equal(browser.headers['www-authenticate'], 'Basic realm="auth-live", charset="UTF-8"', 'the browser still gets its prompt');
  assert.match(browser.body, /<code>AUTHENTICATION_REQUIRED<\/code>/);

  const wrong = await curl(edge.port, host, '/private', ['-u', 'ann:nope']);
  assert.equal(wrong.status, 401);
  assert.equal(JSON.parse(wrong.body).error.message, 'The user name or password is wrong.');
  const unknown = await curl(edge.port, host, '/private', ['-u', 'bob:s3cret']);
  assert.equal(unknown.status, 401);
  assert.equal(seenOn('/private').length, 0, 'nothing refused reached the local server');

  const allowed = await curl(edge.port, host, '/private', ['-u', 'ann:s3cret']);
  assert.equal(allowed.status, 200, allowed.body);
  assert.deepEqual(JSON.parse(allowed.body), { ok: true, length: 0 });
  // A keep-alive client sends the same value again: answered from the verified cache.
  const again = await publicCall(host, '/private', { headers: { authorization: `Basic ${Buffer.from('ann:s3cret').toString('base64')}` } });
  assert.equal(again.status, 200);
  assert.equal(seenOn('/private').length, 2);
  assert.ok(seenOn('/private').every((entry) => entry.headers.authorization === undefined), 'the credentials are the edge\'s, not the app\'s');

  const listed = await captures('auth-live');
  assert.deepEqual(listed.map((entry) => [entry.path, entry.status, entry.rejected ?? null]), [['/private', 200, null], ['/private', 200, null]], 'refusals are not captured');
  const detail = await capture(listed[0].id);
  assert.ok(!detail.request.headers.some(([name]: [string, string]) => name.toLowerCase() === 'authorization'));
});

test('--basic-auth-forward: the app gets Authorization; the capture keeps it redacted, never in clear', async () => {
  const host = await tunnel('auth-forward', { basic_auth: [{ user: 'ann', password: 's3cret' }], basic_auth_forward: true });
  const allowed = await curl(edge.port, host, '/forwarded', ['-u', 'ann:s3cret', '--data-binary', '{"a":1}', '-H', 'content-type: application/json']);
  assert.equal(allowed.status, 200, allowed.body);
  assert.equal(seenOn('/forwarded')[0]!.headers.authorization, `Basic ${Buffer.from('ann:s3cret').toString('base64')}`);
  const [entry] = await captures('auth-forward');
  const detail = await capture(entry.id);
  assert.deepEqual(detail.request.headers.filter(([name]: [string, string]) => name.toLowerCase() === 'authorization'), [['Authorization', 'Basic [redacted]']]);
  assert.equal(detail.request.body, '{"a":1}', 'the body is kept as always');
});

test('CIDR allow/deny on the address a trusted proxy names (X-Forwarded-For, PROXY v2): 403 ADDRESS_FORBIDDEN naming it', async () => {
  const host = await tunnel('cidr-live', { allow_cidr: ['203.0.113.0/24'], deny_cidr: ['203.0.113.66/32'] });
  const allowed = await publicCall(host, '/cidr', { headers: { 'x-forwarded-for': '203.0.113.9' } });
  assert.equal(allowed.status, 200);
  assert.equal(seenOn('/cidr')[0]!.headers['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
  const denied = await publicCall(host, '/cidr', { headers: { 'x-forwarded-for': '203.0.113.66' } });
  assert.deepEqual([denied.status, denied.json.error.code, denied.headers['burrow-error']], [403, 'ADDRESS_FORBIDDEN', 'ADDRESS_FORBIDDEN']);
  assert.equal(denied.json.error.message, 'Requests from 203.0.113.66 are not allowed on this tunnel.');
  const outside = await publicCall(host, '/cidr', { headers: { 'x-forwarded-for': '198.51.100.7' } });
  assert.equal(outside.status, 403);
  const direct = await publicCall(host, '/cidr');
  assert.equal(direct.status, 403, 'the proxy itself (127.0.0.1) is not in the allowed block');
  // A layer-4 balancer's PROXY v2 header names the client.
  const viaProxyProtocol = async (source: string): Promise<string> => {
    const socket = connect(edge.port, '127.0.0.1');
    await once(socket, 'connect');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.write(Buffer.concat([proxyV2(source), Buffer.from(`GET /cidr HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`)]));
    await once(socket, 'close');
    return Buffer.concat(chunks).toString('latin1');
  };
  assert.match(await viaProxyProtocol('203.0.113.10'), /^HTTP\/1\.1 200 /);
  assert.match(await viaProxyProtocol('198.51.100.7'), /^HTTP\/1\.1 403 [^]*Requests from 198\.51\.100\.7 are not allowed/);
  assert.equal(seenOn('/cidr').length, 2, 'only the allowed ones reached the app');
});

test('CIDR with IPv6 blocks (a trusted proxy names the client): allowed inside the block, 403 inside the denied one and outside', async () => {
  const host = await tunnel('cidr-v6', { allow_cidr: ['2001:db8:aa::/48', '203.0.113.0/24'], deny_cidr: ['2001:db8:aa:bad::/64'] });
  const allowed = await publicCall(host, '/cidr6', { headers: { 'x-forwarded-for': '2001:db8:aa:1::7' } });
  assert.equal(allowed.status, 200);
  assert.equal(seenOn('/cidr6')[0]!.headers['x-forwarded-for'], '2001:db8:aa:1::7, 127.0.0.1');
  const denied = await publicCall(host, '/cidr6', { headers: { 'x-forwarded-for': '2001:db8:aa:bad::1' } });
  assert.deepEqual([denied.status, denied.json.error.code, denied.json.error.message], [403, 'ADDRESS_FORBIDDEN', 'Requests from 2001:db8:aa:bad::1 are not allowed on this tunnel.']);
  assert.equal((await publicCall(host, '/cidr6', { headers: { 'x-forwarded-for': '2001:db8:bb::1' } })).status, 403);
  assert.equal(seenOn('/cidr6').length, 1);
});

test('header rules: request headers set and removed for the app, response headers set and removed for the client; Burrow-User-Email from the public never passes', async () => {
  const host = await tunnel('headers-live', {
    request_header_add: [{ name: 'X-Tenant', value: 'blue' }],
    request_header_remove: ['X-Debug'],
    response_header_add: [{ name: 'X-Frame-Options', value: 'DENY' }],
    response_header_remove: ['Server', 'x-powered-by'],
  });
  const answer = await publicCall(host, '/headers', { headers: { 'x-tenant': 'forged', 'x-debug': '1', 'burrow-user-email': 'mallory@example.test', 'x-kept': 'yes' } });
  assert.equal(answer.status, 200);
  assert.equal(answer.headers['x-frame-options'], 'DENY');
  assert.equal(answer.headers.server, undefined);
  assert.equal(answer.headers['x-powered-by'], undefined);
  assert.equal(answer.headers['content-type'], 'application/json');
  const got = seenOn('/headers')[0]!.headers;
  assert.equal(got['x-tenant'], 'blue');
  assert.equal(got['x-debug'], undefined);
  assert.equal(got['burrow-user-email'], undefined);
  assert.equal(got['x-kept'], 'yes');
  // The capture keeps the local server's own answer, and the request as it was forwarded.
  const detail = await capture((await captures('headers-live'))[0].id);
  assert.ok(detail.response.headers.some(([name, value]: [string, string]) => name.toLowerCase() === 'server' && value === 'local-app'));
  assert.ok(detail.request.headers.some(([name, value]: [string, string]) => name === 'X-Tenant' && value === 'blue'));
});

test('rate limit: N per period per client address, then 429 with Retry-After and RateLimit-*; another address has its own', async () => {
  const host = await tunnel('rate-live', { rate_limit: { requests: 3, period_seconds: 60 } });
  for (let i = 0; i < 3; i++) assert.equal((await publicCall(host, '/rate', { headers: { 'x-forwarded-for': '203.0.113.20' } })).status, 200);
  const limited = await publicCall(host, '/rate', { headers: { 'x-forwarded-for': '203.0.113.20' } });
  assert.deepEqual([limited.status, limited.json.error.code], [429, 'RATE_LIMITED']);
  assert.match(limited.json.error.message, /^At most 3 requests per 60 s from one address on this tunnel\. Retry after [0-9]+ s\.$/);
  assert.match(String(limited.headers['retry-after']), /^[1-9][0-9]?$/);
  assert.equal(limited.headers['ratelimit-limit'], '3');
  assert.equal(limited.headers['ratelimit-remaining'], '0');
  assert.equal(limited.headers['ratelimit-reset'], limited.headers['retry-after']);
  assert.equal((await publicCall(host, '/rate', { headers: { 'x-forwarded-for': '203.0.113.21' } })).status, 200);
  assert.equal(seenOn('/rate').length, 4);
});

const GITHUB_SECRET = 'live-github-secret';
const sign = (body: string | Buffer): string => `sha256=${createHmac('sha256', GITHUB_SECRET).update(body).digest('hex')}`;

test('webhook verification: signed reaches the app byte-exact (its own SDK check passes); forged and unsigned are 401, never forwarded, kept as captures marked rejected: signature; 413 over the cap', async () => {
  const host = await tunnel('hooks-live', { verify_webhook: [{ provider: 'github', secret: GITHUB_SECRET }] });
  const body = Buffer.from(JSON.stringify({ action: 'opened', pad: 'é'.repeat(400) }));
  const signed = await publicCall(host, '/github', { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': sign(body), 'x-github-event': 'push' }, body });
  assert.equal(signed.status, 200, signed.text);
  const delivered = seenOn('/github')[0]!;
  assert.ok(delivered.body.equals(body), 'byte-exact');
  assert.equal(await githubVerify(GITHUB_SECRET, delivered.body.toString('utf8'), String(delivered.headers['x-hub-signature-256'])), true, "the app's own check (GitHub's SDK) passes");

  // A chunked upload is read whole, verified, then forwarded whole.
  const pieces = [body.subarray(0, 300), body.subarray(300)];
  const streamed = await publicCall(host, '/github', { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': sign(body) }, body: Readable.from(pieces) });
  assert.equal(streamed.status, 200, streamed.text);
  assert.ok(seenOn('/github')[1]!.body.equals(body));

  const forgedBody = JSON.stringify({ action: 'deleted' });
  const forged = await publicCall(host, '/github', { method: 'POST', headers: { 'content-type': 'application/json', 'x-hub-signature-256': sign('something else') }, body: forgedBody });
  assert.deepEqual([forged.status, forged.json.error.code, forged.headers['burrow-error']], [401, 'SIGNATURE_INVALID', 'SIGNATURE_INVALID']);
  assert.equal(forged.json.error.message, 'The webhook signature does not verify: github: the X-Hub-Signature-256 signature does not match the body.');
  const unsigned = await publicCall(host, '/github', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"junk":1}' });
  assert.equal(unsigned.status, 401);
  assert.equal(unsigned.json.error.message, 'The webhook signature does not verify: github: no X-Hub-Signature-256 header.');
  const tooLarge = await publicCall(host, '/github', { method: 'POST', headers: { 'x-hub-signature-256': sign('x') }, body: Buffer.alloc(1024 * 1024 + 1, 'a') });
  assert.deepEqual([tooLarge.status, tooLarge.json.error.code], [413, 'PAYLOAD_TOO_LARGE']);
  assert.equal(seenOn('/github').length, 2, 'nothing unverified reached the local server');

  // The API: refused ones are captured and marked; the detail keeps the body as sent and the 401 as answered.
  const listed = await captures('hooks-live');
  assert.deepEqual(listed.map((entry) => [entry.status, entry.rejected ?? null]), [[401, 'signature'], [401, 'signature'], [200, null], [200, null]], 'the 413 is not captured');
  const forgedCapture = await capture(listed[1].id);
  assert.equal(forgedCapture.rejected, 'signature');
  assert.equal(forgedCapture.error, 'SIGNATURE_INVALID');
  assert.equal(forgedCapture.request.body, forgedBody);
  assert.deepEqual(forgedCapture.response.headers, [['Content-Type', 'application/json'], ['Burrow-Error', 'SIGNATURE_INVALID']]);
  assert.equal(JSON.parse(forgedCapture.response.body).error.code, 'SIGNATURE_INVALID');
  const unsignedCapture = await capture(listed[0].id);
  assert.deepEqual([unsignedCapture.request.body, unsignedCapture.request.body_size, unsignedCapture.request.truncated], ['', 10, true], 'refused from its head: the body was not read');
});

test('the rejected mark where people look: `burrow requests` (table and show), the inspector\'s history from the edge, and the dashboard\'s Requests page in Chromium', { timeout: 60_000 }, async () => {
  // The captures of the webhook test above, on hooks-live: two refused (401, rejected: signature), two delivered.
  const env = { XDG_CONFIG_HOME: tempDir('burrow-cli-'), BURROW_TOKEN: '', BURROW_EDGE: '' };
  const cli = (args: string[]) => runCli([...args, '--edge', edge.url, '--token', account.token], env);
  const table = await cli(['requests', 'hooks-live']);
  assert.equal(table.code, 0, table.stderr);
  const rows = table.stdout.split('\n').filter((line) => line.includes('/github'));
  assert.equal(rows.filter((line) => / 401 rejected: signature /.test(line)).length, 2, table.stdout);
  assert.equal(rows.filter((line) => / 200 /.test(line) && !line.includes('rejected')).length, 2, table.stdout);
  const [refused] = await captures('hooks-live');
  const shown = await cli(['requests', 'show', refused.id]);
  assert.equal(shown.code, 0, shown.stderr);
  assert.match(shown.stdout, /^rejected {6}signature: refused by the edge, never sent to the local server$/m);

  const inspector = await Inspector.start({ port: 0, edge: edge.url, token: account.token, historyCount: 10 });
  try {
    inspector.attach(clientOf.get('hooks-live')!);
    await waitFor(async () => (await inspect(inspector, 'GET', '/api/status')).json.history.loaded === 4, 5_000, 'the history');
    const list = (await inspect(inspector, 'GET', '/api/requests?summary=1')).json.requests;
    assert.deepEqual(list.map((item: any) => [item.status, item.source, item.rejected]), [[401, 'edge', 'signature'], [401, 'edge', 'signature'], [200, 'edge', null], [200, 'edge', null]]);
  } finally {
    inspector.close();
  }

  const browser = await launchChromium();
  try {
    const page = await browser.context.newPage();
    await page.goto(`http://localhost:${edge.port}/`);
    await page.getByLabel('Access token', { exact: true }).fill(account.token);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('link', { name: 'Requests', exact: true }).click();
    await page.getByLabel('Tunnel', { exact: true }).selectOption('hooks-live');
    const marked = page.getByRole('row').filter({ hasText: 'rejected: signature' });
    await marked.first().waitFor();
    assert.equal(await marked.count(), 2);
    await marked.first().click();
    await page.getByText('signature: refused by the edge: the webhook signature did not verify (401); it never reached the local server').waitFor();
  } finally {
    await browser.close();
  }
});

test('webhook verification with Expect: 100-continue (curl): the edge answers the 100, reads and verifies the body, the app gets it without the Expect', async () => {
  const host = await tunnel('hooks-expect', { verify_webhook: [{ provider: 'github', secret: GITHUB_SECRET }] });
  const body = JSON.stringify({ action: 'expect', pad: 'x'.repeat(2048) });
  const answer = await curl(edge.port, host, '/expect', ['-H', 'Expect: 100-continue', '-H', `X-Hub-Signature-256: ${sign(body)}`, '-H', 'content-type: application/json', '--data-binary', body]);
  assert.equal(answer.status, 200, answer.body);
  assert.deepEqual(answer.statusLines, ['HTTP/1.1 100 Continue', 'HTTP/1.1 200 OK']);
  const delivered = seenOn('/expect')[0]!;
  assert.equal(delivered.body.toString(), body);
  assert.equal(delivered.headers.expect, undefined);
});

test('replays of a verified capture (the API, as the inspector sends them) are not verified again: they go through the tunnel as OPEN, not the public path', async () => {
  const host = await tunnel('hooks-replay', { verify_webhook: [{ provider: 'github', secret: GITHUB_SECRET }] });
  const body = JSON.stringify({ action: 'replay-me' });
  assert.equal((await publicCall(host, '/replay', { method: 'POST', headers: { 'x-hub-signature-256': sign(body) }, body })).status, 200);
  const [original] = await captures('hooks-replay');
  // As captured, and with a body the signature no longer covers: both reach the app.
  const asCaptured = await call(edge, 'POST', `/api/v1/requests/${original.id}/replay`, { token: account.token, body: {} });
  assert.equal(asCaptured.status, 200, asCaptured.text);
  const edited = await call(edge, 'POST', `/api/v1/requests/${original.id}/replay`, { token: account.token, body: { body: '{"action":"edited"}' } });
  assert.equal(edited.status, 200, edited.text);
  assert.equal(edited.json.replay_of, original.id);
  assert.deepEqual(seenOn('/replay').map((entry) => entry.body.toString()), [body, body, '{"action":"edited"}']);
  assert.equal((await captures('hooks-replay')).filter((entry) => entry.rejected !== undefined).length, 0);
});

test('upgrades meet the policy too: a WebSocket without credentials is refused 401, with them it is switched and echoes', async () => {
  const host = await tunnel('ws-live', { basic_auth: [{ user: 'ann', password: 's3cret' }] });
  const refused = new WebSocket(`ws://127.0.0.1:${edge.port}/socket`, { headers: { host } });
  const [, response] = (await once(refused, 'unexpected-response')) as [unknown, { statusCode: number; headers: IncomingHttpHeaders }];
  assert.equal(response.statusCode, 401);
  assert.equal(response.headers['www-authenticate'], 'Basic realm="ws-live", charset="UTF-8"');
  refused.on('error', () => undefined);
  refused.terminate();
  const socket = new WebSocket(`ws://127.0.0.1:${edge.port}/socket`, { headers: { host, authorization: `Basic ${Buffer.from('ann:s3cret').toString('base64')}` } });
  await once(socket, 'open');
  socket.send('hello');
  const [message] = await once(socket, 'message');
  assert.equal(String(message), 'hello');
  socket.close();
  await once(socket, 'close');
});

test('a stored policy changed through the API applies to the live tunnel at once; removed, the tunnel is open again', async () => {
  assert.equal((await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: 'changing' } })).status, 201);
  const started = await startClient(edge, account.token, local.port, { subdomain: 'changing' });
  clients.push(started.client);
  assert.equal((await publicCall(started.host, '/changing')).status, 200);
  const put = await call(edge, 'PUT', '/api/v1/reserved-subdomains/changing/policy', { token: account.token, body: { deny_cidr: ['127.0.0.0/8'] } });
  assert.equal(put.status, 200, put.text);
  await waitFor(async () => (await publicCall(started.host, '/changing')).status === 403, 5_000, 'the new policy applied');
  assert.equal((await call(edge, 'DELETE', '/api/v1/reserved-subdomains/changing/policy', { token: account.token })).status, 204);
  await waitFor(async () => (await publicCall(started.host, '/changing')).status === 200, 5_000, 'the policy removed');
});

/** A PROXY protocol v2 header (TCP over IPv4) naming `source` as the client. */
function proxyV2(source: string): Buffer {
  const signature = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
  const addresses = Buffer.alloc(12);
  source.split('.').forEach((octet, i) => addresses.writeUInt8(Number(octet), i));
  [127, 0, 0, 1].forEach((octet, i) => addresses.writeUInt8(octet, 4 + i));
  addresses.writeUInt16BE(40_000, 8);
  addresses.writeUInt16BE(edge.port, 10);
  return Buffer.concat([signature, Buffer.from([0x21, 0x11, 0x00, 12]), addresses]);
}
