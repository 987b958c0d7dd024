#!/usr/bin/env node
// `npm run bench:micro`: build, then run every tinybench micro-benchmark (dist/bench/**/*.bench.js) one
// after another, each printing its table. Arguments are passed on to each (e.g. `-- --time 500`).
// Exits non-zero when a benchmark fails; there are no timing thresholds.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = (command, args) => spawnSync(command, args, { cwd: root, stdio: 'inherit' }).status ?? 1;

if (run('npx', ['tsc', '-p', 'tsconfig.json']) !== 0) process.exit(1);

const benchDir = join(root, 'dist', 'bench');
const files = readdirSync(benchDir, { recursive: true })
  .map(String)
  .filter((file) => file.endsWith('.bench.js'))
  .sort()
  .map((file) => join(benchDir, file));
if (files.length === 0) {
  console.error('bench:micro: no *.bench.js under dist/bench');
  process.exit(1);
}

const failed = [];
for (const file of files) {
  console.log(`\n== ${relative(root, file)}`);
  if (run(process.execPath, [file, ...process.argv.slice(2)]) !== 0) failed.push(relative(root, file));
}
if (failed.length > 0) {
  console.error(`\nbench:micro: failed: ${failed.join(', ')}`);
  process.exit(1);
}
