/**
 * The web dashboard in real headless Chromium against a real edge, a real local server and real tunnel
 * clients, driven only through the accessible names of issue 15 (docs/dashboard.md), with every effect
 * checked through the API: sign-in, a token created in the page that authenticates and is shown once,
 * revoking it closing its live tunnel, a reservation refusing another account, closing a tunnel, the
 * request list and detail, replay as-is and with edits reaching the local server, stored-XSS payloads
 * staying text, sign-out ending the session, the cookie out of the page's reach, 360 px wide, no CSP
 * violation and no page error.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import { request } from 'undici';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { call, createAccount, rawRequest, readBody, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { launchChromium, watchProblems, type Browser } from '../inspector/browser.js';

// These run inside the page (tsconfig has no DOM library): module-local declarations, nothing global.
declare const document: any;
declare const window: any;

interface Seen {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

describe('the dashboard in Chromium', () => {
  let edge: TestEdge;
  let alice: TestAccount;
  let bob: TestAccount;
  let local: LocalServer;
  const seen: Seen[] = [];
  let main: { client: TunnelClient; subdomain: string; host: string };
  const clients: TunnelClient[] = [];
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];
  const dialogs: string[] = [];
  let origin: string;

  before(async () => {
    edge = await startEdge({ authFailureLimit: 1_000 });
    origin = `http://localhost:${edge.port}`;
    alice = await createAccount(edge, 'PRO');
    bob = await createAccount(edge);
    local = await startLocal((req, res) => {
      void readBody(req).then((body) => {
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body: body.toString('utf8') });
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, url: req.url }));
      });
    });
    main = await startClient(edge, alice.token, local.port, { subdomain: 'alice-main' });
    clients.push(main.client);
    browser = await launchChromium();
    page = await browser.context.newPage();
    watchProblems(page, problems, { allowRefusals: true });
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
  });

  after(async () => {
    await browser?.close();
    for (const client of clients) client.close();
    await local?.close();
    await edge?.close();
  });

  const send = async (method: string, path: string, options: { body?: string; headers?: Record<string, string> } = {}) => {
    const response = await request(`${edge.base}${path}`, { method: method as 'GET', headers: { host: main.host, ...options.headers }, ...(options.body === undefined ? {} : { body: options.body }) });
    await response.body.text();
    return response.statusCode;
  };
  const button = (name: string) => page.getByRole('button', { name, exact: true });
  const link = (name: string) => page.getByRole('link', { name, exact: true });
  const rowWith = (text: string) => page.getByRole('row').filter({ hasText: text });
  const sessionCookie = async () => (await browser.context.cookies(origin)).find((cookie) => cookie.name === 'burrow_session');

  test('a wrong token is refused with its error code; the right one signs in', async () => {
    await page.goto(`${origin}/`);
    await page.getByLabel('Access token', { exact: true }).fill('svc_pat_00000000_000000000000000000000000000000000000');
    await button('Sign in').click();
    await page.locator('#signin-error').getByText(/^UNAUTHORIZED: /).waitFor();
    assert.equal(await sessionCookie(), undefined);

    await page.getByLabel('Access token', { exact: true }).fill(alice.token);
    await button('Sign in').click();
    await button('Sign out').waitFor();
    for (const name of ['Tunnels', 'Requests', 'Access tokens', 'Reserved subdomains', 'Account']) await link(name).waitFor();
  });

  test('the session cookie is HttpOnly, SameSite=Strict, and out of the page\'s reach', async () => {
    const cookie = await sessionCookie();
    assert.ok(cookie);
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, 'Strict');
    assert.equal(cookie.path, '/');
    assert.equal(cookie.secure, false);
    assert.equal(await page.evaluate(() => document.cookie), '');
    assert.equal(await page.evaluate(() => JSON.stringify({ ...window.localStorage }) + JSON.stringify({ ...window.sessionStorage })), '{}{}');
    assert.ok(!page.url().includes(alice.token));
  });

  test('Tunnels lists the live tunnel and updates without a reload', async () => {
    await link('Tunnels').click();
    await rowWith('alice-main').waitFor();
    assert.match(await rowWith('alice-main').innerText(), new RegExp(`http://alice-main\\.localhost:${edge.port}`));
    assert.match(await rowWith('alice-main').innerText(), new RegExp(String(local.port)));
    const extra = await startClient(edge, alice.token, local.port, { subdomain: 'alice-extra' });
    clients.push(extra.client);
    await rowWith('alice-extra').waitFor({ timeout: 10_000 });
  });

  test('closing a tunnel in the page, after a confirmation, ends it', async () => {
    const closed = new Promise((resolve) => clients.at(-1)!.once('closed', resolve));
    await rowWith('alice-extra').getByRole('button', { name: 'Close', exact: true }).click();
    await button('Close tunnel').click();
    await closed;
    await rowWith('alice-extra').waitFor({ state: 'detached', timeout: 10_000 });
    const tunnels = (await call(edge, 'GET', '/api/v1/tunnels', { token: alice.token })).json.tunnels.map((tunnel: { subdomain: string }) => tunnel.subdomain);
    assert.deepEqual(tunnels, ['alice-main']);
  });

  let createdToken = '';
  test('a token created in the page is shown once, and authenticates', async () => {
    await link('Access tokens').click();
    await page.getByLabel('Label', { exact: true }).fill('laptop');
    await button('Create token').click();
    await page.getByText("you won't see it again").waitFor();
    createdToken = (await page.locator('#new-token').textContent())!;
    assert.match(createdToken, /^svc_pat_[0-9a-f]{8}_[0-9a-f]{36}$/);
    const me = await call(edge, 'GET', '/api/v1/auth/me', { token: createdToken });
    assert.equal(me.status, 200);
    assert.equal(me.json.email, alice.email);
    await button('Done').click();
    assert.ok(!(await page.content()).includes(createdToken), 'gone from the page after Done');
    await rowWith('laptop').waitFor();
    await page.reload();
    await rowWith('laptop').waitFor();
    assert.ok(!(await page.content()).includes(createdToken), 'never shown again');
  });

  test('revoking it in the page warns about its live tunnel and closes it', async () => {
    const laptop = await startClient(edge, createdToken, local.port, { subdomain: 'alice-laptop' });
    clients.push(laptop.client);
    const closed = new Promise<{ code: string }>((resolve) => laptop.client.once('closed', resolve));
    await page.reload();
    await rowWith('laptop').getByRole('button', { name: 'Revoke', exact: true }).click();
    await page.getByText(/alice-laptop/).waitFor();
    await button('Revoke token').click();
    await closed;
    await rowWith('laptop').waitFor({ state: 'detached' });
    assert.equal((await call(edge, 'GET', '/api/v1/auth/me', { token: createdToken })).status, 401);
    const tunnels = (await call(edge, 'GET', '/api/v1/tunnels', { token: alice.token })).json.tunnels.map((tunnel: { subdomain: string }) => tunnel.subdomain);
    assert.deepEqual(tunnels, ['alice-main']);
  });

  test('revoking the token of the current session warns about it', async () => {
    await rowWith('this session').getByRole('button', { name: 'Revoke', exact: true }).click();
    await page.getByText('This is the token of your current session').waitFor();
    // The keyboard: Cancel has the focus, Enter would cancel; Escape closes the dialog without revoking.
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Cancel');
    await page.keyboard.press('Escape');
    await button('Revoke token').waitFor({ state: 'hidden' });
    assert.equal((await call(edge, 'GET', '/api/v1/auth/me', { token: alice.token })).status, 200);
  });

  test('a reservation made in the page refuses another account, and is released in the page after a confirmation', async () => {
    await link('Reserved subdomains').click();
    await page.getByLabel('Subdomain', { exact: true }).fill('acme-hooks');
    await button('Reserve').click();
    await rowWith('acme-hooks').waitFor();
    await assert.rejects(startClient(edge, bob.token, local.port, { subdomain: 'acme-hooks' }), (error: Error & { code?: string }) => error.code === 'SUBDOMAIN_TAKEN');
    // An API error is shown with its code.
    await page.getByLabel('Subdomain', { exact: true }).fill('ab');
    await button('Reserve').click();
    await page.getByText(/INVALID_REQUEST/).waitFor();
    await rowWith('acme-hooks').getByRole('button', { name: 'Release', exact: true }).click();
    await button('Release subdomain').click();
    await rowWith('acme-hooks').waitFor({ state: 'detached' });
    assert.deepEqual((await call(edge, 'GET', '/api/v1/reserved-subdomains', { token: alice.token })).json.reserved_subdomains, []);
  });

  test('Account shows the e-mail, the plan, usage against limits and the instance', async () => {
    await link('Account').click();
    await page.getByText(alice.email, { exact: true }).waitFor();
    const text = await page.locator('#view').innerText();
    assert.match(text, /PRO/);
    assert.match(text, /Active tunnels\s+1\s+25/);
    assert.match(text, /Region\s+local/);
  });

  const xssPath = '/xss/%3Cimg%20src=x%20onerror=alert(1)%3E%3Cscript%3Ealert(2)%3C/script%3E';
  test('Requests: per tunnel, newest first, a detail on click, and stored-XSS payloads stay text', async () => {
    assert.equal(await send('GET', '/hello?x=1'), 200);
    assert.equal(await send('POST', xssPath, {
      body: '<script>alert(3)</script><img src=x onerror="alert(4)">',
      headers: { 'content-type': 'text/html', 'x-evil': '<img src=x onerror=alert(5)>' },
    }), 200);
    // A path with raw markup characters, as a hostile client can send it (no client library would).
    const raw = await rawRequest(edge.port, `GET /raw/<script>alert(6)</script><img/src/onerror=alert(7)> HTTP/1.1\r\nHost: ${main.host}\r\nConnection: close\r\n\r\n`);
    assert.match(raw, /^HTTP\/1\.1 200/);
    assert.equal(await send('POST', '/orders', { body: '{"sku":"TEE","qty":2}', headers: { 'content-type': 'application/json' } }), 200);
    await link('Requests').click();
    await page.getByLabel('Tunnel', { exact: true }).selectOption('alice-main');
    await rowWith('/orders').waitFor();
    const paths = await page.locator('table.requests tbody td.path').allTextContents();
    assert.deepEqual(paths, ['/orders', '/raw/<script>alert(6)</script><img/src/onerror=alert(7)>', xssPath, '/hello?x=1']);

    await rowWith('/xss/').click();
    await page.getByText('<script>alert(3)</script><img src=x onerror="alert(4)">').waitFor();
    await page.getByText('<img src=x onerror=alert(5)>').waitFor();
    await rowWith('/raw/').click();
    await page.getByRole('heading', { name: 'GET /raw/<script>alert(6)</script><img/src/onerror=alert(7)>' }).waitFor();
    assert.equal(await page.locator('#view img, #view script').count(), 0);
    await page.waitForTimeout(300);
    assert.deepEqual(dialogs, [], 'no payload ran');

    await page.getByLabel('Path', { exact: true }).fill('/ord');
    await page.waitForFunction(() => document.querySelectorAll('table.requests tbody tr:not([hidden])').length === 1);
    await page.getByLabel('Path', { exact: true }).fill('');
    await page.getByLabel('Method', { exact: true }).selectOption('GET');
    await page.waitForFunction(() => document.querySelectorAll('table.requests tbody tr:not([hidden])').length === 2);
    await page.getByLabel('Method', { exact: true }).selectOption('');
  });

  test('the keyboard opens a row; the detail shows the JSON body pretty, timing and the client address', async () => {
    await rowWith('/orders').focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'POST /orders', exact: true }).waitFor();
    const detail = await page.locator('section.detail').innerText();
    assert.match(detail, /"sku": "TEE"/);
    assert.match(detail, /Client address\s+127\.0\.0\.1/);
    assert.match(detail, /Duration\s+[0-9.]+ m?s/);
    await button('Copy as curl').click();
    // The same command the inspector gives (src/web/curl.js); run by bash, it sends the request again.
    const command = (await page.locator('pre.curl').textContent())!;
    assert.match(command, new RegExp(`^curl .* -X POST http://alice-main\\.localhost:${edge.port}/orders `));
    const count = seen.length;
    await promisify(execFile)('bash', ['-c', command]);
    assert.equal(seen.length, count + 1);
    assert.deepEqual([seen.at(-1)!.method, seen.at(-1)!.url, seen.at(-1)!.body], ['POST', '/orders', '{"sku":"TEE","qty":2}']);
  });

  test('Replay sends the request again; Replay with edits sends the edits', async () => {
    const before = seen.length;
    await button('Replay').click();
    await page.getByText('Replay result').waitFor();
    await waitFor(() => seen.length === before + 1);
    assert.equal(seen.at(-1)!.method, 'POST');
    assert.equal(seen.at(-1)!.url, '/orders');
    assert.equal(seen.at(-1)!.body, '{"sku":"TEE","qty":2}');

    await button('Replay with edits').click();
    await page.getByLabel('Method', { exact: true }).last().fill('PUT');
    await page.getByLabel('Path', { exact: true }).last().fill('/orders/7');
    const headers = page.getByLabel(/^Headers/);
    await headers.fill(`${await headers.inputValue()}\nx-edited: yes`);
    await page.getByLabel('Body', { exact: true }).fill('{"sku":"TEE","qty":3}');
    await button('Send replay').click();
    await waitFor(() => seen.length === before + 2);
    const edited = seen.at(-1)!;
    assert.equal(edited.method, 'PUT');
    assert.equal(edited.url, '/orders/7');
    assert.equal(edited.headers['x-edited'], 'yes');
    assert.equal(edited.body, '{"sku":"TEE","qty":3}');
    await page.getByText(/PUT \/orders\/7 → 200/).waitFor();
  });

  test('readable at 360 px: nothing wider than the screen', async () => {
    await page.setViewportSize({ width: 360, height: 740 });
    for (const name of ['Tunnels', 'Requests', 'Access tokens', 'Reserved subdomains', 'Account']) {
      await link(name).click();
      await page.waitForTimeout(200);
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 362, `${name}: ${width} px wide`);
    }
    await page.setViewportSize({ width: 1400, height: 900 });
  });

  test('sign out ends the session on the server', async () => {
    const cookie = await sessionCookie();
    await button('Sign out').click();
    await page.getByLabel('Access token', { exact: true }).waitFor();
    const response = await call(edge, 'GET', '/api/v1/auth/me', { headers: { cookie: `burrow_session=${cookie!.value}` } });
    assert.equal(response.status, 401);
  });

  test("a revoked token's session ends at once: the page goes back to sign-in", async () => {
    const spare = await call(edge, 'POST', '/api/v1/tokens', { token: alice.token, body: { label: 'spare' } });
    await page.getByLabel('Access token', { exact: true }).fill(spare.json.token);
    await button('Sign in').click();
    await link('Tunnels').click();
    await rowWith('alice-main').waitFor();
    assert.equal((await call(edge, 'DELETE', `/api/v1/tokens/${spare.json.id}`, { token: alice.token })).status, 204);
    await page.getByLabel('Access token', { exact: true }).waitFor({ timeout: 10_000 });
    assert.match((await page.locator('#signin-error').textContent())!, /^UNAUTHORIZED: /);
  });

  test('no page error, no CSP violation, no dialog', () => {
    assert.deepEqual(problems, []);
    assert.deepEqual(dialogs, []);
  });
});
