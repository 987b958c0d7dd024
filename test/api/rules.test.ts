/**
 * The spec's rules one by one (sections 2, 3, 4, 5, 7, 8) and Burrow's decisions where it says "not shown"
 * (DESIGN.md section 4), against a real edge with real LMDB. Tunnels and captured requests, which need a
 * live tunnel, are in rules-tunnels.test.ts; the rate limit in rate-limit.test.ts.
 */
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ERROR_CODES, type ErrorCode } from '../../src/errors.js';
import { assertApiError, call, createAccount, ISO_UTC, startEdge, waitFor, type HttpResult, type TestAccount, type TestEdge } from '../helpers.js';

const TOKEN = /^svc_pat_([0-9a-f]{8})_([0-9a-f]{36})$/;

/** The error shape of spec section 7, with the status this table expects for the code. */
function assertError(response: HttpResult, status: number, code: ErrorCode): void {
  assert.equal(ERROR_CODES[code].status, status, `the registry gives ${code} another status`);
  assertApiError(response, code);
}

/** Field names in order, and each field's JSON type. */
function shape(value: Record<string, unknown>): Record<string, string> {
  return Object.fromEntries(Object.entries(value).map(([key, field]) => [key, field === null ? 'null' : Array.isArray(field) ? 'array' : typeof field]));
}

let target: TestEdge;
let alice: TestAccount;
let bob: TestAccount;
let pro: TestAccount;

before(async () => {
  // Large limits: this file checks the rules, rate-limit.test.ts the limits.
  target = await startEdge({ rateLimit: 1_000_000, authFailureLimit: 1_000_000 });
  alice = await createAccount(target);
  bob = await createAccount(target);
  pro = await createAccount(target, 'PRO');
});
after(() => target.close());

const get = (path: string, token?: string) => call(target, 'GET', path, token === undefined ? {} : { token });
const post = (path: string, token: string, body: unknown) => call(target, 'POST', path, { token, body });
const del = (path: string, token: string) => call(target, 'DELETE', path, { token });

describe('accounts: GET /api/v1/auth/me', () => {
  test('answers the account: exactly {id: usr_…, email, plan}', async () => {
    const response = await get('/api/v1/auth/me', alice.token);
    assert.equal(response.status, 200);
    assert.match(String(response.headers['content-type']), /^application\/json/);
    assert.deepEqual(response.json, { id: alice.id, email: alice.email, plan: 'FREE' });
    assert.match(response.json.id, /^usr_[0-9a-f]+$/);
  });

  test('a PRO account says PRO', async () => {
    assert.equal((await get('/api/v1/auth/me', pro.token)).json.plan, 'PRO');
  });
});

