/**
 * Issue 27 in the dashboard (real Chromium, real edge with `--tcp-ports`, real `burrow tcp`): the Reserved
 * subdomains page reserves a TCP port (a free one with "Reserve a TCP port", a given one as tcp:PORT in
 * the name box), lists it as a TCP port without the HTTP-only controls (offline mode, policy, queue), and
 * releases it after the same confirmation as a subdomain; another account cannot reserve it meanwhile.
 * The Requests page shows a TCP tunnel's connections as connections (src/web's shared list and detail):
 * method TCP, the client's address:port, how it ended, and in the detail its duration and bytes each way,
 * without the HTTP request's panes, replay or curl.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { after, before, describe, test } from 'node:test';
import type { Page } from 'playwright-core';
import { call, createAccount, freePortRange, spawnCli, startEdge, tempDir, waitFor, type TestAccount, type TestEdge } from '../helpers.js';
import { launchChromium, watchProblems, type Browser } from '../inspector/browser.js';

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
    watchProblems(page, problems, { allowRefusals: true });
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

  test("a TCP tunnel's connections in the Requests page: TCP, the client, how it ended, bytes each way, no HTTP panes", async () => {
    const echo: Server = createServer((socket) => socket.on('data', (chunk) => socket.write(chunk)).on('end', () => socket.end()));
    echo.listen(0, '127.0.0.1');
    await once(echo, 'listening');
    const env = { XDG_CONFIG_HOME: tempDir('burrow-dash-tcp-'), BURROW_EDGE: edge.url, BURROW_TOKEN: alice.token, NO_COLOR: '' };
    const forwarding = /Forwarding tcp:\/\/localhost:([0-9]+) -> /;
    const open = await spawnCli(['tcp', String((echo.address() as AddressInfo).port)], env, forwarding);
    const denied = await spawnCli(['tcp', String((echo.address() as AddressInfo).port), '--deny-cidr', '127.0.0.0/8'], env, forwarding);
    try {
      const port = Number(open.match[1]);
      const clientPort = await new Promise<number>((resolve, reject) => {
        let seen = 0;
        const socket = connect({ port, host: '127.0.0.1' }, () => {
          seen = socket.localPort!;
          socket.end('hello tcp');
        });
        socket.resume();
        socket.on('close', () => resolve(seen));
        socket.on('error', reject);
      });
      const deniedPort = Number(denied.match[1]);
      await new Promise<void>((resolve) => connect({ port: deniedPort, host: '127.0.0.1' }).on('close', () => resolve()).on('error', () => undefined));
      const records = async (name: string) => (await call(edge, 'GET', `/api/v1/requests?subdomain=${name}`, { token: alice.token })).json?.requests ?? [];
      await waitFor(async () => (await records(`tcp:${port}`)).length === 1 && (await records(`tcp:${deniedPort}`)).length === 1, 10_000, 'both records');
      assert.equal((await records(`tcp:${port}`))[0].error, null, 'the list says how it ended');
      assert.equal((await records(`tcp:${deniedPort}`))[0].error, 'ADDRESS_FORBIDDEN');

      await link('Requests').click();
      await page.getByLabel('Tunnel', { exact: true }).selectOption(`tcp:${port}`);
      const client = `127.0.0.1:${clientPort}`;
      const row = rowWith(client);
      await row.waitFor();
      assert.equal(await row.locator('td.method').innerText(), 'TCP');
      assert.equal(await row.locator('td.status').innerText(), 'closed');
      await row.getByText('connection', { exact: true }).waitFor();
      await row.click();
      await page.getByRole('heading', { name: `TCP ${client}`, exact: true }).waitFor();
      const facts = page.locator('#d-facts');
      assert.equal(await facts.locator('#d-bytes-in').innerText(), '9 B');
      assert.equal(await facts.locator('#d-bytes-out').innerText(), '9 B');
      assert.equal(await facts.locator('#d-ended').innerText(), 'closed by both sides');
      assert.equal(await facts.locator('#d-client').innerText(), client);
      assert.match(await facts.locator('#d-latency').innerText(), /^[0-9.]+ (ms|s)$/);
      for (const name of ['Replay', 'Replay with edits', 'Copy as curl']) assert.equal(await button(name).isVisible(), false, `no ${name}`);
      assert.equal(await page.getByRole('article', { name: 'Request' }).isVisible(), false, 'no request pane');

      await page.getByLabel('Tunnel', { exact: true }).selectOption(`tcp:${deniedPort}`);
      const refused = page.getByRole('row').filter({ hasText: 'connection' });
      await refused.locator('td.status').getByText('refused', { exact: true }).waitFor();
      await refused.click();
      await page.locator('#d-ended').getByText(/^ADDRESS_FORBIDDEN: refused at once/).waitFor();
      assert.deepEqual(problems, []);
    } finally {
      open.child.kill('SIGKILL');
      denied.child.kill('SIGKILL');
      echo.close();
    }
  });
});
