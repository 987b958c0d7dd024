/**
 * The dashboard's offline-mode select and Queue page (issue 18, docs/dashboard.md) in real headless
 * Chromium against a real edge, a real local server and the real tunnel client, driven through accessible
 * names, with every effect checked through the API: the mode changed in the page, an event held while no
 * client is connected listed as queued, a parked failed one redelivered once the local server is fixed,
 * pause and resume, discard after a confirmation. Then the Requests page's Search, which finds a request
 * by a text in its body through GET /api/v1/requests?q=.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { call, createAccount, readBody, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { launchChromium, watchProblems, type Browser } from '../inspector/browser.js';

const NAME = 'held-hooks';

describe('the dashboard queue in Chromium', () => {
  let edge: TestEdge;
  let alice: TestAccount;
  let local: LocalServer;
  let healthy = false;
  const delivered: { url: string; body: string; delivery: string | undefined }[] = [];
  const clients: TunnelClient[] = [];
  let browser: Browser;
  let page: Page;
  const problems: string[] = [];
  let origin: string;

  before(async () => {
    // Short retries: an event is parked as failed after three attempts within a fraction of a second.
    edge = await startEdge({ authFailureLimit: 1_000, offlineQueue: { retryDelaysMs: [10, 20] } });
    origin = `http://localhost:${edge.port}`;
    alice = await createAccount(edge, 'PRO');
    local = await startLocal((req, res) => {
      void readBody(req).then((body) => {
        if (!healthy) {
          res.statusCode = 500;
          res.end('broken');
          return;
        }
        delivered.push({ url: req.url!, body: body.toString('utf8'), delivery: req.headers['burrow-delivery'] as string | undefined });
        res.end('ok');
      });
    });
    browser = await launchChromium();
    page = await browser.context.newPage();
    watchProblems(page, problems, { allowRefusals: true });
  });

  after(async () => {
    await browser?.close();
    for (const client of clients) client.close();
    await local?.close();
    await edge?.close();
  });

  const button = (name: string) => page.getByRole('button', { name, exact: true });
  const link = (name: string) => page.getByRole('link', { name, exact: true });
  const rowWith = (text: string) => page.getByRole('row').filter({ hasText: text });
  const queueOf = async () => (await call(edge, 'GET', `/api/v1/queue?subdomain=${NAME}`, { token: alice.token })).json;
  const post = (path: string, body: string) => call(edge, 'POST', path, { host: `${NAME}.localhost:${edge.port}`, rawBody: body, headers: { 'content-type': 'application/json' } });

  test('the offline mode is shown and changed in the Reserved subdomains page', async () => {
    await page.goto(`${origin}/`);
    await page.getByLabel('Access token', { exact: true }).fill(alice.token);
    await button('Sign in').click();
    await link('Reserved subdomains').click();
    await page.getByLabel('Subdomain', { exact: true }).fill(NAME);
    await button('Reserve').click();
    const mode = rowWith(NAME).getByLabel('Offline mode', { exact: true });
    await mode.waitFor();
    assert.equal(await mode.inputValue(), 'off');
    // With the keyboard: focus the select and choose with the arrow keys, as a user would.
    await mode.focus();
    await mode.selectOption('queue');
    await page.getByText(`Offline mode of ${NAME}: queue.`).waitFor();
    const listed = (await call(edge, 'GET', '/api/v1/reserved-subdomains', { token: alice.token })).json.reserved_subdomains;
    assert.deepEqual(listed.map((r: { subdomain: string; offline: string }) => [r.subdomain, r.offline]), [[NAME, 'queue']]);
    await page.reload();
    assert.equal(await rowWith(NAME).getByLabel('Offline mode', { exact: true }).inputValue(), 'queue');
  });

  let firstId = '';
  test('an event held while no client is connected appears as queued', async () => {
    const held = await post('/hooks/one', '{"id":"evt_one"}');
    assert.equal(held.status, 202, held.text);
    firstId = held.json.event_id;
    await rowWith(NAME).getByRole('link', { name: `Queue of ${NAME}`, exact: true }).click();
    await page.getByRole('heading', { name: 'Queue', exact: true }).waitFor();
    await link('Queue').and(page.locator('[aria-current=page]')).waitFor();
    const row = rowWith(firstId);
    await row.waitFor();
    const text = await row.innerText();
    assert.match(text, /\bqueued\b/);
    assert.match(text, /\b0\b/, 'no attempt yet');
    assert.match(text, /16 B/);
    assert.match(text, /POST \/hooks\/one/);
  });

  test('a parked failed event is redelivered from the page once the local server is fixed', async () => {
    const { client } = await startClient(edge, alice.token, local.port, { subdomain: NAME });
    clients.push(client);
    await waitFor(async () => (await queueOf()).queue[0]?.state === 'failed', 10_000, 'the event parked as failed');
    const row = rowWith(firstId);
    await row.getByText('failed', { exact: true }).waitFor({ timeout: 10_000 });
    assert.match(await row.innerText(), /\b3\b/, 'three attempts');
    assert.match(await row.innerText(), /500/);
    healthy = true;
    await row.getByRole('button', { name: 'Redeliver', exact: true }).click();
    await waitFor(() => delivered.length === 1, 10_000, 'the redelivery');
    assert.deepEqual(delivered[0], { url: '/hooks/one', body: '{"id":"evt_one"}', delivery: '4' });
    await row.getByText('delivered', { exact: true }).waitFor({ timeout: 10_000 });
    assert.equal((await queueOf()).queue[0].state, 'delivered');
  });

  test('Pause queue holds new requests; Resume queue delivers them', async () => {
    await button('Pause queue').click();
    await button('Resume queue').waitFor();
    assert.equal((await queueOf()).paused, true);
    const held = await post('/hooks/two', '{"id":"evt_two"}');
    assert.equal(held.status, 202, held.text);
    await rowWith(held.json.event_id).getByText('queued', { exact: true }).waitFor({ timeout: 10_000 });
    assert.equal(delivered.length, 1);
    await button('Resume queue').click();
    await button('Pause queue').waitFor();
    await waitFor(() => delivered.length === 2, 10_000, 'the held request delivered on resume');
    assert.equal(delivered[1]!.url, '/hooks/two');
    assert.equal((await queueOf()).paused, false);
  });

  test('Discard asks first, then removes the event', async () => {
    const row = rowWith(firstId);
    await row.getByRole('button', { name: 'Discard', exact: true }).click();
    await page.getByText(`Discard ${firstId}?`).waitFor();
    await button('Cancel').click();
    assert.ok((await queueOf()).queue.some((event: { id: string }) => event.id === firstId), 'Cancel keeps it');
    await row.getByRole('button', { name: 'Discard', exact: true }).click();
    await button('Discard event').click();
    await row.waitFor({ state: 'detached', timeout: 10_000 });
    assert.ok(!(await queueOf()).queue.some((event: { id: string }) => event.id === firstId));
  });

  test('issue 23: Discard all asks first, then drops every event of the name in one go', async () => {
    await button('Pause queue').click();
    await button('Resume queue').waitFor();
    const ids: string[] = [];
    for (const n of [1, 2, 3]) ids.push((await post(`/hooks/junk-${n}`, `{"junk":${n}}`)).json.event_id);
    await rowWith(ids[2]!).waitFor({ timeout: 10_000 });
    await button('Discard all').click();
    await page.getByText(`Discard every event of ${NAME}?`).waitFor();
    await button('Cancel').click();
    assert.equal((await queueOf()).events, 4, 'Cancel keeps them (three queued, one delivered)');
    await button('Discard all').click();
    await button('Discard all events').click();
    await page.getByText('Nothing held.').waitFor({ timeout: 10_000 });
    const after = await queueOf();
    assert.deepEqual([after.queue, after.events, after.bytes], [[], 0, 0]);
    await button('Resume queue').click();
    await button('Pause queue').waitFor();
    assert.equal(delivered.length, 2, 'nothing discarded was delivered');
  });

  test('Requests: Search finds the requests whose bodies hold the text, through the edge', async () => {
    await link('Requests').click();
    await page.getByLabel('Tunnel', { exact: true }).selectOption(NAME);
    await rowWith('/hooks/two').first().waitFor();
    const requestRows = page.locator('table.requests tbody tr');
    // Four deliveries of /hooks/one (three failed attempts and the redelivery), one of /hooks/two.
    await waitFor(async () => (await requestRows.count()) === 5, 10_000, 'five deliveries listed');
    await page.getByLabel('Search', { exact: true }).fill('EVT_TWO');
    await waitFor(async () => (await requestRows.count()) === 1, 10_000, 'one request found');
    assert.match(await requestRows.first().innerText(), /POST\s+\/hooks\/two/);
    await page.getByText(/Search in paths, headers and bodies: 1 found in the newest 5 requests\./).waitFor();
    await page.getByLabel('Search', { exact: true }).fill('evt_nowhere');
    await page.getByText('No request found by the search.').waitFor({ timeout: 10_000 });
    await page.getByLabel('Search', { exact: true }).fill('');
    await waitFor(async () => (await requestRows.count()) === 5, 10_000, 'all five again');
  });

  test('readable at 360 px: the Reserved subdomains and Queue pages are no wider than the screen', async () => {
    await page.setViewportSize({ width: 360, height: 740 });
    for (const name of ['Reserved subdomains', 'Queue']) {
      await link(name).click();
      await page.getByRole('heading', { name, exact: true }).waitFor();
      await page.waitForTimeout(200);
      const width = await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth);
      assert.ok(width <= 362, `${name}: ${width} px wide`);
    }
    await page.setViewportSize({ width: 1400, height: 900 });
  });

  test('no page error, no CSP violation', () => {
    assert.deepEqual(problems, []);
  });
});
