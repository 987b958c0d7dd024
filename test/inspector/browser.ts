/**
 * Debian's Chromium (/usr/bin/chromium, installed by scripts/ensure-browser.mjs; never a downloaded
 * browser) driven by playwright-core, with the flags this machine's closed network needs and a fresh
 * profile directory each launch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = process.env.BURROW_CHROMIUM ?? '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface Browser {
  context: BrowserContext;
  close(): Promise<void>;
}

export interface LaunchOptions {
  /** More Chromium flags, e.g. `--host-resolver-rules=MAP *.burrow.test 127.0.0.1`. */
  args?: string[];
  /** Accept the test CA's certificates (the page is still an https origin: Secure and __Host- cookies apply). */
  ignoreHTTPSErrors?: boolean;
}

export async function launchChromium(options: LaunchOptions = {}): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'burrow-chromium-'));
  // A persistent context is how playwright takes --user-data-dir: this one is new and thrown away.
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS, ...(options.args ?? [])],
    viewport: { width: 1400, height: 900 },
    ignoreHTTPSErrors: options.ignoreHTTPSErrors === true,
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Collects the page's uncaught errors and its console errors (CSP violations included) into `problems`.
 * With `allowRefusals`, the console's line for a fetch answered 4xx is not one (a page showing the API's
 * refusals, as the dashboard does, logs one per refusal).
 */
export function watchProblems(page: Page, problems: string[], { allowRefusals = false } = {}): void {
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() !== 'error') return;
    if (allowRefusals && /the server responded with a status of 4[0-9][0-9] /.test(message.text())) return;
    problems.push(`console: ${message.text()}`);
  });
}

/** Chromium on the inspector's page at `url`, once its live feed says the tunnel is online. */
export async function openInspectorPage(url: string): Promise<{ browser: Browser; page: Page; problems: string[] }> {
  const browser = await launchChromium();
  const page = await browser.context.newPage();
  const problems: string[] = [];
  watchProblems(page, problems);
  await page.goto(url);
  await page.waitForSelector('#session.pill-on', { timeout: 10_000 });
  return { browser, page, problems };
}
