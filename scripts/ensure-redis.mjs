#!/usr/bin/env node
// Cluster-mode tests (test/cluster/, test/store/ on Redis) run Debian's redis-server as their own child
// process on a loopback port with a temp directory. On Linux with apt-get it is installed when missing,
// like nginx (scripts/ensure-nginx.mjs); anywhere else those tests are skipped and say why.
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { hasAptGet, installWithApt, packagePlan } from './debian-package.mjs';

export const REDIS_SERVER = process.env.BURROW_REDIS_SERVER ?? '/usr/bin/redis-server';

const HOW =
  'install Redis (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis) and point the tests at it with ' +
  'BURROW_REDIS_SERVER=/path/to/redis-server';

/** Why the Redis tests cannot run, or null when redis-server is there. The tests print this when they skip. */
export function redisMissing() {
  return existsSync(REDIS_SERVER) ? null : `no redis-server at ${REDIS_SERVER}; ${HOW}`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const plan = packagePlan({ platform: process.platform, exists: existsSync(REDIS_SERVER), explicit: process.env.BURROW_REDIS_SERVER !== undefined, aptGet: hasAptGet });
  if (plan === 'skip') console.error(`ensure-redis: the cluster tests will be skipped: ${redisMissing()}`);
  if (plan === 'apt') installWithApt('ensure-redis', 'redis-server', REDIS_SERVER, `the cluster tests need it: ${HOW}`);
}
