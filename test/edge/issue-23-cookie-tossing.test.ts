/**
 * Issue 23, finding 2: cookie tossing from a tunnel into the dashboard. A page served through Mallory's
 * tunnel (`mallory.burrow.test`, the same site as the dashboard on `burrow.test`) sets
 * `burrow_session=<Mallory's session>; Domain=burrow.test; Path=/api`; the browser sent it first, the
 * edge took the first cookie, and the victim's dashboard ran as Mallory. A garbage cookie the same way
 * locked the victim out, signing in again or not.
 *
 * Real Chromium over HTTPS (a test CA's certificate for burrow.test and *.burrow.test, names mapped to
 * 127.0.0.1 by Chromium's resolver rules), a real TLS edge, Mallory's real tunnel client and local server.
 * Then the rules at the header level, on plain HTTP and HTTPS.
 */
import assert from 'node:assert/strict';
import '../wildcard-dns.js';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { Agent, request } from 'undici';
import { RouteTable } from '../../src/client/routes.js';
import { TunnelClient } from '../../src/client/tunnel-client.js';
import { assertApiError, call, createAccount, startEdge, tempDirs, type TestAccount, type TestEdge } from '../helpers.js';
import { launchChromium, type Browser } from '../inspector/browser.js';
import { makeCa, makeServerCert } from '../tls-fixtures.js';
import { TEST_DOMAIN } from '../wildcard-dns.js';

const certDirs = tempDirs('burrow-cookie-tossing-');