describe('tokens (spec sections 2, 3, 4)', () => {
  test('POST /api/v1/tokens: 201 with exactly id, label, prefix, token, created_at in the spec format', async () => {
    const response = await post('/api/v1/tokens', pro.token, { label: 'ci' });
    assert.equal(response.status, 201);
    assert.deepEqual(shape(response.json), { id: 'string', label: 'string', prefix: 'string', token: 'string', created_at: 'string' });
    const { id, label, prefix, token, created_at: createdAt } = response.json;
    const match = TOKEN.exec(token);
    assert.ok(match, `token ${token} is svc_pat_<8 hex>_<36 hex>`);
    assert.equal(id, `tok_${match[1]}`, 'the id segment is the token id suffix');
    assert.equal(prefix, `svc_pat_${match[1]}`, 'the prefix is the first two parts');
    assert.equal(label, 'ci');
    assert.match(createdAt, ISO_UTC);
    // The new token works at once, on the same account.
    assert.equal((await get('/api/v1/auth/me', token)).json.id, pro.id);
  });

  test('the secret is returned once: lists show only the prefix, never the token', async () => {
    const created = (await post('/api/v1/tokens', pro.token, { label: 'once' })).json;
    const list = await get('/api/v1/tokens', pro.token);
    assert.equal(list.status, 200);
    assert.deepEqual(Object.keys(list.json), ['tokens']);
    const entry = list.json.tokens.find((t: { id: string }) => t.id === created.id);
    assert.deepEqual(entry, { id: created.id, label: 'once', prefix: created.prefix, created_at: created.created_at, last_used_at: null });
    assert.equal(list.text.includes(created.token.slice(-36)), false, 'no secret segment anywhere in the list');
    for (const token of list.json.tokens) {
      assert.deepEqual(shape(token), { id: 'string', label: 'string', prefix: 'string', created_at: 'string', last_used_at: token.last_used_at === null ? 'null' : 'string' });
    }
  });

  test('last_used_at: null before the first use, an ISO timestamp after', async () => {
    const created = (await post('/api/v1/tokens', pro.token, { label: 'usage' })).json;
    const lastUsed = async () => (await get('/api/v1/tokens', pro.token)).json.tokens.find((t: { id: string }) => t.id === created.id).last_used_at;
    assert.equal(await lastUsed(), null);
    assert.equal((await get('/api/v1/auth/me', created.token)).status, 200);
    let seen: string | null = null;
    // The use is recorded in lmdb's next batch, not before the response.
    await waitFor(async () => (seen = await lastUsed()) !== null, 5_000, 'last_used_at');
    assert.match(seen!, ISO_UTC);
    assert.ok(Date.parse(seen!) >= Date.parse(created.created_at));
  });

  test('list: active tokens of the caller only, oldest first', async () => {
    const list = (await get('/api/v1/tokens', bob.token)).json.tokens;
    assert.deepEqual(list.map((t: { id: string }) => t.id), [bob.tokenId]);
    const times = (await get('/api/v1/tokens', pro.token)).json.tokens.map((t: { created_at: string }) => t.created_at);
    assert.deepEqual(times, [...times].sort());
  });

  test('DELETE /api/v1/tokens/:id: 204 without a body; the token is no longer listed and answers 401', async () => {
    const created = (await post('/api/v1/tokens', pro.token, { label: 'to revoke' })).json;
    const response = await del(`/api/v1/tokens/${created.id}`, pro.token);
    assert.equal(response.status, 204);
    assert.equal(response.text, '');
    assert.equal(response.headers['content-length'], undefined, 'a 204 carries no Content-Length');
    const ids = (await get('/api/v1/tokens', pro.token)).json.tokens.map((t: { id: string }) => t.id);
    assert.equal(ids.includes(created.id), false);
    assertError(await get('/api/v1/auth/me', created.token), 401, 'UNAUTHORIZED');
    assertError(await get('/api/v1/tokens', created.token), 401, 'UNAUTHORIZED');
    // Revoking again: it no longer exists as an active token.
    assertError(await del(`/api/v1/tokens/${created.id}`, pro.token), 404, 'NOT_FOUND');
  });

  test('a token may revoke itself; afterwards it answers 401', async () => {
    const created = (await post('/api/v1/tokens', pro.token, { label: 'self' })).json;
    assert.equal((await del(`/api/v1/tokens/${created.id}`, created.token)).status, 204);
    assertError(await get('/api/v1/auth/me', created.token), 401, 'UNAUTHORIZED');
  });

  test('FREE allows 5 active tokens: the 6th is 403 TOKEN_LIMIT_REACHED, a revoke frees one slot', async () => {
    const carol = await createAccount(target);
    const made: string[] = [];
    for (let i = 1; i < 5; i++) {
      const response = await post('/api/v1/tokens', carol.token, { label: `t${i}` });
      assert.equal(response.status, 201);
      made.push(response.json.id);
    }
    assert.equal((await get('/api/v1/tokens', carol.token)).json.tokens.length, 5);
    assertError(await post('/api/v1/tokens', carol.token, { label: 'sixth' }), 403, 'TOKEN_LIMIT_REACHED');
    assert.equal((await get('/api/v1/tokens', carol.token)).json.tokens.length, 5, 'nothing was created');
    assert.equal((await del(`/api/v1/tokens/${made[0]}`, carol.token)).status, 204);
    assert.equal((await post('/api/v1/tokens', carol.token, { label: 'in the freed slot' })).status, 201);
    assertError(await post('/api/v1/tokens', carol.token, { label: 'over again' }), 403, 'TOKEN_LIMIT_REACHED');
  });

  test('concurrent creates never pass the cap', async () => {
    const erin = await createAccount(target);
    const responses = await Promise.all(Array.from({ length: 8 }, (_, i) => post('/api/v1/tokens', erin.token, { label: `race ${i}` })));
    assert.deepEqual(responses.map((r) => r.status).sort(), [201, 201, 201, 201, 403, 403, 403, 403]);
    assert.equal((await get('/api/v1/tokens', erin.token)).json.tokens.length, 5);
  });

  const notOnTheAccount: [name: string, id: () => string][] = [
    ["another account's token", () => bob.tokenId],
    ['an unknown token id', () => 'tok_00000000'],
    ['a malformed id', () => 'not-a-token-id'],
    ['an upper-case id', () => bob.tokenId.toUpperCase()],
    ['the prefix instead of the id', () => `svc_pat_${bob.tokenId.slice(4)}`],
  ];
  for (const [name, id] of notOnTheAccount) {
    test(`DELETE ${name}: 404 NOT_FOUND, and nothing is revoked`, async () => {
      assertError(await del(`/api/v1/tokens/${encodeURIComponent(id())}`, alice.token), 404, 'NOT_FOUND');
      assert.equal((await get('/api/v1/auth/me', bob.token)).status, 200);
    });
  }
});

