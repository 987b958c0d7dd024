/**
 * Issue 25's 64 KiB and 1 MiB rows in the benchmark's summary: the tunnel's ratio to direct with its CPU
 * per request, and beside it the floor of the same group (nginx → nginx) when the run has it, so a row
 * that fails says where two C proxies stood in the same run.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PathInfo, RunRecord } from '../../bench/e2e/records.js';
import { summarize } from '../../bench/e2e/summary.js';
import { procsAt, runRecord } from './run-records.js';

const KIB = 1024;
const paths: PathInfo[] = [
  { id: 'direct', kind: 'direct', label: 'direct', processes: [] },
  { id: 'cap-insp', kind: 'tunnel', label: 'tunnel, capture on, inspector on', processes: ['edge', 'client'], capture: true, inspect: true },
  { id: 'nginx2', kind: 'floor', label: 'nginx → nginx (two hops)', processes: ['nginx-front', 'nginx-back'] },
  { id: 'ssh', kind: 'floor', label: 'ssh -R', processes: ['sshd', 'ssh'] },
];

/** A run whose path processes each used `cpuPct` of a core: CPU µs/req = 2 × cpuPct × 10^4 ÷ req/s. */
function run(seq: number, method: 'POST' | 'GET', shape: 'length' | 'chunked', path: string, reqPerSec: number, pairedWith: number | null, cpuPct = 50): RunRecord {
  const procs = path === 'direct' ? procsAt(50, ['target']) : { ...procsAt(30, ['target']), ...procsAt(cpuPct, paths.find((p) => p.id === path)!.processes) };
  return runRecord({ seq, scenario: { method, size: 64 * KIB, shape }, path, reqPerSec, pairedWith, procs, tunnel: path === 'cap-insp' });
}

const row = (runs: RunRecord[], method: 'POST' | 'GET', shape: 'length' | 'chunked') =>
  summarize(runs, [], paths).acceptance25!.find((r) => r.target.startsWith(`${method} 64 KiB`) && r.target.includes(shape))!;

test("a 64 KiB row gives the tunnel's CPU per request and the nginx floor of its group; without the floor it names none", () => {
  const runs = [
    run(1, 'POST', 'length', 'direct', 10_000, null),
    run(2, 'POST', 'length', 'cap-insp', 2_000, 1, 50),
    run(3, 'POST', 'length', 'nginx2', 4_000, 1, 40),
    run(4, 'POST', 'length', 'ssh', 3_000, 1, 45),
    run(5, 'GET', 'chunked', 'direct', 10_000, null),
    run(6, 'GET', 'chunked', 'cap-insp', 5_000, 5, 50),
  ];
  const post = row(runs, 'POST', 'length');
  assert.equal(post.target, 'POST 64 KiB up, length @100: ≥ 0.45 of direct');
  assert.equal(post.pass, false);
  // The tunnel: 2 × 50% of a core at 2,000 req/s = 500 µs a request; nginx: 2 × 40% at 4,000 = 200.
  assert.equal(post.measured, '0.200 (CPU 500 µs/req); floor in the same run: nginx → nginx 0.400 (CPU 200 µs/req)');
  assert.equal(post.ssh, '0.300 (CPU 300 µs/req)');
  const get = row(runs, 'GET', 'chunked');
  assert.equal(get.pass, true);
  assert.equal(get.measured, '0.500 (CPU 200 µs/req)');
  assert.equal(get.ssh, 'not measured');
});
