#!/usr/bin/env node
// docs/inspector.png from the real thing: an edge, a local app, the tunnel client with its inspector,
// a few requests through the tunnel (one 500), the page in Debian's Chromium. Run after a build:
//   npm run build && node scripts/screenshot.mjs [output.png]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sendSampleTraffic, startSampleApp } from './sample-traffic.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const output = process.argv[2] ?? join(root, 'docs', 'inspector.png');
const CHROMIUM = process.env.BURROW_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

const load = (path) => import(new URL(`../dist/src/${path}`, import.meta.url).href);
let modules;
try {
  modules = await Promise.all([load('edge/server.js'), load('client/tunnel-client.js'), load('client/routes.js'), load('inspector/server.js')]);
} catch (error) {
  console.error(`screenshot: the build is missing (${error.message}); run "npm run build" first`);
  process.exit(1);
}
const [{ Edge }, { TunnelClient }, { RouteTable }, { Inspector }] = modules;
const { chromium } = await import('playwright-core');

const dataDir = mkdtempSync(join(tmpdir(), 'burrow-screenshot-'));
const profile = mkdtempSync(join(tmpdir(), 'burrow-chromium-'));
const cleanup = [];

try {
  const edge = await Edge.start({ dataDir, port: 0, log: () => {} });
  cleanup.push(() => edge.close(2_000));
  const { token } = await edge.store.createAccount('dev@example.com', 'FREE', 'screenshot');

  const { port: localPort, close: closeApp } = await startSampleApp();
  cleanup.push(closeApp);

  const client = new TunnelClient({ edge: `http://localhost:${edge.port}`, token: token.token, routes: new RouteTable(localPort), subdomain: 'acme-webhooks', recordLimit: 1024 * 1024 });
  const ready = await client.start();
  cleanup.push(() => client.close());
  const inspector = await Inspector.start({ port: 0, edge: `http://localhost:${edge.port}`, token: token.token });
  inspector.attach(client);
  cleanup.push(() => inspector.close());

  await sendSampleTraffic(edge.port, ready.subdomain);

  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1400, height: 820 }, deviceScaleFactor: 1 });
  cleanup.push(() => context.close());
  const page = await context.newPage();
  await page.goto(inspector.url);
  await page.waitForSelector('#session.pill-on');
  await page.waitForFunction(() => document.querySelectorAll('#rows tr').length === 5);
  await page.locator('#rows tr', { has: page.locator('td.path', { hasText: '/webhooks/stripe' }) }).click();
  await page.waitForFunction(() => document.querySelector('#d-path')?.textContent === '/webhooks/stripe');
  await page.waitForTimeout(900); // let the new-row flash fade
  await page.screenshot({ path: output });
  console.log(`screenshot: wrote ${output}`);
} finally {
  for (const step of cleanup.reverse()) await step();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(profile, { recursive: true, force: true });
}