describe('labels (DESIGN.md section 4: required, trimmed, 1-64 characters, no control characters)', () => {
  const accepted: [name: string, label: string, stored: string][] = [
    ['one character', 'a', 'a'],
    ['64 characters', 'x'.repeat(64), 'x'.repeat(64)],
    ['trimmed', '  deploy bot \t', 'deploy bot'],
    ['64 characters after trimming', ` ${'y'.repeat(64)} `, 'y'.repeat(64)],
    ['64 emoji (counted as characters, not UTF-16 units)', '🦡'.repeat(64), '🦡'.repeat(64)],
    ['unicode letters and punctuation', 'Jürgen’s laptop (été)', 'Jürgen’s laptop (été)'],
  ];
  for (const [name, label, stored] of accepted) {
    test(`accepted: ${name}`, async () => {
      const response = await post('/api/v1/tokens', pro.token, { label });
      assert.equal(response.status, 201, response.text);
      assert.equal(response.json.label, stored);
      const listed = (await get('/api/v1/tokens', pro.token)).json.tokens.find((t: { id: string }) => t.id === response.json.id);
      assert.equal(listed.label, stored);
      assert.equal((await del(`/api/v1/tokens/${response.json.id}`, pro.token)).status, 204);
    });
  }

  const refused: [name: string, body: unknown][] = [
    ['missing', {}],
    ['empty', { label: '' }],
    ['only spaces', { label: '   ' }],
    ['65 characters', { label: 'x'.repeat(65) }],
    ['65 emoji', { label: '🦡'.repeat(65) }],
    ['a NUL', { label: 'a\u0000b' }],
    ['a newline inside', { label: 'a\nb' }],
    ['a tab inside', { label: 'a\tb' }],
    ['an escape', { label: 'a\u001b[31mred' }],
    ['DEL', { label: 'a\u007f' }],
    ['a C1 control', { label: 'a\u0085b' }],
    ['a line separator', { label: 'a\u2028b' }],
    ['a lone surrogate (regression: stored as U+FFFD, listed unlike created)', { label: 'a\ud800b' }],
    ['a number', { label: 5 }],
    ['null', { label: null }],
    ['a boolean', { label: true }],
    ['an array', { label: ['a'] }],
    ['an object', { label: { text: 'a' } }],
  ];
  for (const [name, body] of refused) {
    test(`refused with 400 INVALID_REQUEST: ${name}`, async () => {
      const before = (await get('/api/v1/tokens', pro.token)).json.tokens.length;
      assertError(await post('/api/v1/tokens', pro.token, body), 400, 'INVALID_REQUEST');
      assert.equal((await get('/api/v1/tokens', pro.token)).json.tokens.length, before);
    });
  }

  test('unknown fields are refused (400 INVALID_REQUEST), not ignored', async () => {
    const response = await post('/api/v1/tokens', pro.token, { label: 'ok', scopes: ['admin'] });
    assertError(response, 400, 'INVALID_REQUEST');
    assert.match(response.json.error.message, /scopes/);
  });

  test('a body that is not JSON-typed is 415 UNSUPPORTED_MEDIA_TYPE', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonp', 'multipart/form-data; boundary=x']) {
      const response = await call(target, 'POST', '/api/v1/tokens', { token: pro.token, rawBody: '{"label":"x"}', headers: { 'content-type': type } });
      assertError(response, 415, 'UNSUPPORTED_MEDIA_TYPE');
    }
    const none = await call(target, 'POST', '/api/v1/tokens', { token: pro.token, rawBody: '{"label":"x"}' });
    assertError(none, 415, 'UNSUPPORTED_MEDIA_TYPE');
  });

  test('JSON content types with parameters or a +json suffix are accepted', async () => {
    for (const type of ['application/json; charset=utf-8', 'APPLICATION/JSON', 'application/vnd.burrow+json']) {
      const response = await call(target, 'POST', '/api/v1/tokens', { token: pro.token, rawBody: '{"label":"typed"}', headers: { 'content-type': type } });
      assert.equal(response.status, 201, `${type}: ${response.text}`);
      await del(`/api/v1/tokens/${response.json.id}`, pro.token);
    }
  });
});

