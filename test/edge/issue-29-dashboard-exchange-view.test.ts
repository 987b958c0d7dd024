/**
 * Issue 29, "one exchange view", in the dashboard: real headless Chromium against a real edge (captures
 * cut at 1 KiB), a real tunnel client and a real local server that keeps the bytes it gets, driven
 * through accessible names. What broke: a fresh load logged a 401; an error after a notice kept the
 * notice's (success) style; Release released at once; Replay with edits sent a binary body empty; a
 * binary body could not be edited; no hex view; "Copy as curl" left a binary body out; no HAR; a
 * truncated capture's replay only said it was refused, with no way to send it anyway.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import type { Page } from 'playwright-core';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { call, createAccount, readBody, startClient, startEdge, startLocal, tempDir, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { launchChromium, type Browser } from '../inspector/browser.js';

declare const document: any;
declare function getComputedStyle(element: unknown): { color: string };

const NAME = 'bin-hooks';
const BYTES = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

describe('issue 29: the dashboard exchange view in Chromium', () => {
  let edge: TestEdge;
  let alice: TestAccount;
  let local: LocalServer;
  let client: TunnelClient;
  let browser: Browser;
  let page: Page;
  let work: string;
  const seen: { method: string; url: string; body: Buffer }[] = [];
  const consoleErrors: string[] = [];
  const problems: string[] = [];

  before(async () => {
    edge = await startEdge({ authFailureLimit: 1_000, captureBodyLimit: 1024 });
    alice = await createAccount(edge, 'PRO');
    local = await startLocal((req, res) => {
      void readBody(req).then((body) => {
        seen.push({ method: req.method!, url: req.url!, body });
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ ok: true, bytes: body.byteLength }));
      });
    });
    ({ client } = await startClient(edge, alice.token, local.port, { subdomain: NAME }));
    work = tempDir('burrow-dashboard-curl-');
    browser = await launchChromium();
    page = await browser.context.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
  });

  after(async () => {
    await browser?.close();
    await client?.close();
    await local?.close();
    await edge?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const send = (method: string, path: string, body: Buffer | string, type: string) =>
    call(edge, method, path, { host: `${NAME}.localhost:${edge.port}`, rawBody: body, headers: { 'content-type': type } });
  const button = (name: string) => page.getByRole('button', { name, exact: true });
  const link = (name: string) => page.getByRole('link', { name, exact: true });
  const rowWith = (text: string) => page.getByRole('row').filter({ hasText: text });
  async function openRequest(path: string): Promise<void> {
    await link('Requests').click();
    await page.getByLabel('Tunnel', { exact: true }).selectOption(NAME);
    await rowWith(path).first().click();
    await page.getByRole('heading', { name: path }).waitFor();
  }

  test('a fresh load shows the sign-in form without a 401 (or any error) in the console', async () => {
    await page.goto(`http://localhost:${edge.port}/`);
    await page.getByLabel('Access token', { exact: true }).waitFor();
    await page.waitForTimeout(300);
    const onLoad = [...consoleErrors];
    consoleErrors.length = 0;
    await page.getByLabel('Access token', { exact: true }).fill(alice.token);
    await button('Sign in').click();
    await button('Sign out').waitFor();
    assert.deepEqual(onLoad, []);
  });

  test('an error shown right after a notice is styled as an error, not as the notice', async () => {
    await link('Reserved subdomains').click();
    await page.getByLabel('Subdomain', { exact: true }).fill('acme-notice');
    await button('Reserve').click();
    await page.getByText('Reserved acme-notice.').waitFor();
    assert.equal(await page.locator('#error').getAttribute('class'), 'notice');
    await page.getByLabel('Subdomain', { exact: true }).fill('ab');
    await button('Reserve').click();
    await page.getByText(/^INVALID_REQUEST: /).waitFor();
    assert.equal(await page.locator('#error').getAttribute('class'), 'error');
    assert.equal(await page.locator('#error').getAttribute('role'), 'alert');
    const [errorColour, noticeColour] = await page.evaluate(() => {
      const probe = document.createElement('p');
      document.body.append(probe);
      probe.className = 'notice';
      const notice = getComputedStyle(probe).color;
      probe.remove();
      return [getComputedStyle(document.querySelector('#error')).color, notice];
    });
    assert.notEqual(errorColour, noticeColour);
    // The notice's timer must not hide the error that replaced it.
    await page.waitForTimeout(2_800);
    assert.equal(await page.locator('#error').isVisible(), true);
  });

  test('Release asks for a confirmation like Revoke and Close; Cancel keeps the name', async () => {
    const reserved = async () => (await call(edge, 'GET', '/api/v1/reserved-subdomains', { token: alice.token })).json.reserved_subdomains.map((r: { subdomain: string }) => r.subdomain);
    await rowWith('acme-notice').getByRole('button', { name: 'Release', exact: true }).click();
    await page.getByRole('heading', { name: 'Release acme-notice?' }).waitFor();
    assert.equal(await page.evaluate(() => document.activeElement?.textContent), 'Cancel');
    await button('Cancel').click();
    assert.ok((await reserved()).includes('acme-notice'), 'still reserved after Cancel');
    await rowWith('acme-notice').getByRole('button', { name: 'Release', exact: true }).click();
    await button('Release subdomain').click();
    await rowWith('acme-notice').waitFor({ state: 'detached' });
    assert.ok(!(await reserved()).includes('acme-notice'));
  });

  test('Replay with edits sends an unedited binary body as captured, byte for byte', async () => {
    assert.equal((await send('POST', '/bin', BYTES, 'application/octet-stream')).status, 200);
    await openRequest('/bin');
    await button('Replay with edits').click();
    const body = page.getByLabel('Body', { exact: true });
    assert.match(await body.inputValue(), /^00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f\n10 11 /);
    const count = seen.length;
    await button('Send replay').click();
    await waitFor(() => seen.length === count + 1, 10_000, 'the replay');
    assert.deepEqual(seen.at(-1)!.body, BYTES);
    await page.getByText('Replay result').waitFor();
  });

  test('a binary body is edited as hex, and the edited bytes are sent', async () => {
    await button('Replay with edits').click();
    const body = page.getByLabel('Body', { exact: true });
    await body.fill(`ff fe\n${(await body.inputValue()).slice(6)}\n0a`);
    const count = seen.length;
    await button('Send replay').click();
    await waitFor(() => seen.length === count + 1, 10_000, 'the edited replay');
    assert.deepEqual(seen.at(-1)!.body, Buffer.concat([Buffer.from([0xff, 0xfe]), BYTES.subarray(2), Buffer.from([0x0a])]));
    // Something that is not hex is refused in the form, and nothing is sent.
    await button('Replay with edits').click();
    await page.getByLabel('Body', { exact: true }).fill('zz');
    await button('Send replay').click();
    await page.getByText('Body: "z" is not a hex digit').waitFor();
    assert.equal(seen.length, count + 1);
    await button('Cancel').click();
  });

  test('Copy as curl sends a binary body byte for byte', async () => {
    await button('Copy as curl').click();
    const command = (await page.locator('pre.curl').textContent())!;
    const count = seen.length;
    await promisify(execFile)('bash', ['-c', command], { cwd: work });
    assert.equal(seen.length, count + 1);
    assert.deepEqual(seen.at(-1)!.body, BYTES);
  });

  test('HAR downloads the request, its binary body as base64', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'HAR', exact: true }).click()]);
    assert.match(download.suggestedFilename(), /^burrow-req_[0-9a-f]+\.har$/);
    const har = JSON.parse(readFileSync((await download.path())!, 'utf8'));
    assert.equal(har.log.version, '1.2');
    assert.equal(har.log.entries.length, 1);
    const entry = har.log.entries[0];
    assert.equal(entry.request.url, `http://${NAME}.localhost:${edge.port}/bin`);
    assert.equal(entry.request.postData._encoding, 'base64');
    assert.deepEqual(Buffer.from(entry.request.postData.text, 'base64'), BYTES);
  });

  test('the Hex view shows any body as a hex dump', async () => {
    assert.equal((await send('POST', '/orders', '{"sku":"TEE"}', 'application/json')).status, 200);
    await openRequest('/orders');
    await button('Hex').click();
    assert.match((await page.locator('#req-body').textContent())!, /^00000000  7b 22 73 6b 75 22 3a 22  54 45 45 22 7d +\|\{"sku":"TEE"\}\|$/);
    await button('Pretty').click();
  });

  test('a truncated capture is not replayed at once; the page offers to send the cut body anyway', async () => {
    assert.equal((await send('POST', '/big', 'y'.repeat(5000), 'text/plain')).status, 200);
    await openRequest('/big');
    const count = seen.length;
    await button('Replay').click();
    await page.getByText(/cut at the capture limit/).first().waitFor();
    assert.equal(seen.length, count, 'nothing was sent');
    await button('Replay the cut body anyway').click();
    await waitFor(() => seen.length === count + 1, 10_000, 'the allowed replay');
    assert.equal(seen.at(-1)!.body.toString('utf8'), 'y'.repeat(1024));
    await page.getByText('Replay result').waitFor();
    assert.equal(await button('Replay the cut body anyway').isVisible(), false);
  });

  test('no page error; the only console errors are the refusals the tests asked for', () => {
    assert.deepEqual(problems, []);
    const unexpected = consoleErrors.filter((text) => !/status of (400 \(Bad Request\)|409 \(Conflict\))/.test(text));
    assert.deepEqual(unexpected, []);
  });
});
