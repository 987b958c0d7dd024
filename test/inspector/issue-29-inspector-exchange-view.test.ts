/**
 * Issue 29, "one exchange view", in the inspector's page: real headless Chromium against a real tunnel
 * and inspector. What broke: a binary body could not be edited (the editor only offered to send it
 * unchanged); no hex view; a binary WebSocket message whose bytes happened to be text was shown as text;
 * long messages stretched the message table past its pane on a narrow screen; a WebSocket row had a
 * Replay button (and `r`) that could only fail, and its id read as a request id (`req_…`) that the edge's
 * API and `burrow requests show` do not know.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import WebSocket from 'ws';
import { call, waitFor } from '../helpers.js';
import { openInspectorPage, type Browser } from './browser.js';
import { inspect, startStack, type Stack } from './fixture.js';

declare const document: any;

const BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

describe('issue 29: the inspector exchange view in Chromium', () => {
  let stack: Stack;
  let browser: Browser;
  let page: Page;
  let socket: WebSocket | undefined;
  let problems: string[] = [];

  before(async () => {
    stack = await startStack();
    ({ browser, page, problems } = await openInspectorPage(stack.inspector.url));
  });

  after(async () => {
    socket?.terminate();
    await browser?.close();
    await stack?.close();
  });

  const row = (path: string) => page.locator('#rows tr', { has: page.locator('td.path', { hasText: path }) }).first();
  async function open(path: string): Promise<void> {
    await row(path).waitFor({ timeout: 10_000 });
    await row(path).click();
    await page.waitForFunction((wanted) => document.querySelector('#d-path')?.textContent === wanted, path);
  }

  test('a binary body is edited as hex: unedited it is sent as captured, edited the new bytes go', async () => {
    await stack.send('POST', '/bin', { body: BYTES, headers: { 'content-type': 'application/octet-stream' } });
    await open('/bin');
    await page.click('#replay-edit');
    assert.match(await page.inputValue('#e-body'), /^00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f\n/);
    let count = stack.seen.length;
    await page.click('#e-send');
    await waitFor(() => stack.seen.length === count + 1, 10_000, 'the unedited replay');
    assert.deepEqual(stack.seen.at(-1)!.raw, BYTES);

    await page.click('#replay-edit');
    await page.fill('#e-body', '00 ff 80 0d 0a');
    count = stack.seen.length;
    await page.click('#e-send');
    await waitFor(() => stack.seen.length === count + 1, 10_000, 'the edited replay');
    assert.deepEqual(stack.seen.at(-1)!.raw, Buffer.from([0x00, 0xff, 0x80, 0x0d, 0x0a]));
    await page.waitForSelector('#editor[hidden]', { state: 'attached' });
  });

  test('the Hex view shows a text body as a hex dump', async () => {
    await stack.send('POST', '/text', { body: 'hi <b>', headers: { 'content-type': 'text/plain' } });
    await open('/text');
    await page.click('.body-mode[data-mode="hex"]');
    assert.match((await page.textContent('#req-body'))!, /^00000000  68 69 20 3c 62 3e +\|hi <b>\|$/);
    assert.equal(await page.getAttribute('.body-mode[data-mode="hex"]', 'aria-pressed'), 'true');
    await page.click('.body-mode[data-mode="pretty"]');
    assert.equal(await page.textContent('#req-body'), 'hi <b>');
  });

  test('a binary WebSocket message is a hex dump, even when its bytes are text', async () => {
    socket = new WebSocket(`ws://127.0.0.1:${stack.edge.port}/feed`, { headers: { host: stack.host } });
    await new Promise((resolve, reject) => {
      socket!.once('open', resolve);
      socket!.once('error', reject);
    });
    let echoes = 0;
    socket.on('message', () => echoes++);
    socket.send(Buffer.from('hello binary'));
    socket.send('x'.repeat(5000)); // over the 4 KiB kept per message: listed as cut
    socket.send(Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 7) % 256)));
    await waitFor(() => echoes === 3, 5_000, 'the echoes');
    await open('/feed');
    await page.waitForFunction(() => document.querySelectorAll('#ws-messages tr').length === 6, undefined, { timeout: 10_000 });
    const first = await page.locator('#ws-messages tr').first().locator('td').allTextContents();
    assert.deepEqual(first.slice(1, 4), ['→ local', 'binary', '12 B']);
    assert.match(first[4]!, /^00000000  68 65 6c 6c 6f 20 62 69  6e 61 72 79 +\|hello binary\|$/);
  });

  test('a WebSocket row offers no Replay (nor r, nor e), and its id does not read as a request id', async () => {
    await open('/feed');
    assert.equal(await page.isVisible('#replay'), false);
    assert.equal(await page.isVisible('#replay-edit'), false);
    const id = (await page.textContent('#d-id'))!;
    assert.match(id, /^ws_[0-9a-f]{20}$/);
    assert.match((await page.textContent('#ws-note'))!, /unknown to "burrow requests", the edge API and the dashboard/);
    const count = stack.seen.length;
    await page.click('h1');
    await page.keyboard.press('r');
    await page.keyboard.press('e');
    await page.waitForTimeout(300);
    assert.equal(stack.seen.length, count);
    assert.equal(await page.isVisible('#editor'), false);
    const refused = await inspect(stack.inspector, 'POST', `/api/requests/${id}/replay`, { body: {} });
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.json.error.code, 'INVALID_REQUEST');
    assert.match(refused.json.error.message, /WebSocket connection/);
    assert.equal((await call(stack.edge, 'GET', `/api/v1/requests/${id.replace('ws_', 'req_')}`, { token: stack.account.token })).status, 404);
  });

  test('the message table stays inside its pane, from wide to 360 px', async () => {
    await open('/feed');
    await page.waitForFunction(() => document.querySelectorAll('#ws-messages tr').length === 6, undefined, { timeout: 10_000 });
    for (const width of [1400, 820, 360]) {
      await page.setViewportSize({ width, height: 900 });
      await page.waitForTimeout(100);
      // The table's right edge stays inside the pane's content box, the pane inside the detail, and the
      // detail does not scroll sideways.
      const sizes = await page.evaluate(() => {
        const detail = document.querySelector('#detail');
        const pane = document.querySelector('#ws-pane');
        const style = (globalThis as any).getComputedStyle(pane);
        const inner = pane.getBoundingClientRect().right - parseFloat(style.paddingRight) - parseFloat(style.borderRightWidth);
        const cells = [...pane.querySelectorAll('table.messages, #ws-messages td')].map((cell: any) => cell.getBoundingClientRect().right);
        return {
          cells: Math.max(...cells),
          inner,
          pane: pane.getBoundingClientRect().right,
          detail: detail.getBoundingClientRect().right,
          detailScroll: detail.scrollWidth - detail.clientWidth,
          page: document.documentElement.scrollWidth,
        };
      });
      const fits = sizes.cells <= sizes.inner + 0.5 && sizes.pane <= sizes.detail + 0.5 && sizes.pane <= width && sizes.detailScroll <= 0;
      assert.ok(fits, `${width} px: ${JSON.stringify(sizes)}`);
      assert.ok(sizes.page <= width, `${width} px: the page is ${sizes.page} px wide`);
    }
    await page.setViewportSize({ width: 1400, height: 900 });
    socket!.close();
  });

  test('the page raised no errors', () => {
    assert.deepEqual(problems, []);
  });
});
