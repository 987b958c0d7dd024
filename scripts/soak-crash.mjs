#!/usr/bin/env node
// `npm run soak:crash`: build, then run the kill -9 loop of test/edge/crash.test.ts many times over
// (issue 11: >= 50 kills). Arguments: [kills] [ring]; the defaults are 60 kills of an edge whose FREE
// ring holds 50 captures. BURROW_CRASH_KILLS and BURROW_CRASH_RING set the same. Targets 127.0.0.1 only
// and stops by itself; its summary line reports kills, answered requests checked, lost, reused ids, time.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const [kills = process.env.BURROW_CRASH_KILLS ?? '60', ring = process.env.BURROW_CRASH_RING ?? '50'] = process.argv.slice(2);
const run = (command, args, env = {}) => {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  if (result.status !== 0) process.exit(result.status ?? 1);
};

run('npx', ['tsc', '-p', 'tsconfig.json']);
run(process.execPath, ['--test', '--test-reporter=spec', 'dist/test/edge/crash.test.js'], { BURROW_CRASH_KILLS: kills, BURROW_CRASH_RING: ring });