describe('authentication (spec section 5)', () => {
  const authenticated: [method: string, path: string][] = [
    ['GET', '/api/v1/auth/me'],
    ['GET', '/api/v1/tokens'],
    ['POST', '/api/v1/tokens'],
    ['DELETE', '/api/v1/tokens/tok_00000000'],
    ['GET', '/api/v1/tunnels'],
    ['GET', '/api/v1/tunnels/some-name'],
    ['DELETE', '/api/v1/tunnels/some-name'],
    ['GET', '/api/v1/requests?subdomain=some-name'],
    ['GET', '/api/v1/requests/req_0000000100000000000a'],
    ['POST', '/api/v1/requests/req_0000000100000000000a/replay'],
    ['GET', '/api/v1/billing/summary'],
    ['GET', '/api/v1/reserved-subdomains'],
    ['POST', '/api/v1/reserved-subdomains'],
    ['DELETE', '/api/v1/reserved-subdomains/some-name'],
    ['PATCH', '/api/v1/reserved-subdomains/some-name'],
    ['GET', '/api/v1/queue?subdomain=some-name'],
    ['POST', '/api/v1/queue/pause?subdomain=some-name'],
    ['POST', '/api/v1/queue/resume?subdomain=some-name'],
    ['POST', '/api/v1/queue/evt_000000000000000000000000/deliver'],
    ['DELETE', '/api/v1/queue/evt_000000000000000000000000'],
    ['DELETE', '/api/v1/queue?subdomain=some-name&state=all'],
  ];
  const credentials: [name: string, headers: () => Record<string, string>][] = [
    ['no Authorization header', () => ({})],
    ['a malformed token', () => ({ authorization: 'Bearer svc_pat_nothex' })],
    ['an unknown token', () => ({ authorization: `Bearer svc_pat_00000000_${'0'.repeat(36)}` })],
  ];
  for (const [method, path] of authenticated) {
    for (const [name, headers] of credentials) {
      test(`${method} ${path} with ${name}: 401 UNAUTHORIZED`, async () => {
        const response = await call(target, method, path, { headers: headers() });
        assertError(response, 401, 'UNAUTHORIZED');
        assert.equal(response.headers['www-authenticate'], 'Bearer realm="burrow"');
        assert.equal(response.headers['ratelimit-limit'], undefined, 'no rate headers without a token');
      });
    }
  }
});

describe('instance metadata: GET /api/v1/instance (public)', () => {
  test('answers without Authorization: exactly {build, region, server_time} and the agent_url extension', async () => {
    const response = await get('/api/v1/instance');
    assert.equal(response.status, 200);
    assert.deepEqual(shape(response.json), { build: 'string', region: 'string', server_time: 'string', agent_url: 'string' });
    assert.equal(response.json.agent_url, `ws://localhost:${target.edge.agentPort}/api/v1/connect`);
    assert.match(response.json.server_time, ISO_UTC);
    assert.equal(response.json.region, 'local');
    assert.match(response.json.build, /^\d+\.\d+\.\d+/);
  });

  test('an invalid token does not matter on the public endpoint', async () => {
    const response = await call(target, 'GET', '/api/v1/instance', { headers: { authorization: 'Bearer nonsense' } });
    assert.equal(response.status, 200);
  });
});

