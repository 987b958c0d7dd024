/**
 * Held webhooks in the inspector (issue 18, docs/inspector.md): a delivery of a held event reaches the
 * local server through the tunnel with `Burrow-Delivery` and `Burrow-Received-At`, and the inspector
 * marks it in the list ("held · #N", the attempt) and in the detail, with the event id it learns from the
 * edge's capture (the request does not carry it); an ordinary request is not marked.
 * Real edge, real client, real local server, real inspector, real Chromium.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { Inspector } from '../../src/inspector/server.js';
import { call, createAccount, readBody, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { launchChromium, type Browser } from './browser.js';
import { inspect } from './fixture.js';

const NAME = 'held-inspect';

describe('held deliveries in the inspector page', () => {
  let edge: TestEdge;
  let account: TestAccount;
  let local: LocalServer;
  let client: TunnelClient;
  let inspector: Inspector;
  let browser: Browser;
  let page: Page;
  const seen: { url: string; delivery: string | undefined }[] = [];
  const problems: string[] = [];

  before(async () => {
    edge = await startEdge();
    account = await createAccount(edge);
    assert.equal((await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: account.token, body: { subdomain: NAME, offline: 'queue' } })).status, 201);
    local = await startLocal((req, res) => {
      void readBody(req).then(() => {
        seen.push({ url: req.url!, delivery: req.headers['burrow-delivery'] as string | undefined });
        res.end('ok');
      });
    });
    ({ client } = await startClient(edge, account.token, local.port, { subdomain: NAME }));
    inspector = await Inspector.start({ port: 0, edge: edge.url, token: account.token, historyCount: 0 });
    inspector.attach(client);
    browser = await launchChromium();
    page = await browser.context.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(`console: ${message.text()}`);
    });
    await page.goto(inspector.url);
    await page.waitForSelector('#session.pill-on', { timeout: 10_000 });
  });

  after(async () => {
    await browser?.close();
    inspector?.close();
    await client?.close();
    await local?.close();
    await edge?.close();
  });

  const row = (path: string) => page.locator('#rows tr', { has: page.locator('td.path', { hasText: path }) }).first();
  const post = (path: string) => call(edge, 'POST', path, { host: `${NAME}.localhost:${edge.port}`, rawBody: '{"id":"evt_x"}', headers: { 'content-type': 'application/json' } });

  let eventId = '';
  test('a held event delivered on resume is marked "held · #1" with its received time; a live request is not', async () => {
    // Paused, a live request is held as if the tunnel were offline; resumed, it is delivered.
    assert.equal((await call(edge, 'POST', `/api/v1/queue/pause?subdomain=${NAME}`, { token: account.token })).status, 200);
    const held = await post('/hooks/held');
    assert.equal(held.status, 202, held.text);
    eventId = held.json.event_id;
    assert.equal((await call(edge, 'POST', `/api/v1/queue/resume?subdomain=${NAME}`, { token: account.token })).status, 200);
    await waitFor(() => seen.length === 1, 10_000, 'the delivery');
    assert.equal(seen[0]!.delivery, '1');
    // Until the edge has the local server's answer, the queue is not empty and new requests wait behind it.
    await waitFor(async () => (await call(edge, 'GET', `/api/v1/queue?subdomain=${NAME}`, { token: account.token })).json.queue[0]?.state === 'delivered', 10_000, 'the event delivered');
    const plain = await post('/plain');
    assert.equal(plain.status, 200, plain.text);

    await row('/plain').waitFor({ timeout: 10_000 });
    await row('/hooks/held').waitFor();
    assert.equal(await row('/hooks/held').locator('.held-mark').textContent(), 'held · #1');
    const title = (await row('/hooks/held').locator('.held-mark').getAttribute('title'))!;
    assert.match(title, /^held webhook, delivery attempt 1, received by the edge at \d{4}-\d\d-\d\dT[0-9:.]+Z$/);
    assert.equal(await row('/plain').locator('.held-mark').count(), 0);

    await row('/hooks/held').click();
    await page.waitForFunction(() => (globalThis as any).document.querySelector('#d-path')?.textContent === '/hooks/held');
    assert.equal(await page.locator('#d-delivery-label').isVisible(), true);
    // The request does not carry the event id; the inspector asks the edge's capture for it, once.
    await page.locator('#d-delivery', { hasText: `event ${eventId}` }).waitFor({ timeout: 10_000 });
    assert.match((await page.textContent('#d-delivery'))!, /^held webhook, delivery attempt 1, received by the edge at \S+Z, event evt_/);
    await page.locator('#rows .held-mark[title$="' + eventId + '"]').waitFor({ timeout: 10_000 });
    await row('/plain').click();
    await page.waitForFunction(() => (globalThis as any).document.querySelector('#d-path')?.textContent === '/plain');
    assert.equal(await page.locator('#d-delivery').isVisible(), false);
  });

  test('a redelivery is marked with its attempt number; the JSON says the same', async () => {
    const redelivered = await call(edge, 'POST', `/api/v1/queue/${eventId}/deliver`, { token: account.token });
    assert.equal(redelivered.status, 202, redelivered.text);
    await waitFor(() => seen.length === 3, 10_000, 'the redelivery');
    assert.equal(seen[2]!.delivery, '2');
    await page.locator('#rows .held-mark', { hasText: 'held · #2' }).waitFor({ timeout: 10_000 });
    const list = await inspect(inspector, 'GET', '/api/requests?summary=1');
    const deliveries = list.json.requests.filter((item: { delivery: unknown }) => item.delivery !== null).map((item: { path: string; delivery: { attempt: number; event_id: string | null } }) => [item.path, item.delivery.attempt]);
    assert.deepEqual(deliveries.sort(), [['/hooks/held', 1], ['/hooks/held', 2]]);
    const first = list.json.requests.find((item: { delivery: { attempt: number } | null }) => item.delivery?.attempt === 1);
    assert.equal(first.delivery.event_id, eventId);
    assert.match(first.delivery.received_at, /^\d{4}-\d\d-\d\dT[0-9:.]+Z$/);
    assert.equal(list.json.requests.find((item: { path: string }) => item.path === '/plain').delivery, null);
  });

  test('no page error, no CSP violation', () => {
    assert.deepEqual(problems, []);
  });
});
