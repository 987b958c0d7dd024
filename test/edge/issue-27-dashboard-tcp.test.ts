/**
 * Issue 27 in the dashboard (real Chromium, real edge with `--tcp-ports`): the Reserved subdomains page
 * reserves a TCP port (a free one with "Reserve a TCP port", a given one as tcp:PORT in the name box),
 * lists it as a TCP port without the HTTP-only controls (offline mode, policy, queue), and releases it
 * after the same confirmation as a subdomain; another account cannot reserve it meanwhile.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { call, createAccount, freePortRange, startEdge, type TestAccount, type TestEdge } from '../helpers.js';
import { launchChromium, type Browser } from '../inspector/browser.js';

describe('TCP ports in the dashboard, in Chromium', () => {
  let edge: TestEdge;
  let alice: TestAccount;
  let bob: TestAccount;
  let browser: Browser;
  let page: Page;
  let first: number;
  const problems: string[] = [];
  let origin: string;

  before(async () => {
    const ports = await freePortRange(4);
    first = Number(ports.split('-')[0]);
    edge = await startEdge({ authFailureLimit: 1_000, tcp: { ports } });
    origin = `http://localhost:${edge.port}`;
    alice = await createAccount(edge, 'PRO');
    bob = await createAccount(edge, 'PRO');
    browser = await launchChromium();
    page = await browser.context.newPage();
    page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
    page.on('console', (message) => {
      if (message.type() === 'error' && !/the server responded with a status of 4[0-9][0-9] /.test(message.text())) problems.push(`console: ${message.text()}`);
    });
  });

  after(async () => {
    await browser?.close();
    await edge?.close();
  });

  const button = (name: string) => page.getByRole('button', { name, exact: true });
  const link = (name: string) => page.getByRole('link', { name, exact: true });
  const rowWith = (text: string) => page.getByRole('row').filter({ hasText: text });
  const reservedOf = async (account: TestAccount) =>
    (await call(edge, 'GET', '/api/v1/reserved-subdomains', { token: account.token })).json.reserved_subdomains as Array<{ subdomain: string; kind: string }>;

  test('a TCP port is reserved in the Reserved subdomains page, listed as such, refused to another account and released', async () => {
    await page.goto(`${origin}/`);
    await page.getByLabel('Access token', { exact: true }).fill(alice.token);
    await button('Sign in').click();
    await link('Reserved subdomains').click();
    await button('Reserve a TCP port').click();
    await page.getByText(/^Reserved tcp:[0-9]+: burrow tcp LOCAL_PORT --remote-port [0-9]+\.$/).waitFor();
    const [free] = await reservedOf(alice);
    assert.equal(free?.kind, 'tcp');
    const freeRow = rowWith(free!.subdomain);
    await freeRow.getByText('TCP port', { exact: true }).waitFor();
    assert.equal(await freeRow.getByLabel('Offline mode', { exact: true }).count(), 0, 'no offline mode for a TCP port');
    assert.equal(await freeRow.getByRole('button', { name: `Policy of ${free!.subdomain}` }).count(), 0);
    assert.equal(await freeRow.getByRole('link', { name: `Queue of ${free!.subdomain}` }).count(), 0);

    const given = `tcp:${free!.subdomain === `tcp:${first}` ? first + 1 : first}`;
    await page.getByLabel('Subdomain', { exact: true }).fill(given);
    await button('Reserve').click();
    await rowWith(given).waitFor();
    const refused = await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: bob.token, body: { subdomain: given } });
    assert.equal(refused.status, 409);
    assert.equal(refused.json.error.code, 'SUBDOMAIN_TAKEN');

    await rowWith(given).getByRole('button', { name: 'Release', exact: true }).click();
    await button('Release subdomain').click();
    await rowWith(given).waitFor({ state: 'detached' });
    assert.deepEqual((await reservedOf(alice)).map((record) => record.subdomain), [free!.subdomain]);
    assert.equal((await call(edge, 'POST', '/api/v1/reserved-subdomains', { token: bob.token, body: { subdomain: given } })).status, 201);
    assert.deepEqual(problems, []);
  });
});