describe('cookie tossing in Chromium over HTTPS', () => {
  let edge: TestEdge;
  let agent: Agent;
  let victim: TestAccount;
  let mallory: TestAccount;
  let malloryClient: TunnelClient;
  let local: Server;
  let browser: Browser;
  let page: Page;
  let origin: string;
  let malloryOrigin: string;
  /** What Mallory's page sets: her session's id, or garbage. */
  let tossed = '';

  before(async () => {
    const dir = certDirs();
    const ca = makeCa(dir, 'ca');
    const pem = makeServerCert(dir, 'edge', [TEST_DOMAIN, `*.${TEST_DOMAIN}`], ca);
    edge = await startEdge({ domain: TEST_DOMAIN, tls: { certFile: pem.cert, keyFile: pem.key }, authFailureLimit: 1_000 });
    origin = `https://${TEST_DOMAIN}:${edge.port}`;
    malloryOrigin = `https://mallory.${TEST_DOMAIN}:${edge.port}`;
    agent = new Agent({ connect: { ca: readFileSync(ca.cert, 'utf8') } });
    victim = await createAccount(edge, 'FREE', 'victim@example.test');
    mallory = await createAccount(edge, 'FREE', 'mallory@example.test');
    // Mallory's page: every cookie trick at the dashboard's name, from her own tunnel's host.
    local = createServer((_req, res) => {
      res.setHeader('set-cookie', [
        `burrow_session=${tossed}; Domain=${TEST_DOMAIN}; Path=/api; Secure; SameSite=Lax`,
        `burrow_session=${tossed}; Domain=${TEST_DOMAIN}; Path=/api/v1/session; SameSite=Lax`,
        // Refused by the browser (a __Host- cookie may carry no Domain), and host-only would never leave mallory.*.
        `__Host-burrow_session=${tossed}; Domain=${TEST_DOMAIN}; Path=/; Secure`,
        `__Host-burrow_session=${tossed}; Path=/; Secure`,
      ]);
      res.setHeader('content-type', 'text/html');
      res.end('<!doctype html><title>mallory</title><p>nothing to see</p>');
    });
    await new Promise<void>((resolve) => local.listen(0, '127.0.0.1', resolve));
    malloryClient = new TunnelClient({
      edge: origin,
      token: mallory.token,
      routes: new RouteTable((local.address() as AddressInfo).port, []),
      subdomain: 'mallory',
      ca: readFileSync(ca.cert),
      minBackoffMs: 50,
      maxBackoffMs: 500,
    });
    await malloryClient.start();
    browser = await launchChromium({ args: [`--host-resolver-rules=MAP ${TEST_DOMAIN} 127.0.0.1, MAP *.${TEST_DOMAIN} 127.0.0.1`], ignoreHTTPSErrors: true });
    page = await browser.context.newPage();
  });

  after(async () => {
    await browser?.close();
    malloryClient?.close();
    await new Promise((resolve) => local?.close(resolve));
    await agent?.close();
    await edge?.close();
  });

  /** Mallory's own session id, as her browser would get it. */
  async function mallorySession(): Promise<string> {
    const response = await request(`${origin}/api/v1/session`, {
      method: 'POST',
      dispatcher: agent,
      headers: { origin, 'x-burrow-csrf': '1', 'content-type': 'application/json' },
      body: JSON.stringify({ token: mallory.token }),
    });
    await response.body.text();
    assert.equal(response.statusCode, 201);
    return /^__Host-burrow_session=([A-Za-z0-9_-]{43});/.exec(String(response.headers['set-cookie']))![1]!;
  }

  const signInForm = () => page.getByLabel('Access token', { exact: true });
  async function signIn(): Promise<void> {
    await signInForm().fill(victim.token);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('button', { name: 'Sign out', exact: true }).waitFor();
  }
  /** Who the dashboard's own requests run as, asked from inside the page. */
  const sessionEmail = () =>
    page.evaluate(async () => {
      const response = await fetch('/api/v1/session', { credentials: 'same-origin' });
      return response.status === 200 ? ((await response.json()) as { account: { email: string } }).account.email : `HTTP ${response.status}`;
    });
  /** The session-named cookies the browser would send to the dashboard and its API. */
  const cookies = async () =>
    (await browser.context.cookies([`${origin}/`, `${origin}/api/v1/session`, `${origin}/api/v1/tokens`])).filter((cookie) => cookie.name.endsWith('burrow_session'));

  test('the dashboard on HTTPS sets __Host-burrow_session: Secure, host-only, Path=/', async () => {
    await page.goto(`${origin}/`);
    await signIn();
    const jar = await cookies();
    assert.equal(jar.length, 1, JSON.stringify(jar));
    assert.equal(jar[0]!.name, '__Host-burrow_session');
    assert.equal(jar[0]!.domain, TEST_DOMAIN, 'host-only: no leading dot');
    assert.equal(jar[0]!.path, '/');
    assert.equal(jar[0]!.secure, true);
    assert.equal(await sessionEmail(), victim.email);
  });

  test("a session tossed from Mallory's tunnel never makes the victim's dashboard run as Mallory", async () => {
    tossed = await mallorySession();
    await page.goto(`${malloryOrigin}/`);
    const jar = await cookies();
    assert.ok(jar.length >= 3, `the victim's cookie and the tossed ones: ${JSON.stringify(jar)}`);
    // The browser took the Domain cookies and refused the __Host- one with a Domain: the attack is real.
    assert.ok(jar.some((cookie) => cookie.name === 'burrow_session' && cookie.domain === `.${TEST_DOMAIN}` && cookie.path === '/api'), JSON.stringify(jar));
    assert.ok(!jar.some((cookie) => cookie.name === '__Host-burrow_session' && cookie.domain === `.${TEST_DOMAIN}`), JSON.stringify(jar));

    await page.goto(`${origin}/`);
    // Two session cookies reach the API: nobody's session, every copy cleared, the sign-in form shown.
    await signInForm().waitFor();
    assert.doesNotMatch(await page.locator('body').innerText(), /mallory@example\.test/);
    assert.deepEqual(await cookies(), [], 'the tossed cookies and the session cookie were cleared');
    // With every copy gone the page is signed out, nobody's session: 204 (docs/dashboard.md).
    assert.equal(await sessionEmail(), 'HTTP 204');

    // Signing in again is the victim's session, and what they do lands in their own account.
    await signIn();
    assert.equal(await sessionEmail(), victim.email);
    const created = await page.evaluate(async () => {
      const response = await fetch('/api/v1/tokens', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/json', 'x-burrow-csrf': '1' },
        body: JSON.stringify({ label: 'made-after-tossing' }),
      });
      return response.status;
    });
    assert.equal(created, 201);
    const labels = async (token: string): Promise<string[]> => {
      const response = await request(`${origin}/api/v1/tokens`, { dispatcher: agent, headers: { authorization: `Bearer ${token}` } });
      return ((await response.body.json()) as { tokens: { label: string }[] }).tokens.map((t) => t.label);
    };
    assert.ok((await labels(victim.token)).includes('made-after-tossing'));
    assert.ok(!(await labels(mallory.token)).includes('made-after-tossing'));
  });

  test('a garbage cookie tossed the same way does not lock the victim out', async () => {
    tossed = 'garbage';
    await page.goto(`${malloryOrigin}/`);
    await page.goto(`${origin}/`);
    await signInForm().waitFor();
    await signIn();
    assert.equal(await sessionEmail(), victim.email);
    // Tossed again while signed out: the very next sign-in works.
    await page.getByRole('button', { name: 'Sign out', exact: true }).click();
    await signInForm().waitFor();
    await page.goto(`${malloryOrigin}/`);
    await page.goto(`${origin}/`);
    await signIn();
    assert.equal(await sessionEmail(), victim.email);
    const jar = await cookies();
    assert.deepEqual(jar.map((cookie) => cookie.name), ['__Host-burrow_session'], JSON.stringify(jar));
  });
});