describe('health endpoints do not exist (spec sections 1, 7)', () => {
  for (const path of ['/health', '/api/v1/health', '/health/', '/api/v1/health/']) {
    for (const [name, token] of [['without a token', undefined], ['with a token', () => alice.token]] as const) {
      test(`GET ${path} ${name}: 404 NOT_FOUND`, async () => {
        assertError(await get(path, token?.()), 404, 'NOT_FOUND');
      });
    }
  }
});

describe('billing summary: GET /api/v1/billing/summary', () => {
  test('{plan, period:{start,end}, usage:{…}, limits:{…}} with FREE numbers', async () => {
    const response = await get('/api/v1/billing/summary', alice.token);
    assert.equal(response.status, 200);
    const body = response.json;
    assert.deepEqual(shape(body), { plan: 'string', period: 'object', usage: 'object', limits: 'object' });
    assert.equal(body.plan, 'FREE');
    assert.deepEqual(shape(body.period), { start: 'string', end: 'string' });
    assert.match(body.period.start, /^\d{4}-\d{2}-01T00:00:00\.000Z$/);
    assert.match(body.period.end, /^\d{4}-\d{2}-01T00:00:00\.000Z$/);
    const start = new Date(body.period.start);
    const end = new Date(body.period.end);
    assert.equal((start.getUTCMonth() + 1) % 12, end.getUTCMonth(), 'one calendar month');
    assert.ok(start.getTime() <= Date.now() && Date.now() < end.getTime());
    assert.deepEqual(shape(body.usage), { active_tokens: 'number', active_tunnels: 'number', requests: 'number', bytes_in: 'number', bytes_out: 'number' });
    assert.deepEqual(body.usage, { active_tokens: 1, active_tunnels: 0, requests: 0, bytes_in: 0, bytes_out: 0 });
    assert.deepEqual(body.limits, {
      active_tokens: 5,
      active_tunnels: 3,
      captured_requests_per_tunnel: 1_000,
      retention_hours: 24,
      requests_per_minute: 1_000_000,
      reserved_subdomains: 3,
    });
  });

  test('PRO numbers; active_tokens follows creates and revokes', async () => {
    const before = (await get('/api/v1/billing/summary', pro.token)).json;
    assert.equal(before.plan, 'PRO');
    assert.deepEqual(
      { ...before.limits, requests_per_minute: 0 },
      { active_tokens: 50, active_tunnels: 25, captured_requests_per_tunnel: 10_000, retention_hours: 168, requests_per_minute: 0, reserved_subdomains: 50 },
    );
    const listed = (await get('/api/v1/tokens', pro.token)).json.tokens.length;
    assert.equal(before.usage.active_tokens, listed);
    const created = (await post('/api/v1/tokens', pro.token, { label: 'count me' })).json;
    assert.equal((await get('/api/v1/billing/summary', pro.token)).json.usage.active_tokens, listed + 1);
    await del(`/api/v1/tokens/${created.id}`, pro.token);
    assert.equal((await get('/api/v1/billing/summary', pro.token)).json.usage.active_tokens, listed);
  });
});

