/**
 * The dashboard's serving and its session over plain HTTP against a real edge (docs/dashboard.md): the
 * page and its headers, the paths that stay the API's, sign-in only with a valid token, the cookie's
 * flags (Secure on an https edge), cookie requests authenticating as the token, the CSRF rule for
 * state-changing cookie requests (foreign Origin, no Origin with a simple content type, no custom
 * header), Bearer requests unaffected, sign-out and revocation ending the session at once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { assertApiError, call, createAccount, startEdge, tempDirs, type TestAccount, type TestEdge } from '../helpers.js';
import { makeServerCert } from '../tls-fixtures.js';

const certDirs = tempDirs('burrow-dashboard-tls-');

let target: TestEdge;
let alice: TestAccount;
let origin: string;

before(async () => {
  target = await startEdge({ authFailureLimit: 1_000 });
  alice = await createAccount(target);
  origin = `http://localhost:${target.port}`;
});
after(() => target?.close());

const browserHeaders = (extra: Record<string, string> = {}) => ({ origin, 'x-burrow-csrf': '1', ...extra });

async function signIn(token: string): Promise<string> {
  const response = await call(target, 'POST', '/api/v1/session', { body: { token }, headers: browserHeaders() });
  assert.equal(response.status, 201, response.text);
  const setCookie = String(response.headers['set-cookie']);
  const match = /^burrow_session=([A-Za-z0-9_-]{43});/.exec(setCookie);
  assert.ok(match, setCookie);
  return `burrow_session=${match[1]}`;
}

describe('the page', () => {
  test('/ on the API host is the dashboard with a strict CSP, nosniff and no referrer', async () => {
    for (const host of [`localhost:${target.port}`, `api.localhost:${target.port}`]) {
      const response = await call(target, 'GET', '/', { host });
      assert.equal(response.status, 200);
      assert.match(String(response.headers['content-type']), /^text\/html/);
      assert.match(response.text, /<label for="signin-token">Access token<\/label>/);
      const csp = String(response.headers['content-security-policy']);
      for (const directive of ["default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'", "base-uri 'none'"]) {
        assert.ok(csp.includes(directive), `${directive} in ${csp}`);
      }
      assert.equal(response.headers['x-content-type-options'], 'nosniff');
      assert.equal(response.headers['referrer-policy'], 'no-referrer');
    }
    for (const path of ['/dashboard/app.js', '/dashboard/exchange-format.js']) {
      const script = await call(target, 'GET', path);
      assert.equal(script.status, 200, path);
      assert.match(String(script.headers['content-type']), /^text\/javascript/);
      assert.ok(String(script.headers['content-security-policy']).includes("script-src 'self'"));
    }
  });

  test('other paths stay the API\'s: /health, /api/v1/health, unknown dashboard files and tunnel hosts answer 404', async () => {
    for (const path of ['/health', '/api/v1/health', '/dashboard/nope.js', '/dashboard/', '/index.html']) assertApiError(await call(target, 'GET', path), 'NOT_FOUND');
    assertApiError(await call(target, 'POST', '/'), 'NOT_FOUND');
    const tunnelHost = await call(target, 'GET', '/', { host: `quiet-river.localhost:${target.port}` });
    assert.equal(tunnelHost.status, 404);
    assert.doesNotMatch(tunnelHost.text, /Access token/);
  });
});

describe('the session', () => {
  test('no session without a valid token', async () => {
    for (const token of ['', 'nonsense', `${alice.token.slice(0, -2)}xx`]) {
      const response = await call(target, 'POST', '/api/v1/session', { body: { token }, headers: browserHeaders() });
      assert.ok(response.status === 400 || response.status === 401, response.text);
      assert.equal(response.headers['set-cookie'], undefined);
    }
    // No cookie and no token: not signed in, which is an answer (204), not an error (issue 29).
    const none = await call(target, 'GET', '/api/v1/session');
    assert.equal(none.status, 204, none.text);
    assert.equal(none.headers['set-cookie'], undefined);
    assertApiError(await call(target, 'GET', '/api/v1/session', { token: 'svc_pat_00000000_000000000000000000000000000000000000' }), 'UNAUTHORIZED');
    assertApiError(await call(target, 'GET', '/api/v1/session', { headers: { cookie: `burrow_session=${'A'.repeat(43)}` } }), 'UNAUTHORIZED');
    assertApiError(await call(target, 'GET', '/api/v1/tokens', { headers: { cookie: `burrow_session=${'A'.repeat(43)}` } }), 'UNAUTHORIZED');
  });

  test('the cookie is HttpOnly, SameSite=Strict, Path=/, host-only, and not Secure on plain http', async () => {
    const response = await call(target, 'POST', '/api/v1/session', { body: { token: alice.token }, headers: browserHeaders() });
    const setCookie = String(response.headers['set-cookie']);
    const attributes = setCookie.split(';').slice(1).map((part) => part.trim().toLowerCase());
    assert.ok(attributes.includes('httponly'), setCookie);
    assert.ok(attributes.includes('samesite=strict'), setCookie);
    assert.ok(attributes.includes('path=/'), setCookie);
    assert.ok(!attributes.some((attribute) => attribute.startsWith('domain=')), setCookie);
    assert.ok(!attributes.includes('secure'), setCookie);
    assert.ok(!response.text.includes(setCookie.split(';')[0]!.split('=')[1]!), 'the session id is only in the cookie');
    assert.equal(response.json.token_id, alice.tokenId);
  });

  test('an https edge sets Secure and expects its https origin', async () => {
    const secureEdge = await startEdge({ publicScheme: 'https', authFailureLimit: 1_000 });
    try {
      const bob = await createAccount(secureEdge);
      const httpOrigin = await call(secureEdge, 'POST', '/api/v1/session', { body: { token: bob.token }, headers: { origin: `http://localhost:${secureEdge.port}`, 'x-burrow-csrf': '1' } });
      assertApiError(httpOrigin, 'CSRF_REJECTED');
      const response = await call(secureEdge, 'POST', '/api/v1/session', { body: { token: bob.token }, headers: { origin: `https://localhost:${secureEdge.port}`, 'x-burrow-csrf': '1' } });
      assert.equal(response.status, 201, response.text);
      assert.match(String(response.headers['set-cookie']), /; Secure$/);
    } finally {
      await secureEdge.close();
    }
  });

  test('an edge on TLS serves the page over HTTPS and its cookie is __Host-burrow_session, Secure', async () => {
    const dir = certDirs();
    const pem = makeServerCert(dir, 'edge', ['localhost', '*.localhost'], null);
    const tlsEdge = await startEdge({ tls: { certFile: pem.cert, keyFile: pem.key }, authFailureLimit: 1_000 });
    const agent = new Agent({ connect: { ca: readFileSync(pem.cert, 'utf8'), servername: 'localhost' } });
    try {
      const carol = await createAccount(tlsEdge);
      const host = `localhost:${tlsEdge.port}`;
      const page = await request(`https://127.0.0.1:${tlsEdge.port}/`, { dispatcher: agent, headers: { host } });
      assert.equal(page.statusCode, 200);
      assert.match(await page.body.text(), /Access token/);
      const response = await request(`https://127.0.0.1:${tlsEdge.port}/api/v1/session`, {
        method: 'POST',
        dispatcher: agent,
        headers: { host, origin: `https://${host}`, 'x-burrow-csrf': '1', 'content-type': 'application/json' },
        body: JSON.stringify({ token: carol.token }),
      });
      await response.body.text();
      assert.equal(response.statusCode, 201);
      assert.match(String(response.headers['set-cookie']), /^__Host-burrow_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=\d+; Secure$/);
    } finally {
      await agent.close();
      await tlsEdge.close();
    }
  });

  test('behind a trusted proxy that terminates TLS, the forwarded origin is expected and the cookie is Secure', async () => {
    const proxied = await startEdge({ trustProxy: '127.0.0.1', authFailureLimit: 1_000 });
    try {
      const dave = await createAccount(proxied);
      const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'dash.example.org', 'x-forwarded-for': '203.0.113.9' };
      const asTheBrowserSawIt = await call(proxied, 'POST', '/api/v1/session', { body: { token: dave.token }, headers: { ...forwarded, origin: 'https://dash.example.org', 'x-burrow-csrf': '1' } });
      assert.equal(asTheBrowserSawIt.status, 201, asTheBrowserSawIt.text);
      assert.match(String(asTheBrowserSawIt.headers['set-cookie']), /; Secure$/);
      const internalOrigin = await call(proxied, 'POST', '/api/v1/session', { body: { token: dave.token }, headers: { ...forwarded, origin: `http://localhost:${proxied.port}`, 'x-burrow-csrf': '1' } });
      assertApiError(internalOrigin, 'CSRF_REJECTED');
    } finally {
      await proxied.close();
    }
    // Without trust, forwarded headers change nothing.
    const spoofed = await call(target, 'POST', '/api/v1/session', {
      body: { token: alice.token },
      headers: { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'evil.example', origin: 'https://evil.example', 'x-burrow-csrf': '1' },
    });
    assertApiError(spoofed, 'CSRF_REJECTED');
  });

  test('cookie requests authenticate as the token, with its rate-limit headers', async () => {
    const cookie = await signIn(alice.token);
    const me = await call(target, 'GET', '/api/v1/auth/me', { headers: { cookie } });
    assert.equal(me.status, 200);
    assert.equal(me.json.email, alice.email);
    assert.ok(me.headers['ratelimit-remaining'] !== undefined);
    const session = await call(target, 'GET', '/api/v1/session', { headers: { cookie } });
    assert.equal(session.json.token_id, alice.tokenId);
    assert.equal(session.json.account.email, alice.email);
    assert.equal(session.json.tunnel_url, `http://{subdomain}.localhost:${target.port}`);
    const created = await call(target, 'POST', '/api/v1/tokens', { body: { label: 'from-the-page' }, headers: { cookie, ...browserHeaders() } });
    assert.equal(created.status, 201, created.text);
  });

  test('cross-site state changes with the cookie are refused with 403 CSRF_REJECTED, and change nothing', async () => {
    const cookie = await signIn(alice.token);
    const before = (await call(target, 'GET', '/api/v1/tokens', { token: alice.token })).json.tokens.length;
    const attempts: Record<string, string>[] = [
      { cookie, origin: 'http://evil.example', 'x-burrow-csrf': '1' },
      { cookie, origin: `http://quiet-river.localhost:${target.port}`, 'x-burrow-csrf': '1' }, // a tunnel is same-site, not same-origin
      { cookie, origin: 'null', 'x-burrow-csrf': '1' },
      { cookie, 'x-burrow-csrf': '1' }, // no Origin
      { cookie, origin }, // no custom header
    ];
    for (const headers of attempts) {
      assertApiError(await call(target, 'POST', '/api/v1/tokens', { body: { label: 'csrf' }, headers }), 'CSRF_REJECTED');
    }
    // A form post: a simple content type and no Origin.
    const form = await call(target, 'POST', '/api/v1/tokens', { rawBody: 'label=csrf', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' } });
    assertApiError(form, 'CSRF_REJECTED');
    const textPlain = await call(target, 'POST', '/api/v1/reserved-subdomains', { rawBody: '{"subdomain":"csrf-name"}', headers: { cookie, 'content-type': 'text/plain', origin: 'http://evil.example' } });
    assertApiError(textPlain, 'CSRF_REJECTED');
    assertApiError(await call(target, 'DELETE', `/api/v1/tokens/${alice.tokenId}`, { headers: { cookie, origin: 'http://evil.example' } }), 'CSRF_REJECTED');
    assertApiError(await call(target, 'DELETE', '/api/v1/session', { headers: { cookie } }), 'CSRF_REJECTED');
    const afterwards = await call(target, 'GET', '/api/v1/tokens', { token: alice.token });
    assert.equal(afterwards.json.tokens.length, before);
    assert.deepEqual((await call(target, 'GET', '/api/v1/reserved-subdomains', { token: alice.token })).json.reserved_subdomains, []);
    // Sign-in itself follows the rule (no login CSRF).
    assertApiError(await call(target, 'POST', '/api/v1/session', { body: { token: alice.token }, headers: { origin: 'http://evil.example', 'x-burrow-csrf': '1' } }), 'CSRF_REJECTED');
  });

  test('signing in again ends the session the browser had', async () => {
    const first = await signIn(alice.token);
    const again = await call(target, 'POST', '/api/v1/session', { body: { token: alice.token }, headers: { cookie: first, ...browserHeaders() } });
    assert.equal(again.status, 201);
    assertApiError(await call(target, 'GET', '/api/v1/session', { headers: { cookie: first } }), 'UNAUTHORIZED');
    const second = String(again.headers['set-cookie']).split(';')[0]!;
    assert.equal((await call(target, 'GET', '/api/v1/session', { headers: { cookie: second } })).status, 200);
  });

  test('a CORS preflight from another origin is granted nothing', async () => {
    const preflight = await call(target, 'OPTIONS', '/api/v1/tokens', {
      headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-burrow-csrf, content-type' },
    });
    assert.notEqual(preflight.status, 204);
    for (const name of Object.keys(preflight.headers)) assert.doesNotMatch(name, /^access-control-/);
    const page = await call(target, 'GET', '/', { headers: { origin: 'http://evil.example' } });
    for (const name of Object.keys(page.headers)) assert.doesNotMatch(name, /^access-control-/);
  });

  test('Bearer requests are unaffected by the CSRF rule, with or without a cookie', async () => {
    const cookie = await signIn(alice.token);
    const response = await call(target, 'POST', '/api/v1/reserved-subdomains', { token: alice.token, body: { subdomain: 'bearer-name' }, headers: { cookie, origin: 'http://evil.example' } });
    assert.equal(response.status, 201, response.text);
    assert.equal((await call(target, 'DELETE', '/api/v1/reserved-subdomains/bearer-name', { token: alice.token })).status, 204);
  });

  test('sign out ends the session on the server', async () => {
    const cookie = await signIn(alice.token);
    const out = await call(target, 'DELETE', '/api/v1/session', { headers: { cookie, ...browserHeaders() } });
    assert.equal(out.status, 204);
    assert.match(String(out.headers['set-cookie']), /^burrow_session=; .*Max-Age=0/);
    assertApiError(await call(target, 'GET', '/api/v1/auth/me', { headers: { cookie } }), 'UNAUTHORIZED');
  });

  test("a revoked token's session stops working at once", async () => {
    const created = await call(target, 'POST', '/api/v1/tokens', { token: alice.token, body: { label: 'short-lived' } });
    const cookie = await signIn(created.json.token);
    assert.equal((await call(target, 'GET', '/api/v1/tunnels', { headers: { cookie } })).status, 200);
    assert.equal((await call(target, 'DELETE', `/api/v1/tokens/${created.json.id}`, { token: alice.token })).status, 204);
    assertApiError(await call(target, 'GET', '/api/v1/tunnels', { headers: { cookie } }), 'UNAUTHORIZED');
    assertApiError(await call(target, 'GET', '/api/v1/session', { headers: { cookie } }), 'UNAUTHORIZED');
  });

  test('a session ends after its idle time without use', async () => {
    const shortEdge = await startEdge({ authFailureLimit: 1_000, dashboardSessions: { idleMs: 50 } });
    try {
      const bob = await createAccount(shortEdge);
      const response = await call(shortEdge, 'POST', '/api/v1/session', { body: { token: bob.token }, headers: { origin: `http://localhost:${shortEdge.port}`, 'x-burrow-csrf': '1' } });
      const cookie = String(response.headers['set-cookie']).split(';')[0]!;
      await new Promise((resolve) => setTimeout(resolve, 120));
      assertApiError(await call(shortEdge, 'GET', '/api/v1/session', { headers: { cookie } }), 'UNAUTHORIZED');
    } finally {
      await shortEdge.close();
    }
  });
});
