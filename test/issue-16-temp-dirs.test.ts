/**
 * Issue 16, point 9: every `npm test` run left temporary directories behind (config homes of CLI runs,
 * data directories of edges a test did not close), and scripts/ensure-browser.mjs would have run
 * `sudo apt-get` on macOS. Now every temp dir the helpers make is removed when the test process exits,
 * whatever the test did, and the browser script installs only on Linux with apt-get.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { test } from 'node:test';
import { ROOT } from './helpers.js';

test('temp dirs of the helpers are gone when the process exits, even those a test never removed', () => {
  const tmp = mkdtempSync(join(tmpdir(), 'burrow-issue16-tmp-'));
  try {
    const helpers = pathToFileURL(join(ROOT, 'dist', 'test', 'helpers.js')).href;
    // A test that forgets everything: a config dir, an edge never closed, a tempDirs dir without after().
    const script = `
      import { tempDir, startEdge } from ${JSON.stringify(helpers)};
      tempDir('burrow-cli-');
      const edge = await startEdge();
      await edge.edge.store.createAccount('x@example.test', 'FREE', 'test');
      process.exit(0);
    `;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, TMPDIR: tmp }, encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(readdirSync(tmp), []);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

test('ensure-browser installs with apt-get only on Linux with apt-get; elsewhere it explains', async () => {
  const { browserPlan } = (await import(pathToFileURL(join(ROOT, 'scripts', 'ensure-browser.mjs')).href)) as {
    browserPlan(options: { platform: string; exists: boolean; explicit: boolean; aptGet: () => boolean }): string;
  };
  const yes = (): boolean => true;
  const no = (): boolean => false;
  assert.equal(browserPlan({ platform: 'darwin', exists: false, explicit: false, aptGet: yes }), 'explain');
  assert.equal(browserPlan({ platform: 'linux', exists: false, explicit: false, aptGet: no }), 'explain');
  assert.equal(browserPlan({ platform: 'linux', exists: false, explicit: true, aptGet: yes }), 'explain');
  assert.equal(browserPlan({ platform: 'linux', exists: false, explicit: false, aptGet: yes }), 'apt');
  assert.equal(browserPlan({ platform: 'darwin', exists: true, explicit: false, aptGet: no }), 'ready');
  const run = spawnSync(process.execPath, [join(ROOT, 'scripts', 'ensure-browser.mjs')], { env: { ...process.env, BURROW_CHROMIUM: '/nonexistent/chromium' }, encoding: 'utf8' });
  assert.equal(run.status, 1);
  assert.match(run.stderr, /no Chromium at \/nonexistent\/chromium; .*brew install --cask chromium.*BURROW_CHROMIUM=/);
});
