#!/usr/bin/env node
// The load-client conformance test (test/conformance/load-clients.test.ts) runs ApacheBench (`ab`, Debian's
// apache2-utils) against a real tunnel: HTTP/1.0, keep-alive or not. On Linux with apt-get it is installed
// when missing, like nginx and Chromium; anywhere else the test is skipped and says why.
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { hasAptGet, installWithApt, packagePlan } from './debian-package.mjs';

export const AB = process.env.BURROW_AB ?? '/usr/bin/ab';

const HOW = 'install ApacheBench (Debian/Ubuntu: apt-get install apache2-utils; macOS: it comes with the system) or point the test at it with BURROW_AB=/path/to/ab';

/** Why the ab test cannot run, or null when ab is there. */
export function abMissing() {
  return existsSync(AB) ? null : `no ab at ${AB}; ${HOW}`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const plan = packagePlan({ platform: process.platform, exists: existsSync(AB), explicit: process.env.BURROW_AB !== undefined, aptGet: hasAptGet });
  if (plan === 'skip') console.error(`ensure-ab: the ab conformance test will be skipped: ${abMissing()}`);
  if (plan === 'apt') installWithApt('ensure-ab', 'apache2-utils', AB, `the ab conformance test needs it: ${HOW}`);
}
