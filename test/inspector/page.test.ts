/**
 * The inspector page in real headless Chromium against a real tunnel: rows appear live, a 500 row is
 * highlighted, a click shows headers and bodies (JSON pretty-printed, binary as hex), Replay and Replay
 * with edits re-send to the local server, the filter and the keyboard work, and the page raises no
 * errors nor any CSP violation.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { waitFor } from '../helpers.js';
import { openInspectorPage, type Browser } from './browser.js';
import { startStack, type Stack } from './fixture.js';

// These run inside the page (tsconfig has no DOM library): module-local declarations, nothing global.
declare const document: any;
declare function getComputedStyle(element: unknown): { backgroundColor: string };

describe('inspector page in Chromium', () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;
  let problems: string[] = [];

  before(async () => {
    stack = await startStack();
    ({ browser, page, problems } = await openInspectorPage(stack.inspector.url));
  });

  after(async () => {
    await browser?.close();
    await stack?.close();
  });

  const rows = () => page.locator('#rows tr:not([hidden])');
  const row = (path: string) => page.locator('#rows tr', { has: page.locator('td.path', { hasText: path }) }).first();

  test('the header shows the session and the forwarding URL', async () => {
    assert.equal(await page.textContent('#session'), 'online');
    assert.match((await page.textContent('#forwarding'))!, new RegExp(`${stack.client.publicUrl!.replace(/[.]/g, '\\.')} → localhost:${stack.local.port}`));
    assert.equal(await page.title(), 'Burrow inspector');
  });

  test('rows appear live as requests go through the tunnel, newest on top, a 500 highlighted', async () => {
    assert.equal(await rows().count(), 0);
    await stack.send('GET', '/live/ok');
    await stack.send('POST', '/live/json', { body: '{"event":"paid","amount":42,"items":[1,2]}', headers: { 'content-type': 'application/json', 'x-signature': 'sig-abc' } });
    await stack.send('GET', '/status/500');
    await page.waitForFunction(() => document.querySelectorAll('#rows tr').length === 3, undefined, { timeout: 10_000 });

    const paths = await page.locator('#rows tr td.path').allTextContents();
    assert.deepEqual(paths, ['/status/500', '/live/json', '/live/ok']);
    const cells = await page.locator('#rows tr').first().locator('td').allTextContents();
    assert.equal(cells[0], 'GET');
    assert.equal(cells[2], '500');
    assert.match(cells[3]!, /^[0-9.]+ (ms|s)$/);
    assert.match(cells[4]!, /^\d\d:\d\d:\d\d\.\d{3}$/);

    const failing = row('/status/500');
    assert.match((await failing.getAttribute('class'))!, /\bnon2xx\b/);
    assert.match((await failing.getAttribute('class'))!, /\bs5xx\b/);
    const ok = row('/live/ok');
    assert.doesNotMatch((await ok.getAttribute('class'))!, /non2xx/);
    const background = (locator: typeof ok) => locator.evaluate((element) => getComputedStyle(element).backgroundColor);
    await page.mouse.move(0, 0);
    await page.waitForTimeout(900); // the new-row flash is over
    assert.notEqual(await background(failing), await background(ok), 'the 500 row stands out');
  });

  test('clicking a row shows its headers, the JSON body pretty-printed and the response', async () => {
    await row('/live/json').click();
    await page.waitForSelector('#detail:not([hidden])');
    await page.waitForFunction(() => document.querySelector('#d-path')?.textContent === '/live/json');
    assert.equal(await page.textContent('#d-method'), 'POST');
    assert.equal(await page.textContent('#d-status'), '200');
    const requestHeaders = await page.locator('#req-headers tr').evaluateAll((trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    assert.ok(requestHeaders.some(([name, value]) => name === 'x-signature' && value === 'sig-abc'), JSON.stringify(requestHeaders));
    assert.ok(requestHeaders.some(([name, value]) => name === 'content-type' && value === 'application/json'));
    const body = await page.textContent('#req-body');
    assert.equal(body, JSON.stringify({ event: 'paid', amount: 42, items: [1, 2] }, null, 2));
    assert.match((await page.textContent('#req-body-info'))!, /JSON/);
    assert.equal(await page.textContent('#res-status'), '200');
    const responseHeaders = await page.locator('#res-headers tr td:first-child').allTextContents();
    assert.ok(responseHeaders.includes('x-local'));
    assert.match((await page.textContent('#res-body'))!, /"url": "\/live\/json"/);
    assert.match((await page.textContent('#d-latency'))!, /ms|s$/);
    assert.match((await page.textContent('#d-id'))!, /^req_[0-9a-f]{20}$/);
  });

  test('the Replay button re-sends the request; the replay appears as a new row', async () => {
    await row('/live/json').click();
    await page.waitForFunction(() => document.querySelector('#d-path')?.textContent === '/live/json');
    const count = stack.seen.length;
    await page.click('#replay');
    await waitFor(() => stack.seen.length === count + 1, 10_000, 'the local server to get the replay');
    const again = stack.seen.at(-1)!;
    assert.equal(again.method, 'POST');
    assert.equal(again.url, '/live/json');
    assert.equal(again.headers['x-signature'], 'sig-abc');
    assert.equal(again.body, '{"event":"paid","amount":42,"items":[1,2]}');
    await page.waitForFunction(() => document.querySelectorAll('#rows tr .replay-mark').length === 1, undefined, { timeout: 10_000 });
    assert.match((await page.textContent('#toast'))!, /^Replayed req_[0-9a-f]+ as req_[0-9a-f]+: 200/);
    assert.equal(await page.locator('#rows tr').first().locator('td.path').evaluate((td) => td.firstChild?.textContent), '/live/json');
  });

  test('Replay with edits sends the edited method, path, header and body', async () => {
    await row('/live/json').first().click();
    await page.waitForFunction(() => document.querySelector('#d-path')?.textContent === '/live/json');
    await page.click('#replay-edit');
    await page.waitForSelector('#editor:not([hidden])');
    assert.equal(await page.inputValue('#e-method'), 'POST');
    assert.equal(await page.inputValue('#e-path'), '/live/json');
    await page.fill('#e-method', 'PUT');
    await page.fill('#e-path', '/live/edited?x=1');
    const headers = await page.inputValue('#e-headers');
    assert.match(headers, /^x-signature: sig-abc$/m);
    await page.fill('#e-headers', `${headers.replace('x-signature: sig-abc', 'x-signature: edited')}\nx-added: yes`);
    await page.fill('#e-body', '{"event":"edited"}');
    const count = stack.seen.length;
    await page.click('#e-send');
    await waitFor(() => stack.seen.length === count + 1, 10_000, 'the edited replay');
    const edited = stack.seen.at(-1)!;
    assert.equal(edited.method, 'PUT');
    assert.equal(edited.url, '/live/edited?x=1');
    assert.equal(edited.headers['x-signature'], 'edited');
    assert.equal(edited.headers['x-added'], 'yes');
    assert.equal(edited.body, '{"event":"edited"}');
    await page.waitForSelector('#editor[hidden]', { state: 'attached' });
    await row('/live/edited?x=1').waitFor({ timeout: 10_000 });
  });

  test('a binary body is shown as a hex dump', async () => {
    await stack.send('GET', '/binary');
    await row('/binary').click();
    await page.waitForFunction(() => document.querySelector('#d-path')?.textContent === '/binary');
    const dump = await page.textContent('#res-body');
    assert.match(dump!, /^00000000  00 01 02 ff fe 80 /);
    assert.match(dump!, /\|\.\.\.\.\.\.\|$/);
  });

  test('the filter box narrows the list; the keyboard moves, opens and replays', async () => {
    await page.fill('#filter', '500');
    await page.waitForFunction(() => [...document.querySelectorAll('#rows tr')].filter((tr: any) => !tr.hidden).length === 1);
    assert.deepEqual(await rows().locator('td.path').allTextContents(), ['/status/500']);
    await page.fill('#filter', 'live');
    assert.ok((await rows().count()) >= 3);
    await page.fill('#filter', '');
    await page.focus('body');
    await page.click('h1');

    const total = await rows().count();
    await page.keyboard.press('k'); // to the newest
    for (let i = 0; i < total; i++) await page.keyboard.press('k');
    await page.waitForFunction(() => document.querySelector('#rows tr.selected') === document.querySelector('#rows tr'));
    await page.keyboard.press('j');
    await page.waitForFunction(() => document.querySelector('#rows tr.selected') === document.querySelectorAll('#rows tr')[1]);
    await page.keyboard.press('ArrowDown');
    await page.waitForFunction(() => document.querySelector('#rows tr.selected') === document.querySelectorAll('#rows tr')[2]);
    const selectedId = await page.locator('#rows tr.selected').getAttribute('data-id');
    await page.keyboard.press('Enter');
    await page.waitForFunction((id) => document.querySelector('#d-id')?.textContent === id, selectedId);
    const count = stack.seen.length;
    await page.keyboard.press('r');
    await waitFor(() => stack.seen.length === count + 1, 10_000, 'the keyboard replay');
  });

  test('the page raised no errors', () => {
    assert.deepEqual(problems, []);
  });
});