describe('reserved subdomains (Burrow extension)', () => {
  test('GET: an empty list at first', async () => {
    const response = await get('/api/v1/reserved-subdomains', bob.token);
    assert.equal(response.status, 200);
    assert.deepEqual(response.json, { reserved_subdomains: [] });
  });

  test('POST: 201 {subdomain, created_at}; again: 200 with the same record; listed; lower-cased', async () => {
    const created = await post('/api/v1/reserved-subdomains', alice.token, { subdomain: 'Alice-Hooks' });
    assert.equal(created.status, 201);
    assert.deepEqual(shape(created.json), { subdomain: 'string', kind: 'string', created_at: 'string', offline: 'string', policy: 'null' });
    assert.equal(created.json.offline, 'off');
    assert.equal(created.json.subdomain, 'alice-hooks');
    assert.match(created.json.created_at, ISO_UTC);
    const again = await post('/api/v1/reserved-subdomains', alice.token, { subdomain: 'alice-hooks' });
    assert.equal(again.status, 200);
    assert.deepEqual(again.json, created.json);
    assert.deepEqual((await get('/api/v1/reserved-subdomains', alice.token)).json, { reserved_subdomains: [created.json] });
  });

  test("another account's reservation: 409 SUBDOMAIN_TAKEN to reserve, 404 to release", async () => {
    await post('/api/v1/reserved-subdomains', alice.token, { subdomain: 'alice-only' });
    assertError(await post('/api/v1/reserved-subdomains', bob.token, { subdomain: 'alice-only' }), 409, 'SUBDOMAIN_TAKEN');
    assertError(await del('/api/v1/reserved-subdomains/alice-only', bob.token), 404, 'NOT_FOUND');
    assert.ok((await get('/api/v1/reserved-subdomains', alice.token)).json.reserved_subdomains.some((r: { subdomain: string }) => r.subdomain === 'alice-only'));
  });

  test('DELETE: 204, then gone; again 404; then free for another account', async () => {
    await post('/api/v1/reserved-subdomains', alice.token, { subdomain: 'passing-on' });
    const response = await del('/api/v1/reserved-subdomains/passing-on', alice.token);
    assert.equal(response.status, 204);
    assert.equal(response.text, '');
    assertError(await del('/api/v1/reserved-subdomains/passing-on', alice.token), 404, 'NOT_FOUND');
    const taken = await post('/api/v1/reserved-subdomains', bob.token, { subdomain: 'passing-on' });
    assert.equal(taken.status, 201);
    assert.equal((await del('/api/v1/reserved-subdomains/PASSING-ON', bob.token)).status, 204, 'names are matched lower-cased');
  });

  const invalid: [name: string, body: unknown][] = [
    ['too short', { subdomain: 'ab' }],
    ['too long', { subdomain: 'a'.repeat(64) }],
    ['an underscore', { subdomain: 'my_hooks' }],
    ['a dot', { subdomain: 'my.hooks' }],
    ['a leading hyphen', { subdomain: '-hooks' }],
    ['a trailing hyphen', { subdomain: 'hooks-' }],
    ['a double hyphen', { subdomain: 'my--hooks' }],
    ['a reserved word', { subdomain: 'api' }],
    ['another reserved word', { subdomain: 'www' }],
    ['non-ASCII', { subdomain: 'héllo' }],
    ['a number', { subdomain: 12345 }],
    ['missing', {}],
    ['an unknown field', { subdomain: 'fine-name', forever: true }],
  ];
  for (const [name, body] of invalid) {
    test(`POST with ${name}: 400 INVALID_REQUEST`, async () => {
      assertError(await post('/api/v1/reserved-subdomains', bob.token, body), 400, 'INVALID_REQUEST');
    });
  }

  test('FREE may reserve 3: the 4th is 403 RESERVATION_LIMIT_REACHED; a release frees one', async () => {
    const dave = await createAccount(target);
    for (const name of ['dave-one', 'dave-two', 'dave-three']) {
      assert.equal((await post('/api/v1/reserved-subdomains', dave.token, { subdomain: name })).status, 201);
    }
    assertError(await post('/api/v1/reserved-subdomains', dave.token, { subdomain: 'dave-four' }), 403, 'RESERVATION_LIMIT_REACHED');
    // Re-reserving one already held is not a new reservation.
    assert.equal((await post('/api/v1/reserved-subdomains', dave.token, { subdomain: 'dave-one' })).status, 200);
    assert.equal((await del('/api/v1/reserved-subdomains/dave-two', dave.token)).status, 204);
    assert.equal((await post('/api/v1/reserved-subdomains', dave.token, { subdomain: 'dave-four' })).status, 201);
  });

  test('concurrent reservations never pass the cap (regression: the cap was checked outside the transaction)', async () => {
    const fran = await createAccount(target);
    const names = Array.from({ length: 6 }, (_, i) => `fran-race-${i}`);
    const responses = await Promise.all(names.map((subdomain) => post('/api/v1/reserved-subdomains', fran.token, { subdomain })));
    assert.deepEqual(responses.map((r) => r.status).sort(), [201, 201, 201, 403, 403, 403]);
    for (const refused of responses.filter((r) => r.status === 403)) assertError(refused, 403, 'RESERVATION_LIMIT_REACHED');
    assert.equal((await get('/api/v1/reserved-subdomains', fran.token)).json.reserved_subdomains.length, 3);
  });
});

