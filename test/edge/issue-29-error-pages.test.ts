/**
 * Issue 29, point 6: the edge's own answers on tunnel hosts (no such tunnel, local server down, local
 * timeout, an offline name in reject mode) are a small HTML page for a browser navigation and the spec's
 * JSON for everything else (curl, fetch, webhook senders), with the code in both and in `Burrow-Error`.
 * The page escapes what it shows, loads nothing, and its strict CSP lets only its own style in: checked
 * in real Chromium.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { acceptsHtml, ERROR_PAGE_CSP, errorPage, publicErrorAnswer } from '../../src/edge/public-error.js';
import { ERROR_CODES } from '../../src/errors.js';
import { launchChromium, type Browser } from '../inspector/browser.js';
import { assertApiError, call, createAccount, freePort, startClient, startEdge, startLocal, type HttpResult, type LocalServer, type TestEdge } from '../helpers.js';

// Evaluated in the page, not here.
declare const document: any;
declare function getComputedStyle(element: unknown): { margin: string };

const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';
const CURL_ACCEPT = '*/*';

test('which Accept headers get the page: a browser navigation, never curl, fetch or an API client', () => {
  const cases: [string, boolean][] = [
    [BROWSER_ACCEPT, true],
    ['text/html', true],
    ['TEXT/HTML;q=0.5', true],
    ['', false],
    [CURL_ACCEPT, false],
    ['application/json', false],
    ['application/json, text/plain, */*', false],
    ['application/json, text/html', false],
    ['text/html;q=0.4, application/json;q=0.9', false],
    ['text/html;q=0', false],
    ['text/html;q=abc', false],
    ['text/*', false],
  ];
  for (const [accept, html] of cases) assert.equal(acceptsHtml(accept), html, JSON.stringify(accept));
});

test('the page escapes the message and carries the code, the status and where it came from', () => {
  const page = errorPage('TUNNEL_NOT_FOUND', 'No tunnel on <img src=x onerror="alert(1)"> & \'friends\'.');
  assert.ok(!page.includes('<img'), page);
  assert.ok(page.includes('No tunnel on &lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &#39;friends&#39;.'), page);
  assert.match(page, /<title>404 Not Found · TUNNEL_NOT_FOUND<\/title>/);
  assert.match(page, /<code>TUNNEL_NOT_FOUND<\/code>/);
  assert.match(page, /not from the app behind the tunnel/);
  assert.ok(!/<script|<link|<img|src=|href=/i.test(page.replace(/No tunnel on [^<]*/, '')), 'the page loads nothing');
  // The default message is the headline only, not said twice.
  const plain = errorPage('LOCAL_TIMEOUT', ERROR_CODES.LOCAL_TIMEOUT.message);
  assert.equal(plain.split(ERROR_CODES.LOCAL_TIMEOUT.message).length, 2);
  const json = publicErrorAnswer('LOCAL_TIMEOUT', 'slow', CURL_ACCEPT);
  assert.deepEqual(JSON.parse(json.body), { error: { code: 'LOCAL_TIMEOUT', message: 'slow' } });
  assert.equal(json.status, 504);
});

