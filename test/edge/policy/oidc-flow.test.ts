/**
 * The OIDC gate (src/edge/policy/oidc.ts, through decide()) against a real OpenID provider (the
 * `oidc-provider` package, started here) driven by real Chromium: a navigation without a session is
 * redirected to the provider, the sign-in comes back to /.burrow/oidc/callback, the session cookie lets the
 * next request through with Burrow-User-Email set, and an address outside --oidc-allow-domain is refused.
 * A small node:http server stands in for the public listener: it only calls the policy's functions.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import Provider from 'oidc-provider';
import { CompiledPolicy, type PolicyDecision } from '../../../src/edge/policy/decide.js';
import { parsePolicySpec } from '../../../src/protocol/policy.js';
import { SecretBox } from '../../../src/store/secret-box.js';
import { storePolicy } from '../../../src/store/stored-policy.js';
import { launchChromium, type Browser } from '../../inspector/browser.js';
import { call, createAccount, startClient, startEdge, startLocal, type LocalServer, type TestAccount, type TestEdge } from '../../helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'burrow-oidc-'));
const box = SecretBox.open(join(dir, 'secret.key'));
let providerServer: Server;
let issuer = '';
let browser: Browser;
/** The same flow through a real edge, tunnel client and local server (the last test). */
let edge: TestEdge;
let account: TestAccount;
let local: LocalServer;
const LIVE = 'oidc-live';
const seenByApp: { url: string; email: string | undefined; cookie: string | undefined }[] = [];

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** The stand-in listener: decide(), then answer, redirect or "forward" (echo what the local server would get). */
let policy: CompiledPolicy;
let tunnel: { server: Server; origin: string };

async function tunnelHost(): Promise<{ server: Server; origin: string }> {
  const server = createServer((req, res) => {
    const fields = req.rawHeaders;
    void (async () => {
      const decision: PolicyDecision = await policy.decide({ method: req.method!, target: req.url!, fields, clientAddress: '127.0.0.1', scheme: 'http', host: req.headers.host! });
      if (decision.kind === 'respond') {
        const response = await decision.response;
        const headers: [string, string][] = [];
        for (let i = 0; i < response.fields.length; i += 2) headers.push([response.fields[i]!, response.fields[i + 1]!]);
        res.writeHead(response.status, headers.flat() as unknown as string[]).end(response.body);
      } else if (decision.kind === 'refuse') res.writeHead(decision.status, { 'content-type': 'application/json', 'burrow-error': decision.code }).end(decision.body);
      else if (decision.kind === 'allow') res.writeHead(200, { 'content-type': 'text/plain' }).end(JSON.stringify(decision.fields));
      else res.writeHead(500).end();
    })();
  });
  const port = await listen(server);
  return { server, origin: `http://app.localhost:${port}` };
}

before(async () => {
  tunnel = await tunnelHost();
  edge = await startEdge();
  account = await createAccount(edge, 'PRO');
  local = await startLocal((req, res) => {
    const email = req.headers['burrow-user-email'] as string | undefined;
    seenByApp.push({ url: req.url!, email, cookie: req.headers.cookie });
    res.writeHead(200, { 'content-type': 'text/plain' }).end(`hello ${email ?? 'nobody'} at ${req.url}`);
  });
  providerServer = createServer();
  const port = await listen(providerServer);
  issuer = `http://127.0.0.1:${port}`;
  const provider = new Provider(issuer, {
    clients: [
      { client_id: 'burrow-test', client_secret: 'burrow-test-secret', redirect_uris: [`${tunnel.origin}/.burrow/oidc/callback`], grant_types: ['authorization_code'], response_types: ['code'] },
      { client_id: 'burrow-live', client_secret: 'burrow-live-secret', redirect_uris: [`http://${LIVE}.localhost:${edge.port}/.burrow/oidc/callback`], grant_types: ['authorization_code'], response_types: ['code'] },
    ],
    findAccount: (_ctx: unknown, id: string) => ({ accountId: id, claims: () => ({ sub: id, email: id, email_verified: true }) }),
    claims: { email: ['email', 'email_verified'] },
    features: { devInteractions: { enabled: true } },
    pkce: { required: () => true },
  } as never);
  providerServer.on('request', provider.callback());
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await local?.close();
  await edge?.close();
  tunnel?.server.close();
  providerServer?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** GET through the stand-in listener with the tunnel's Host (Node's resolver does not know *.localhost). */
function get(origin: string, path: string, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> {
  const url = new URL(origin);
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ host: '127.0.0.1', port: url.port, path, headers: { host: url.host, ...headers } }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body }));
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}

async function signIn(origin: string, email: string): Promise<string> {
  const page = await browser.context.newPage();
  try {
    await page.goto(`${origin}/dashboard?tab=1`);
    await page.waitForSelector('input[name="login"]', { timeout: 15_000 }).catch(async (error: unknown) => {
      throw new Error(`no login form at ${page.url()}: ${(await page.textContent('body'))?.slice(0, 300)} (${String(error)})`);
    });
    await page.fill('input[name="login"]', email);
    await page.fill('input[name="password"]', 'any');
    await page.click('button[type="submit"]');
    const consent = await page.waitForSelector('button[type="submit"]', { timeout: 15_000 }).catch(() => null);
    if (consent !== null && page.url().includes('/interaction/')) await consent.click();
    // Back on the tunnel's origin: the callback's 303 to the page asked for (a redirect is not a page of
    // its own), or the callback's own refusal. Waiting for a page outside /.burrow/ timed out on a refusal.
    await page.waitForURL((url) => url.href.startsWith(origin), { timeout: 15_000 }).catch(() => undefined);
    return `${page.url()}\n${await page.textContent('body')}`;
  } finally {
    await page.close();
  }
}