describe('session cookies at the header level', () => {
  let plain: TestEdge;
  let secure: TestEdge;
  let alice: TestAccount;
  let bob: TestAccount;

  before(async () => {
    plain = await startEdge({ authFailureLimit: 1_000 });
    secure = await startEdge({ publicScheme: 'https', authFailureLimit: 1_000 });
    alice = await createAccount(plain);
    bob = await createAccount(secure);
  });
  after(async () => {
    await plain?.close();
    await secure?.close();
  });

  const browserHeaders = (target: TestEdge, scheme: string) => ({ origin: `${scheme}://localhost:${target.port}`, 'x-burrow-csrf': '1' });
  async function sessionOf(target: TestEdge, scheme: string, token: string, cookie?: string) {
    const response = await call(target, 'POST', '/api/v1/session', { body: { token }, headers: { ...browserHeaders(target, scheme), ...(cookie === undefined ? {} : { cookie }) } });
    assert.equal(response.status, 201, response.text);
    return response;
  }
  const setCookies = (response: { headers: Record<string, string | string[] | undefined> }): string[] => {
    const value = response.headers['set-cookie'];
    return value === undefined ? [] : Array.isArray(value) ? value : [value];
  };
  const idIn = (setCookie: string): string => /=([A-Za-z0-9_-]{43});/.exec(setCookie)![1]!;

  test('plain HTTP: two session cookies, whatever their order, authenticate nobody and are cleared everywhere', async () => {
    const own = idIn(setCookies(await sessionOf(plain, 'http', alice.token))[0]!);
    const other = idIn(setCookies(await sessionOf(plain, 'http', alice.token))[0]!);
    for (const cookie of [`burrow_session=${other}; burrow_session=${own}`, `burrow_session=${own}; burrow_session=garbage`, `a=1; burrow_session=${own};burrow_session=${own}`]) {
      const response = await call(plain, 'GET', '/api/v1/tokens', { headers: { cookie } });
      assertApiError(response, 'UNAUTHORIZED');
      assert.match(response.json.error.message, /2 dashboard session cookies/);
    }
    const refused = await call(plain, 'GET', '/api/v1/tokens', { headers: { cookie: `burrow_session=garbage; burrow_session=${own}` } });
    assertApiError(refused, 'UNAUTHORIZED');
    const cleared = setCookies(refused);
    for (const path of ['/', '/api', '/api/', '/api/v1', '/api/v1/', '/api/v1/tokens']) {
      assert.ok(cleared.includes(`burrow_session=; Path=${path}; HttpOnly; SameSite=Strict; Max-Age=0`), `host-only at ${path}: ${cleared.join('\n')}`);
      assert.ok(cleared.includes(`burrow_session=; Path=${path}; Domain=localhost; HttpOnly; SameSite=Strict; Max-Age=0`), `Domain=localhost at ${path}`);
    }
    assert.ok(!cleared.some((value) => value.startsWith('__Host-')), 'no __Host- cookie exists over plain HTTP');
    // The refusal changes nothing on the server: the real session still works alone.
    assert.equal((await call(plain, 'GET', '/api/v1/tokens', { headers: { cookie: `burrow_session=${own}` } })).status, 200);
  });

  test('a nameless cookie that reads as a second session cookie counts', async () => {
    const own = idIn(setCookies(await sessionOf(plain, 'http', alice.token))[0]!);
    assertApiError(await call(plain, 'GET', '/api/v1/session', { headers: { cookie: `burrow_session=${own}; burrow_session` } }), 'UNAUTHORIZED');
  });

  test('HTTPS: the session is __Host-burrow_session; a lone burrow_session (valid or not) is nobody, and cleared with its Domain variants', async () => {
    const response = await sessionOf(secure, 'https', bob.token);
    const [setCookie] = setCookies(response);
    assert.match(setCookie!, /^__Host-burrow_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=\d+; Secure$/);
    const id = idIn(setCookie!);
    const host = { host: `api.localhost:${secure.port}` };
    assert.equal((await call(secure, 'GET', '/api/v1/session', { headers: { cookie: `__Host-burrow_session=${id}`, ...host } })).status, 200);
    // A valid session under the plain name is what a tunnel's page can toss: it must not sign anyone in.
    const tossed = await call(secure, 'GET', '/api/v1/session', { headers: { cookie: `burrow_session=${id}`, ...host } });
    assertApiError(tossed, 'UNAUTHORIZED');
    const cleared = setCookies(tossed);
    assert.ok(cleared.includes('__Host-burrow_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0; Secure'), cleared.join('\n'));
    for (const domain of ['api.localhost', 'localhost']) {
      assert.ok(cleared.includes(`burrow_session=; Path=/api/v1/session; Domain=${domain}; HttpOnly; SameSite=Strict; Max-Age=0; Secure`), `${domain}: ${cleared.join('\n')}`);
    }
    assertApiError(await call(secure, 'GET', '/api/v1/session', { headers: { cookie: `__Host-burrow_session=${id}; burrow_session=${id}`, ...host } }), 'UNAUTHORIZED');
  });

  test('signing in with stray session cookies clears them before setting the new one, which then works alone', async () => {
    const response = await sessionOf(secure, 'https', bob.token, 'burrow_session=garbage; __Host-burrow_session=also-garbage');
    const cookies = setCookies(response);
    const last = cookies.at(-1)!;
    assert.match(last, /^__Host-burrow_session=[A-Za-z0-9_-]{43};/, 'the new cookie comes last');
    assert.ok(!cookies.slice(0, -1).some((value) => value.startsWith('__Host-')), 'the new cookie is not cleared by its own answer');
    assert.ok(cookies.includes('burrow_session=; Path=/api/v1/session; Domain=localhost; HttpOnly; SameSite=Strict; Max-Age=0; Secure'), cookies.join('\n'));
    assert.equal((await call(secure, 'GET', '/api/v1/session', { headers: { cookie: last.split(';')[0]! } })).status, 200);

    const plainSignIn = setCookies(await sessionOf(plain, 'http', alice.token, 'burrow_session=x; burrow_session=y'));
    assert.match(plainSignIn.at(-1)!, /^burrow_session=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=\d+$/);
    assert.ok(!plainSignIn.slice(0, -1).includes('burrow_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0'), 'not clearing the cookie it sets');
  });

  test('an ended session\'s cookie is expired in the 401', async () => {
    const refused = await call(plain, 'GET', '/api/v1/session', { headers: { cookie: `burrow_session=${'A'.repeat(43)}` } });
    assertApiError(refused, 'UNAUTHORIZED');
    assert.deepEqual(setCookies(refused), ['burrow_session=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0']);
  });
});
