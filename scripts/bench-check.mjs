#!/usr/bin/env node
// `npm run bench:check`: build, run every tinybench micro-benchmark (dist/bench/**/*.bench.js), and check
// each task with a budget in bench/budgets.json stays under it. Prints one table; exits non-zero when a
// task is over its budget, a budgeted task did not run, or a benchmark failed. Not part of `npm test`.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = (command, args, env = {}) =>
  spawnSync(command, args, { cwd: root, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, ...env } }).status ?? 1;

if (spawnSync('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: root, stdio: 'inherit' }).status !== 0) process.exit(1);

const { budgets } = JSON.parse(readFileSync(join(root, 'bench', 'budgets.json'), 'utf8'));
const scratch = mkdtempSync(join(tmpdir(), 'burrow-bench-check-'));
const resultsFile = join(scratch, 'results.jsonl');
const benchDir = join(root, 'dist', 'bench');
const files = readdirSync(benchDir, { recursive: true }).map(String).filter((file) => file.endsWith('.bench.js')).sort();
const time = process.argv.includes('--quick') ? '300' : '700';

const failures = [];
for (const file of files) {
  process.stdout.write(`running ${relative(root, join(benchDir, file))}\n`);
  if (run(process.execPath, [join(benchDir, file), '--time', time], { BURROW_BENCH_RESULTS: resultsFile }) !== 0) {
    failures.push(`${file} failed`);
  }
}

const measured = new Map();
for (const line of readFileSync(resultsFile, 'utf8').split('\n')) {
  if (line.trim() === '') continue;
  const { task, nsPerOp } = JSON.parse(line);
  measured.set(task, nsPerOp);
}
rmSync(scratch, { recursive: true, force: true });

const rows = [];
for (const [task, nsPerOp] of measured) {
  const budget = budgets[task];
  const verdict = budget === undefined ? '-' : nsPerOp !== null && nsPerOp <= budget ? 'ok' : 'OVER';
  if (verdict === 'OVER') failures.push(`${task}: ${nsPerOp === null ? 'did not complete' : Math.round(nsPerOp)} ns/op over its budget of ${budget}`);
  rows.push({ task, 'ns/op': nsPerOp === null ? 'failed' : Math.round(nsPerOp), budget: budget ?? '', result: verdict });
}
for (const task of Object.keys(budgets)) {
  if (!measured.has(task)) failures.push(`${task}: has a budget but no benchmark measured it`);
}
console.table(rows);
if (failures.length > 0) {
  console.error(`bench:check: ${failures.length} problem(s):\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
console.log(`bench:check: ${rows.filter((row) => row.result === 'ok').length} tasks within budget`);
