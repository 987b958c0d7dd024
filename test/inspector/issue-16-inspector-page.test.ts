/**
 * Issue 16, point 6, in real headless Chromium against a real tunnel: the filter finds text inside
 * bodies, the raw body view, copy as curl (the command shown is run by bash), HAR downloads, the client
 * address, WebSocket connections with their messages, removing a header in Replay with edits, history
 * loaded from the edge, a truncated replay refused then allowed, an edge timeout labelled as such, the
 * layout at 820 and 360 px, and captured markup in every new view shown as text, never run.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import WebSocket from 'ws';
import { Inspector } from '../../src/inspector/server.js';
import { tempDir, waitFor } from '../helpers.js';
import { launchChromium, type Browser } from './browser.js';
import { startStack, type Stack } from './fixture.js';

declare const document: any;
declare const window: any;

const run = promisify(execFile);
const XSS = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>';

function watch(page: Page, problems: string[]): void {
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('dialog', (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    void dialog.dismiss();
  });
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
}

describe('issue 16: inspector page gaps in Chromium', () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;
  let work: string;
  const problems: string[] = [];
  const others: Inspector[] = [];

  before(async () => {
    stack = await startStack({}, 1024 * 1024, { requestTimeoutMs: 400 });
    browser = await launchChromium();
    page = await browser.context.newPage();
    watch(page, problems);
    work = tempDir('burrow-page-');
    await page.goto(stack.inspector.url);
    await page.waitForSelector('#session.pill-on', { timeout: 10_000 });
  });

  after(async () => {
    for (const inspector of others) inspector.close();
    await browser?.close();
    await stack?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const row = (path: string) => page.locator('#rows tr', { has: page.locator('td.path', { hasText: path }) }).first();
  const visiblePaths = () => page.locator('#rows tr:not([hidden]) td.path').evaluateAll((tds) => tds.map((td) => td.firstChild?.textContent));
  async function open(path: string): Promise<void> {
    await row(path).waitFor({ timeout: 10_000 });
    await row(path).click();
    await page.waitForFunction((wanted) => document.querySelector('#d-path')?.textContent === wanted, path);
  }

  test('the filter box finds a request by an event id inside its JSON body', async () => {
    await stack.send('POST', '/hooks/a', { body: '{"id":"evt_Needle42","type":"paid"}', headers: { 'content-type': 'application/json' } });
    await stack.send('POST', '/hooks/b', { body: '{"id":"evt_other","type":"paid"}', headers: { 'content-type': 'application/json' } });
    await row('/hooks/b').waitFor({ timeout: 10_000 });
    await page.fill('#filter', 'evt_needle42');
    await page.waitForFunction(() => [...document.querySelectorAll('#rows tr')].filter((tr: any) => !tr.hidden).length === 1);
    assert.deepEqual(await visiblePaths(), ['/hooks/a']);
    await page.fill('#filter', 'paid hooks');
    await page.waitForFunction(() => [...document.querySelectorAll('#rows tr')].filter((tr: any) => !tr.hidden).length === 2);
    await page.fill('#filter', '');
  });

  test('the raw view shows the body exactly as received, the pretty view formats it', async () => {
    const body = '{"b": [1,  2],\t"a":"x"}';
    await stack.send('POST', '/raw', { body, headers: { 'content-type': 'application/json' } });
    await open('/raw');
    assert.equal(await page.textContent('#req-body'), JSON.stringify(JSON.parse(body), null, 2));
    await page.click('.body-mode[data-mode="raw"]');
    assert.equal(await page.textContent('#req-body'), body);
    assert.equal(await page.getAttribute('.body-mode[data-mode="raw"]', 'aria-pressed'), 'true');
    await stack.send('GET', '/binary');
    await open('/binary');
    assert.match((await page.textContent('#res-body'))!, /^00000000  00 01 02 ff fe 80 /, 'binary stays a hex dump');
    await page.click('.body-mode[data-mode="pretty"]');
  });

  test('the client address is shown', async () => {
    await open('/raw');
    assert.equal(await page.textContent('#d-client'), '127.0.0.1');
  });

  test('copy as curl shows a command for the local target or the public URL, and it works', async () => {
    await stack.send('POST', '/curl?q=1', { body: "it's {\"x\":1}", headers: { 'content-type': 'text/plain', 'x-sig': 'abc' } });
    await open('/curl?q=1');
    await page.click('#curl-local');
    await page.waitForSelector('#curl:not([hidden])');
    assert.match((await page.textContent('#curl-target'))!, /^Straight to the local target \(http:\/\/localhost:\d+\/curl\?q=1\)/);
    const local = (await page.textContent('#curl-text'))!;
    assert.match(local, /^curl /);
    let count = stack.seen.length;
    await run('bash', ['-c', local], { cwd: work });
    assert.equal(stack.seen.length, count + 1);
    assert.equal(stack.seen.at(-1)!.body, "it's {\"x\":1}");
    assert.equal(stack.seen.at(-1)!.headers['x-sig'], 'abc');

    await page.click('#curl-public');
    await page.waitForFunction(() => /public URL/.test(document.querySelector('#curl-target')?.textContent ?? ''));
    const publicCommand = (await page.textContent('#curl-text'))!;
    assert.ok(publicCommand.includes(`${stack.client.publicUrl}/curl?q=1`), publicCommand);
    count = stack.seen.length;
    await run('bash', ['-c', publicCommand], { cwd: work });
    assert.equal(stack.seen.length, count + 1);
    assert.equal(stack.seen.at(-1)!.url, '/curl?q=1');
  });

  test('HAR downloads: the selected request and all of them', async () => {
    await open('/curl?q=1');
    const [one] = await Promise.all([page.waitForEvent('download'), page.click('#har-one')]);
    assert.match(one.suggestedFilename(), /^burrow-.*\.har$/);
    const har = JSON.parse(readFileSync((await one.path())!, 'utf8'));
    assert.equal(har.log.version, '1.2');
    assert.equal(har.log.entries.length, 1);
    assert.equal(har.log.entries[0].request.url, `${stack.client.publicUrl}/curl?q=1`);
    const [all] = await Promise.all([page.waitForEvent('download'), page.click('#har-all')]);
    const everything = JSON.parse(readFileSync((await all.path())!, 'utf8'));
    assert.equal(everything.log.entries.length, stack.inspector.ring.size);
  });

  test('Replay with edits removes a header whose line is deleted', async () => {
    await stack.send('POST', '/edit', { body: 'b', headers: { 'content-type': 'text/plain', 'x-remove-me': 'yes', 'x-keep': 'k' } });
    await open('/edit');
    await page.click('#replay-edit');
    await page.waitForSelector('#editor:not([hidden])');
    const headers = await page.inputValue('#e-headers');
    assert.match(headers, /^x-remove-me: yes$/m);
    await page.fill('#e-headers', headers.replace(/^x-remove-me: yes\n?/m, ''));
    const count = stack.seen.length;
    await page.click('#e-send');
    await waitFor(() => stack.seen.length === count + 1, 10_000, 'the edited replay');
    assert.equal(stack.seen.at(-1)!.headers['x-remove-me'], undefined);
    assert.equal(stack.seen.at(-1)!.headers['x-keep'], 'k');
  });

  test('a WebSocket connection is listed with its messages, open then closed with its code', async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${stack.edge.port}/live-socket`, { headers: { host: stack.host } });
    await new Promise((resolve, reject) => {
      socket.once('open', resolve);
      socket.once('error', reject);
    });
    const echoed = new Promise((resolve) => socket.once('message', resolve));
    socket.send(`hi ${XSS}`);
    await echoed;
    await open('/live-socket');
    assert.equal(await row('/live-socket').locator('td.method').textContent(), 'WS');
    assert.equal(await row('/live-socket').locator('td.status').textContent(), '101');
    await page.waitForSelector('#ws-pane:not([hidden])');
    await page.waitForFunction(() => document.querySelectorAll('#ws-messages tr').length === 2, undefined, { timeout: 10_000 });
    const messages = await page.locator('#ws-messages tr').evaluateAll((trs) => trs.map((tr) => [...tr.children].slice(1).map((td) => td.textContent)));
    assert.deepEqual(messages, [
      ['→ local', 'text', `${3 + XSS.length} B`, `hi ${XSS}`],
      ['← local', 'text', `${8 + XSS.length} B`, `echo:hi ${XSS}`],
    ]);
    assert.equal(await page.textContent('#ws-closed'), 'open');
    socket.close(4002, 'done');
    await page.waitForFunction(() => document.querySelector('#ws-code')?.textContent === '4002 (done)', undefined, { timeout: 10_000 });
    assert.match((await row('/live-socket').locator('td.path').textContent())!, /closed 4002 · 2 msgs/);
  });

  test('an edge timeout reads "timed out at the edge (504 LOCAL_TIMEOUT)", not "cancelled by the edge"', async () => {
    await stack.send('GET', '/silent');
    await open('/silent');
    assert.match((await page.textContent('#d-error'))!, /^timed out at the edge \(504 LOCAL_TIMEOUT\)/);
    assert.doesNotMatch((await page.textContent('#d-error'))!, /cancelled/);
  });

  test('captured markup in paths, headers, bodies, curl and raw views is shown as text and never runs', async () => {
    await stack.send('POST', `/x/${encodeURIComponent(XSS)}`, { body: XSS, headers: { 'content-type': 'text/html', 'x-evil': XSS } });
    await row('/x/').waitFor({ timeout: 10_000 });
    await row('/x/').click();
    await page.waitForFunction(() => (document.querySelector('#d-path')?.textContent ?? '').startsWith('/x/'));
    await page.click('.body-mode[data-mode="raw"]');
    assert.equal(await page.textContent('#req-body'), XSS);
    await page.click('#curl-local');
    await page.waitForFunction(() => (document.querySelector('#curl-text')?.textContent ?? '').includes('onerror'));
    await page.fill('#filter', 'onerror');
    await page.waitForTimeout(400);
    await page.fill('#filter', '');
    await page.click('.body-mode[data-mode="pretty"]');
    assert.equal(await page.evaluate(() => window.__pwned), undefined);
    assert.equal(await page.locator('#detail img, #rows img, #curl img, #ws-pane img').count(), 0);
  });

  test('at 820 px the path column keeps a useful width; at 360 px the page is usable', async () => {
    await page.setViewportSize({ width: 820, height: 900 });
    await page.waitForTimeout(100);
    const pathWidth = await row('/raw').locator('td.path').evaluate((td) => td.getBoundingClientRect().width);
    assert.ok(pathWidth >= 300, `path column ${pathWidth} px wide at 820 px`);
    await page.setViewportSize({ width: 360, height: 740 });
    await page.waitForTimeout(100);
    const narrow = await row('/raw').locator('td.path').evaluate((td) => td.getBoundingClientRect().width);
    assert.ok(narrow >= 120, `path column ${narrow} px wide at 360 px`);
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(overflow <= 361, `the page is ${overflow} px wide at 360 px`);
    await row('/raw').click();
    await page.waitForFunction(() => document.querySelector('#d-path')?.textContent === '/raw');
    for (const id of ['#replay', '#replay-edit', '#curl-local', '#filter']) {
      const box = await page.locator(id).boundingBox();
      assert.ok(box !== null && box.x >= 0 && box.x + box.width <= 361, `${id} is on screen: ${JSON.stringify(box)}`);
    }
    await page.setViewportSize({ width: 1400, height: 900 });
  });

  test('after a restart, history loaded from the edge is listed and marked', async () => {
    const fresh = await Inspector.start({ port: 0, edge: stack.edge.url, token: stack.account.token });
    others.push(fresh);
    fresh.attach(stack.client);
    const second = await browser.context.newPage();
    watch(second, problems);
    await second.goto(fresh.url);
    await second.waitForFunction(() => document.querySelectorAll('#rows tr .edge-mark').length > 5, undefined, { timeout: 10_000 });
    const target = second.locator('#rows tr', { has: second.locator('td.path', { hasText: '/hooks/a' }) }).first();
    await target.click();
    await second.waitForFunction(() => document.querySelector('#d-path')?.textContent === '/hooks/a');
    await second.waitForFunction(() => (document.querySelector('#req-body')?.textContent ?? '').includes('evt_Needle42'));
    assert.match((await second.textContent('#d-source'))!, /edge/);
    await second.close();
  });

  test('the page raised no errors', () => {
    assert.deepEqual(problems, []);
  });
});

describe('issue 16: a truncated replay in Chromium', () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];

  before(async () => {
    stack = await startStack({}, 1024, { captureBodyLimit: 1024 });
    browser = await launchChromium();
    page = await browser.context.newPage();
    watch(page, problems);
    await page.goto(stack.inspector.url);
    await page.waitForSelector('#session.pill-on', { timeout: 10_000 });
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  test('Replay is refused with the reason, then the page offers to send the cut body', async () => {
    await stack.send('POST', '/big', { body: 'y'.repeat(5000), headers: { 'content-type': 'text/plain' } });
    const row = page.locator('#rows tr', { has: page.locator('td.path', { hasText: '/big' }) }).first();
    await row.waitFor({ timeout: 10_000 });
    await row.click();
    await page.waitForFunction(() => document.querySelector('#d-path')?.textContent === '/big');
    const count = stack.seen.length;
    await page.click('#replay');
    await page.waitForSelector('#truncated:not([hidden])');
    assert.match((await page.textContent('#truncated-message'))!, /cut at the capture limit/);
    assert.equal(stack.seen.length, count, 'nothing was sent');
    await page.click('#replay-truncated');
    await waitFor(() => stack.seen.length === count + 1, 10_000, 'the allowed replay');
    assert.equal(stack.seen.at(-1)!.body.length, 1024);
    await page.waitForFunction(() => /cut at the capture limit/.test(document.querySelector('#toast')?.textContent ?? ''));
    assert.equal(await page.isHidden('#truncated'), true);
  });

  test('the page raised no errors (the refused replay is an expected 409)', () => {
    assert.deepEqual(
      problems.filter((problem) => !/status of 409 \(Conflict\)/.test(problem)),
      [],
    );
  });
});
