/**
 * One inspector for several tunnels (`burrow start`, issue 27): each exchange carries its tunnel's
 * name, `/api/requests?tunnel=NAME` lists one tunnel's, `/api/status` lists every tunnel, curl's public
 * URL and HAR's URLs are each exchange's own tunnel's, history is loaded per tunnel, and the page marks
 * each row with its tunnel, copies curl for that tunnel's URL, and finds a tunnel's rows by its name.
 * Real edge, clients and Chromium.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request } from 'undici';
import type { TunnelClient } from '../../src/client/tunnel-client.js';
import { Inspector } from '../../src/inspector/server.js';
import { call, createAccount, startClient, startEdge, startLocal, waitFor, type LocalServer, type TestAccount, type TestEdge } from '../helpers.js';
import { launchChromium } from './browser.js';

// These run inside the page (tsconfig has no DOM library).
declare const document: any;

let edge: TestEdge;
let account: TestAccount;
const locals: LocalServer[] = [];
const tunnels: { name: string; client: TunnelClient; host: string; publicUrl: string }[] = [];
let inspector: Inspector;

before(async () => {
  edge = await startEdge();
  account = await createAccount(edge, 'PRO');
  inspector = await Inspector.start({ port: 0, edge: edge.url, token: account.token });
  for (const name of ['shop', 'blog']) {
    const local = await startLocal((req, res) => res.end(`${name}:${req.url}`));
    locals.push(local);
    const started = await startClient(edge, account.token, local.port, { recordLimit: 1024 * 1024, subdomain: `${name}-several-27` });
    inspector.attach(started.client, name);
    tunnels.push({ name, client: started.client, host: started.host, publicUrl: started.publicUrl });
  }
});
after(async () => {
  inspector.close();
  for (const { client } of tunnels) await client.close();
  for (const local of locals) await local.close();
  await edge.close();
});

async function json(path: string): Promise<any> {
  return (await request(`${inspector.url}${path}`)).body.json();
}

test('exchanges carry their tunnel; ?tunnel=NAME lists one tunnel; status lists every tunnel', async () => {
  for (const { name, host } of tunnels) assert.equal((await call(edge, 'GET', `/from/${name}`, { host })).text, `${name}:/from/${name}`);
  await waitFor(() => inspector.ring.size === 2, 5_000, 'two exchanges');
  const all = await json('/api/requests?summary=1');
  assert.deepEqual(all.requests.map((item: { tunnel: string; path: string }) => `${item.tunnel} ${item.path}`), ['blog /from/blog', 'shop /from/shop']);
  const shop = await json('/api/requests?tunnel=shop');
  assert.deepEqual(shop.requests.map((item: { path: string; tunnel: string }) => [item.path, item.tunnel]), [['/from/shop', 'shop']]);
  assert.deepEqual((await json('/api/requests?tunnel=none')).requests, []);
  const status = await json('/api/status');
  assert.equal(status.connected, true);
  assert.equal(status.requests, 2, 'the counters add up every tunnel');
  assert.deepEqual(
    status.tunnels.map((tunnel: { name: string; public_url: string; default_port: number; requests: number }) => [tunnel.name, tunnel.public_url, tunnel.default_port, tunnel.requests]),
    tunnels.map(({ name, publicUrl }, index) => [name, publicUrl, locals[index]!.port, 1]),
  );
});

test("curl's public URL and HAR's URLs are each exchange's own tunnel's", async () => {
  const listed = await json('/api/requests?summary=1');
  for (const item of listed.requests as { id: string; tunnel: string }[]) {
    const curl = await json(`/api/requests/${item.id}/curl?target=public`);
    assert.equal(curl.url, `${tunnels.find((tunnel) => tunnel.name === item.tunnel)!.publicUrl}/from/${item.tunnel}`);
  }
  const har = await json('/api/har');
  assert.deepEqual(har.log.entries.map((entry: { request: { url: string } }) => entry.request.url).sort(), tunnels.map(({ name, publicUrl }) => `${publicUrl}/from/${name}`).sort());
});

test('a new inspector loads each tunnel\'s history from the edge, marked with the tunnel', async () => {
  const fresh = await Inspector.start({ port: 0, edge: edge.url, token: account.token });
  try {
    for (const { name, client } of tunnels) fresh.attach(client, name);
    await waitFor(() => fresh.ring.size === 2, 10_000, 'history of both tunnels');
    const listed = (await (await request(`${fresh.url}/api/requests?summary=1`)).body.json()) as { requests: { tunnel: string; path: string; source: string }[] };
    assert.deepEqual(listed.requests.map((item) => `${item.source} ${item.tunnel} ${item.path}`).sort(), ['edge blog /from/blog', 'edge shop /from/shop']);
  } finally {
    fresh.close();
  }
});

test('the page marks each row with its tunnel and lists every tunnel; typing a name keeps its rows', async () => {
  const browser = await launchChromium();
  try {
    const page = await browser.context.newPage();
    await page.goto(inspector.url);
    await page.waitForFunction(() => document.querySelectorAll('#rows tr').length === 2, undefined, { timeout: 10_000 });
    const marks = await page.locator('#rows tr td.path .tunnel-mark').allTextContents();
    assert.deepEqual(marks, ['blog', 'shop']);
    const forwarding = (await page.textContent('#forwarding'))!;
    for (const { name, publicUrl } of tunnels) assert.ok(forwarding.includes(`${name}: ${publicUrl} → localhost:`), forwarding);
    // The page's "Copy as curl" (src/web/curl.js) sends each request to its own tunnel's public URL.
    for (const { name, publicUrl } of tunnels) {
      await page.click(`#rows tr:has(.tunnel-mark:text-is("${name}"))`);
      await page.waitForFunction((path: string) => document.querySelector('#d-heading')?.textContent?.includes(path), `/from/${name}`, { timeout: 5_000 });
      await page.click('#curl-public');
      await page.waitForFunction((url: string) => (document.querySelector('#curl-text')?.textContent ?? '').includes(url), `${publicUrl}/from/${name}`, { timeout: 5_000 });
    }
    await page.fill('#filter', 'blog');
    await page.waitForFunction(() => document.querySelectorAll('#rows tr:not([hidden])').length === 1, undefined, { timeout: 5_000 });
    assert.deepEqual(await page.locator('#rows tr:not([hidden]) .tunnel-mark').allTextContents(), ['blog']);
  } finally {
    await browser.close();
  }
});

test('an unnamed client (burrow http) replaces the unnamed one and shows no tunnel name', async () => {
  const single = await Inspector.start({ port: 0 });
  const first = await startClient(edge, account.token, locals[0]!.port, { recordLimit: 1024 });
  const second = await startClient(edge, account.token, locals[1]!.port, { recordLimit: 1024 });
  try {
    single.attach(first.client);
    single.attach(second.client);
    const status = (await (await request(`${single.url}/api/status`)).body.json()) as { tunnels: { name: string | null; public_url: string }[]; public_url: string };
    assert.deepEqual(status.tunnels.map((tunnel) => [tunnel.name, tunnel.public_url]), [[null, second.publicUrl]]);
    assert.equal(status.public_url, second.publicUrl);
    await call(edge, 'GET', '/alone', { host: second.host });
    await waitFor(() => single.ring.size === 1, 5_000, 'the exchange');
    const listed = (await (await request(`${single.url}/api/requests`)).body.json()) as { requests: { tunnel: string | null }[] };
    assert.equal(listed.requests[0]!.tunnel, null);
  } finally {
    single.close();
    await first.client.close();
    await second.client.close();
  }
});