test('OIDC: redirect to the provider, callback with PKCE, session cookie, Burrow-User-Email; a domain outside the list is refused', { timeout: 90_000 }, async () => {
  const stored = await storePolicy(
    parsePolicySpec({ oidc: { issuer, client_id: 'burrow-test', client_secret: 'burrow-test-secret', allow_domain: ['example.test'] } }),
    undefined,
    box,
  );
  policy = CompiledPolicy.compile(stored!, box, { realm: 'app' }) as CompiledPolicy;
  const { origin } = tunnel;
  {
    const api = await get(origin, '/api', { accept: 'application/json' });
    assert.equal(api.status, 401, 'not a navigation: 401, not a redirect');
    assert.equal((JSON.parse(api.body) as { error: { code: string } }).error.code, 'SIGN_IN_REQUIRED');

    const start = await get(origin, '/dashboard', { accept: 'text/html' });
    assert.equal(start.status, 302);
    const location = new URL(start.headers.location as string);
    assert.equal(location.origin, issuer);
    assert.equal(location.searchParams.get('code_challenge_method'), 'S256');
    assert.ok(location.searchParams.get('state') && location.searchParams.get('nonce'));
 assert.match(String(start.headers['set-cookie']), /^burrow_oidc_flow=sk1\..*; Path=\/\.burrow\/oidc\/; Max-Age=600; HttpOnly; SameSite=Lax$/);

    const landed = await signIn(origin, 'ann@example.test');
    assert.match(landed, /\/dashboard\?tab=1/, 'back on the page first asked for');
    assert.match(landed, /"burrow-user-email","ann@example.test"/i, 'the local server gets the signed-in address');
    assert.doesNotMatch(landed, /burrow_oidc/, 'and never the edge\'s cookies');
    const cookies = await browser.context.cookies(origin);
    const session = cookies.find((cookie) => cookie.name === 'burrow_oidc');
    assert.ok(session !== undefined);
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, 'Lax');
    assert.ok(session.expires > Date.now() / 1000 + 3600, 'expiring, hours ahead');

    const forged = await get(origin, '/x', { cookie: `burrow_oidc=${session.value.slice(0, -4)}AAAA` });
    assert.equal(forged.status, 401, 'an altered cookie does not open');

    await browser.context.clearCookies();
    const refused = await signIn(origin, 'eve@elsewhere.test');
    assert.match(refused, /eve@elsewhere\.test is not allowed on this tunnel/);
  }
});

test('OIDC through a real tunnel (edge, tunnel client, local server; Chromium): 401 for a program, sign-in for a browser, the app gets Burrow-User-Email and never the edge\'s cookies; an address outside --oidc-allow-email is refused 403 and reaches nothing', { timeout: 90_000 }, async () => {
  await browser.context.clearCookies();
  const started = await startClient(edge, account.token, local.port, {
    subdomain: LIVE,
    policy: { oidc: { issuer, client_id: 'burrow-live', client_secret: 'burrow-live-secret', allow_email: ['ann@example.test'] } },
  });
  try {
    const origin = `http://${started.host}`;
    const program = await call(edge, 'GET', '/api', { host: started.host, headers: { accept: 'application/json', 'burrow-user-email': 'mallory@example.test' } });
    assert.deepEqual([program.status, program.json.error.code, program.headers['burrow-error']], [401, 'SIGN_IN_REQUIRED', 'SIGN_IN_REQUIRED']);
    const navigation = await call(edge, 'GET', '/dashboard', { host: started.host, headers: { accept: 'text/html' } });
    assert.equal(navigation.status, 302);
    assert.equal(new URL(navigation.headers.location as string).origin, issuer);
    assert.equal(seenByApp.length, 0, 'nothing reached the app before a sign-in');

    const landed = await signIn(origin, 'ann@example.test');
    assert.match(landed, /\/dashboard\?tab=1\nhello ann@example\.test at \/dashboard\?tab=1/);
    // (Chromium may ask for /favicon.ico too, signed in as well.)
    assert.deepEqual(seenByApp.filter((entry) => entry.url !== '/favicon.ico').map((entry) => [entry.url, entry.email]), [['/dashboard?tab=1', 'ann@example.test']]);
    assert.ok(!(seenByApp[0]!.cookie ?? '').includes('burrow_oidc'), 'the edge\'s cookies stay at the edge');
    const session = (await browser.context.cookies(origin)).find((cookie) => cookie.name === 'burrow_oidc');
    assert.ok(session !== undefined && session.httpOnly && session.sameSite === 'Lax' && session.secure === false, 'HttpOnly, Lax; not Secure on plain http');
    // The session cookie from a program works too; a forged e-mail header is replaced by the edge's.
    const withCookie = await call(edge, 'GET', '/again', { host: started.host, headers: { cookie: `burrow_oidc=${session.value}`, 'burrow-user-email': 'mallory@example.test' } });
    assert.equal(withCookie.text, 'hello ann@example.test at /again');

    await browser.context.clearCookies();
    const refused = await signIn(origin, 'eve@example.test');
    assert.match(refused, /eve@example\.test is not allowed on this tunnel/);
    assert.equal(seenByApp.filter((entry) => entry.email !== 'ann@example.test').length, 0, 'eve reached nothing');
  } finally {
    await started.client.close();
  }
});