describe('captured requests without a tunnel: GET /api/v1/requests', () => {
  const refused: [name: string, query: string, status: number, code: ErrorCode][] = [
    ['no subdomain', '', 400, 'INVALID_REQUEST'],
    ['an empty subdomain', '?subdomain=', 400, 'INVALID_REQUEST'],
    ['a subdomain the account never had', '?subdomain=never-had-it', 404, 'NOT_FOUND'],
    ['limit=0 (checked before the subdomain)', '?subdomain=never-had-it&limit=0', 400, 'INVALID_REQUEST'],
    ['limit=1001', '?subdomain=never-had-it&limit=1001', 400, 'INVALID_REQUEST'],
    ['limit=-1', '?subdomain=never-had-it&limit=-1', 400, 'INVALID_REQUEST'],
    ['limit=abc', '?subdomain=never-had-it&limit=abc', 400, 'INVALID_REQUEST'],
    ['limit=1.5', '?subdomain=never-had-it&limit=1.5', 400, 'INVALID_REQUEST'],
    ['an empty limit', '?subdomain=never-had-it&limit=', 400, 'INVALID_REQUEST'],
    ['a before that is not a request id', '?subdomain=never-had-it&before=xyz', 400, 'INVALID_REQUEST'],
  ];
  for (const [name, query, status, code] of refused) {
    test(`${name}: ${status} ${code}`, async () => {
      assertError(await get(`/api/v1/requests${query}`, alice.token), status, code);
    });
  }

  test('an unknown request id: 404 NOT_FOUND for detail and replay', async () => {
    for (const id of ['req_0000000100000000000a', 'req_nothing', 'nothing']) {
      assertError(await get(`/api/v1/requests/${id}`, alice.token), 404, 'NOT_FOUND');
      assertError(await call(target, 'POST', `/api/v1/requests/${id}/replay`, { token: alice.token }), 404, 'NOT_FOUND');
    }
  });
});

describe('tunnels without a tunnel', () => {
  test('GET /api/v1/tunnels: {"tunnels": []}', async () => {
    const response = await get('/api/v1/tunnels', bob.token);
    assert.equal(response.status, 200);
    assert.deepEqual(response.json, { tunnels: [] });
  });

  for (const method of ['GET', 'DELETE']) {
    test(`${method} /api/v1/tunnels/<unknown>: 404 NOT_FOUND`, async () => {
      assertError(await call(target, method, '/api/v1/tunnels/not-there', { token: bob.token }), 404, 'NOT_FOUND');
    });
  }
});

