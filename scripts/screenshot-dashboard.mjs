#!/usr/bin/env node
// docs/dashboard-*.png from the real thing: an edge, a local app, two tunnel clients, a few requests
// through one of them, and the web dashboard in Debian's Chromium, signed in with a real token, one
// screenshot per page (Tunnels, Requests with a detail, Access tokens, Reserved subdomains, Account).
// Run after a build:
//   npm run build && node scripts/screenshot-dashboard.mjs [output-directory]
// BURROW_SCREENSHOT_SCHEME=dark renders the dark theme.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sendSampleTraffic, startSampleApp } from './sample-traffic.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const outputDir = process.argv[2] ?? join(root, 'docs');
const CHROMIUM = process.env.BURROW_CHROMIUM ?? '/usr/bin/chromium';
const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const colorScheme = process.env.BURROW_SCREENSHOT_SCHEME === 'dark' ? 'dark' : 'light';

const load = (path) => import(new URL(`../dist/src/${path}`, import.meta.url).href);
let modules;
try {
  modules = await Promise.all([load('edge/server.js'), load('client/tunnel-client.js'), load('client/routes.js')]);
} catch (error) {
  console.error(`screenshot-dashboard: the build is missing (${error.message}); run "npm run build" first`);
  process.exit(1);
}
const [{ Edge }, { TunnelClient }, { RouteTable }] = modules;
const { chromium } = await import('playwright-core');

const dataDir = mkdtempSync(join(tmpdir(), 'burrow-screenshot-'));
const profile = mkdtempSync(join(tmpdir(), 'burrow-chromium-'));
const cleanup = [];

try {
  const edge = await Edge.start({ dataDir, port: 0, log: () => {} });
  cleanup.push(() => edge.close(2_000));
  const { token } = await edge.store.createAccount('dev@example.com', 'PRO', 'laptop');
  const ci = await edge.store.createToken(edge.store.getAccount(token.accountId), 'ci-runner');

  const { port: localPort, close: closeApp } = await startSampleApp();
  cleanup.push(closeApp);

  const edgeUrl = `http://localhost:${edge.port}`;
  await edge.store.reserve(token.accountId, 'acme-webhooks');
  await edge.store.reserve(token.accountId, 'acme-staging');
  const client = new TunnelClient({ edge: edgeUrl, token: token.token, routes: new RouteTable(localPort), subdomain: 'acme-webhooks' });
  const ready = await client.start();
  cleanup.push(() => client.close());
  const second = new TunnelClient({ edge: edgeUrl, token: ci.token, routes: new RouteTable(8000), subdomain: 'preview-1187' });
  await second.start();
  cleanup.push(() => second.close());

  await sendSampleTraffic(edge.port, ready.subdomain);

  const context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ARGS, viewport: { width: 1280, height: 760 }, deviceScaleFactor: 1, colorScheme });
  cleanup.push(() => context.close());
  const page = await context.newPage();
  await page.goto(`${edgeUrl}/`);
  await page.getByLabel('Access token', { exact: true }).fill(token.token);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('button', { name: 'Sign out', exact: true }).waitFor();

  const suffix = colorScheme === 'dark' ? '-dark' : '';
  const shoot = async (name) => {
    await page.mouse.move(0, 0);
    const path = join(outputDir, `dashboard-${name}${suffix}.png`);
    await page.screenshot({ path });
    console.log(`screenshot-dashboard: wrote ${path} (${Math.round(statSync(path).size / 1024)} KiB)`);
  };
  const open = (name) => page.getByRole('link', { name, exact: true }).click();

  await open('Tunnels');
  await page.getByRole('row').filter({ hasText: 'preview-1187' }).waitFor();
  await shoot('tunnels');

  await open('Requests');
  await page.getByLabel('Tunnel', { exact: true }).selectOption('acme-webhooks');
  const stripeRow = page.getByRole('row').filter({ hasText: '/webhooks/stripe' });
  await stripeRow.waitFor();
  await stripeRow.click();
  await page.getByRole('heading', { name: 'POST /webhooks/stripe' }).waitFor();
  await shoot('requests');

  await open('Access tokens');
  await page.getByLabel('Label', { exact: true }).fill('staging deploy');
  await page.getByRole('button', { name: 'Create token', exact: true }).click();
  await page.getByText("you won't see it again").waitFor();
  await shoot('tokens');

  await open('Reserved subdomains');
  await page.getByRole('row').filter({ hasText: 'acme-staging' }).waitFor();
  await shoot('reserved');

  await open('Account');
  await page.getByText('Usage this period').waitFor();
  await shoot('account');
} finally {
  for (const step of cleanup.reverse()) await step();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(profile, { recursive: true, force: true });
}
