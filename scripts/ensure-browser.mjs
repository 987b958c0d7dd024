#!/usr/bin/env node
// The browser tests drive Debian's Chromium (never a downloaded browser). Install it when missing.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

export const CHROMIUM = process.env.BURROW_CHROMIUM ?? '/usr/bin/chromium';

if (!existsSync(CHROMIUM)) {
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
    console.error('ensure-browser: could not install chromium; the browser tests need it (apt-get install chromium)');
    process.exit(1);
  }
}