describe('the edge answers browsers with a page and programs with JSON', () => {
  let target: TestEdge;
  let slow: LocalServer;
  let browser: Browser | undefined;
  let closedPort: number;

  before(async () => {
    target = await startEdge({ requestTimeoutMs: 300 });
    slow = await startLocal(() => undefined);
    closedPort = await freePort();
  });
  after(async () => {
    await browser?.close();
    await slow.close();
    await target.close();
  });

  const get = (host: string, accept: string): Promise<HttpResult> => call(target, 'GET', '/some/page?x=1', { host, headers: { accept } });

  function assertPage(response: HttpResult, code: keyof typeof ERROR_CODES): void {
    assert.equal(response.status, ERROR_CODES[code].status);
    assert.equal(response.headers['burrow-error'], code);
    assert.equal(response.headers['content-type'], 'text/html; charset=utf-8');
    assert.equal(response.headers['content-security-policy'], ERROR_PAGE_CSP);
    assert.equal(response.headers['x-content-type-options'], 'nosniff');
    assert.match(response.text, new RegExp(`<code>${code}</code>`));
  }

  function assertJson(response: HttpResult, code: keyof typeof ERROR_CODES): void {
    assertApiError(response, code);
    assert.equal(response.headers['burrow-error'], code);
  }

  test('no such tunnel: 404 TUNNEL_NOT_FOUND', async () => {
    const host = `nobody-here.localhost:${target.port}`;
    assertJson(await get(host, CURL_ACCEPT), 'TUNNEL_NOT_FOUND');
    assertJson(await call(target, 'GET', '/', { host }), 'TUNNEL_NOT_FOUND');
    const page = await get(host, BROWSER_ACCEPT);
    assertPage(page, 'TUNNEL_NOT_FOUND');
    assert.match(page.text, /No tunnel is connected on nobody-here\.localhost\./);
  });

  test('the local server down: 502 LOCAL_UNREACHABLE; too slow: 504 LOCAL_TIMEOUT', async () => {
    const owner = await createAccount(target, 'PRO');
    const down = await startClient(target, owner.token, closedPort, { subdomain: 'down-app' });
    const slowApp = await startClient(target, owner.token, slow.port, { subdomain: 'slow-app' });
    try {
      assertJson(await get(down.host, CURL_ACCEPT), 'LOCAL_UNREACHABLE');
      assertPage(await get(down.host, BROWSER_ACCEPT), 'LOCAL_UNREACHABLE');
      assertJson(await get(slowApp.host, 'application/json'), 'LOCAL_TIMEOUT');
      assertPage(await get(slowApp.host, BROWSER_ACCEPT), 'LOCAL_TIMEOUT');
    } finally {
      await down.client.close();
      await slowApp.client.close();
    }
  });

  test('a reserved name offline in reject mode: 503 TUNNEL_UNAVAILABLE, Retry-After kept', async () => {
    const owner = await createAccount(target, 'PRO');
    const reserved = await call(target, 'POST', '/api/v1/reserved-subdomains', { token: owner.token, body: { subdomain: 'rejecting', offline: 'reject' } });
    assert.equal(reserved.status, 201, reserved.text);
    const host = `rejecting.localhost:${target.port}`;
    assertJson(await get(host, CURL_ACCEPT), 'TUNNEL_UNAVAILABLE');
    const page = await get(host, BROWSER_ACCEPT);
    assertPage(page, 'TUNNEL_UNAVAILABLE');
    assert.match(String(page.headers['retry-after']), /^[0-9]+$/);
  });

  test('Chromium shows the page with its style and nothing blocked by the CSP', async () => {
    browser = await launchChromium();
    const page = await browser.context.newPage();
    const violations: string[] = [];
    page.on('console', (message) => {
      // (The page's own 404 and the favicon's are logged as errors too: those are not the question.)
      if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
    });
    const response = await page.goto(`http://missing-tunnel.localhost:${target.port}/`);
    assert.equal(response?.status(), 404);
    assert.equal(await response?.headerValue('burrow-error'), 'TUNNEL_NOT_FOUND');
    assert.equal(await page.title(), '404 Not Found · TUNNEL_NOT_FOUND');
    assert.equal(await page.locator('h1').textContent(), ERROR_CODES.TUNNEL_NOT_FOUND.message);
    assert.equal(await page.locator('code').textContent(), 'TUNNEL_NOT_FOUND');
    // The inline style ran (its hash is in the CSP): the body's margin is the page's, not the browser's 8px.
    assert.equal(await page.evaluate(() => getComputedStyle(document.body).margin), '0px');
    assert.deepEqual(violations, []);
  });
});
