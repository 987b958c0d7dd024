#!/usr/bin/env node
// The front-proxy test (test/edge/front-proxy.test.ts) runs Debian's nginx in front of a real edge, with the
// example config shipped in deploy/. On Linux with apt-get it is installed when missing, like Chromium
// (scripts/ensure-browser.mjs); anywhere else the test is skipped and says why. Never runs sudo without
// apt-get, never starts a service: the test runs its own nginx as a child process on loopback ports.
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { hasAptGet, installWithApt, packagePlan } from './debian-package.mjs';

export const NGINX = process.env.BURROW_NGINX ?? '/usr/sbin/nginx';

const HOW =
  'install nginx (Debian/Ubuntu: apt-get install nginx; macOS: brew install nginx) and point the tests at it with ' +
  'BURROW_NGINX=/path/to/nginx';

/** Why the front-proxy test cannot run, or null when nginx is there. The test prints this when it skips. */
export function nginxMissing() {
  return existsSync(NGINX) ? null : `no nginx at ${NGINX}; ${HOW}`;
}

/**
 * What to do: 'ready' (nginx is there), 'apt' (Linux with a usable apt-get: install Debian's nginx) or
 * 'skip' (anywhere else, or a BURROW_NGINX that does not exist: the front-proxy test is skipped with the
 * reason).
 */
export const nginxPlan = packagePlan;

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const plan = nginxPlan({ platform: process.platform, exists: existsSync(NGINX), explicit: process.env.BURROW_NGINX !== undefined, aptGet: hasAptGet });
  if (plan === 'skip') console.error(`ensure-nginx: the front-proxy test will be skipped: ${nginxMissing()}`);
  if (plan === 'apt') installWithApt('ensure-nginx', 'nginx', NGINX, `the front-proxy test needs it: ${HOW}`);
}
