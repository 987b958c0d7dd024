#!/usr/bin/env node
// The browser tests drive a system Chromium (never a downloaded browser). On Linux with apt-get it is
// installed when missing; anywhere else (macOS, other distributions) we say how, and never run sudo.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import { pathToFileURL } from 'node:url';

export const CHROMIUM = process.env.BURROW_CHROMIUM ?? '/usr/bin/chromium';

const HOW =
  'install Chromium (macOS: brew install --cask chromium; Debian/Ubuntu: apt-get install chromium; Fedora: dnf install chromium) ' +
  'and point the tests at it with BURROW_CHROMIUM=/path/to/chromium ' +
  '(macOS: BURROW_CHROMIUM=/Applications/Chromium.app/Contents/MacOS/Chromium)';

function hasAptGet() {
  return spawnSync('sh', ['-c', 'command -v apt-get'], { stdio: 'ignore' }).status === 0;
}

/**
 * What to do: 'ready' (the browser is there), 'apt' (Linux with apt-get: install Debian's chromium) or
 * 'explain' (anywhere else, or a BURROW_CHROMIUM that does not exist: say how, never run sudo).
 */
export function browserPlan({ platform, exists, explicit, aptGet }) {
  if (exists) return 'ready';
  if (explicit || platform !== 'linux' || !aptGet()) return 'explain';
  return 'apt';
}

function installWithApt() {
  console.log(`ensure-browser: ${CHROMIUM} is missing; installing Debian's chromium package`);
  const sudo = process.getuid?.() === 0 ? [] : ['sudo'];
  const apt = (args) => spawnSync(sudo.length > 0 ? 'sudo' : 'apt-get', [...(sudo.length > 0 ? ['apt-get'] : []), ...args], {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  let result = apt(['install', '-y', '--no-install-recommends', 'chromium']);
  if (result.status !== 0) {
    apt(['update']);
    result = apt(['install', '-y', '--no-install-recommends', 'chromium']);
  }
  if (result.status !== 0 || !existsSync(CHROMIUM)) {
    console.error(`ensure-browser: could not install chromium; the browser tests need it: ${HOW}`);
    process.exit(1);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const plan = browserPlan({ platform: process.platform, exists: existsSync(CHROMIUM), explicit: process.env.BURROW_CHROMIUM !== undefined, aptGet: hasAptGet });
  if (plan === 'explain') {
    console.error(`ensure-browser: no Chromium at ${CHROMIUM}; the browser tests need one: ${HOW}`);
    process.exit(1);
  }
  if (plan === 'apt') installWithApt();
}