describe('routing (DESIGN.md section 4)', () => {
  const notAllowed: [method: string, path: string, allow: string][] = [
    ['PUT', '/api/v1/tokens', 'GET, HEAD, POST'],
    ['PATCH', '/api/v1/tokens', 'GET, HEAD, POST'],
    ['GET', '/api/v1/tokens/tok_00000000', 'DELETE'],
    ['POST', '/api/v1/auth/me', 'GET, HEAD'],
    ['POST', '/api/v1/instance', 'GET, HEAD'],
    ['DELETE', '/api/v1/billing/summary', 'GET, HEAD'],
    ['POST', '/api/v1/tunnels', 'GET, HEAD'],
    ['PUT', '/api/v1/tunnels/some-name', 'DELETE, GET, HEAD'],
    ['DELETE', '/api/v1/requests', 'GET, HEAD'],
    ['GET', '/api/v1/requests/req_1/replay', 'POST'],
    ['PUT', '/api/v1/reserved-subdomains', 'GET, HEAD, POST'],
    ['GET', '/api/v1/reserved-subdomains/some-name', 'DELETE, PATCH'],
  ];
  for (const [method, path, allow] of notAllowed) {
    test(`${method} ${path}: 405 METHOD_NOT_ALLOWED, Allow: ${allow}`, async () => {
      const response = await call(target, method, path, { token: alice.token });
      assertError(response, 405, 'METHOD_NOT_ALLOWED');
      assert.equal(response.headers.allow, allow);
    });
  }

  test('405 is answered before authentication', async () => {
    assertError(await call(target, 'PUT', '/api/v1/tokens'), 405, 'METHOD_NOT_ALLOWED');
  });

  // `/` is the web dashboard's page (docs/dashboard.md, test/edge/dashboard-session.test.ts).
  const unknown = ['/api', '/api/v1', '/api/v2/tokens', '/api/v1/token', '/api/v1/tokens/tok_1/extra', '/API/V1/TOKENS', '/api/v1//tokens', '/favicon.ico'];
  for (const path of unknown) {
    test(`GET ${path}: 404 NOT_FOUND`, async () => {
      assertError(await get(path, alice.token), 404, 'NOT_FOUND');
      assertError(await get(path), 404, 'NOT_FOUND');
    });
  }

  test('a single trailing slash is ignored', async () => {
    const plain = await get('/api/v1/auth/me', alice.token);
    const slash = await get('/api/v1/auth/me/', alice.token);
    assert.equal(slash.status, 200);
    assert.deepEqual(slash.json, plain.json);
  });

  test('HEAD on a GET route: the GET status and headers, no body', async () => {
    const getResponse = await get('/api/v1/auth/me', alice.token);
    const head = await call(target, 'HEAD', '/api/v1/auth/me', { token: alice.token });
    assert.equal(head.status, 200);
    assert.equal(head.text, '');
    assert.equal(head.headers['content-length'], String(Buffer.byteLength(getResponse.text)));
    assert.equal(head.headers['content-type'], getResponse.headers['content-type']);
    assert.equal((await call(target, 'HEAD', '/api/v1/instance')).status, 200);
    assert.equal((await call(target, 'HEAD', '/api/v1/health')).status, 404);
  });

  test('API responses are never cached', async () => {
    assert.equal((await get('/api/v1/auth/me', alice.token)).headers['cache-control'], 'no-store');
    assert.equal((await get('/api/v1/nothing')).headers['cache-control'], 'no-store');
  });

  test('a query string does not change the route', async () => {
    assert.equal((await get('/api/v1/auth/me?x=1&y', alice.token)).status, 200);
  });
});

describe('host dispatch (DESIGN.md sections 1, 5)', () => {
  const apiHosts: [name: string, host: () => string][] = [
    ['<domain>:port', () => `localhost:${target.port}`],
    ['<domain> without a port', () => 'localhost'],
    ['api.<domain>', () => `api.localhost:${target.port}`],
    ['upper case', () => `API.LOCALHOST:${target.port}`],
    ['a trailing dot', () => `localhost.:${target.port}`],
    ['an IPv4 literal', () => `127.0.0.1:${target.port}`],
    ['an IPv6 literal', () => `[::1]:${target.port}`],
  ];
  for (const [name, host] of apiHosts) {
    test(`the API answers on ${name}`, async () => {
      const response = await call(target, 'GET', '/api/v1/auth/me', { token: alice.token, host: host() });
      assert.equal(response.status, 200, response.text);
      assert.equal(response.json.id, alice.id);
    });
  }

  test('<sub>.<domain> is a tunnel, not the API: 404 TUNNEL_NOT_FOUND marked burrow-error', async () => {
    const response = await call(target, 'GET', '/api/v1/auth/me', { token: alice.token, host: `nobody-here.localhost:${target.port}` });
    assertError(response, 404, 'TUNNEL_NOT_FOUND');
    assert.equal(response.headers['burrow-error'], 'TUNNEL_NOT_FOUND');
  });

  const unknownHosts: [name: string, host: string][] = [
    ['another domain', 'example.com'],
    ['a domain ending like ours', 'evil-localhost'],
    ['a nested subdomain', 'a.b.localhost'],
    ['a bad port', 'localhost:http'],
  ];
  for (const [name, host] of unknownHosts) {
    test(`an unknown host (${name}): 404 NOT_FOUND`, async () => {
      assertError(await call(target, 'GET', '/api/v1/auth/me', { token: alice.token, host }), 404, 'NOT_FOUND');
    });
  }
});
