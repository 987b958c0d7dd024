/**
 * Issue 25's HTTPS rows in the benchmark's summary: the TLS tunnel against direct over plain HTTP, with
 * the encrypted C floor of the same groups (nginx → nginx, TLS on both hops) named beside it when the run
 * has it, and left out when it does not.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { LoadResult } from '../../bench/e2e/load.js';
import type { HttpsRecord, PathInfo, RunRecord } from '../../bench/e2e/records.js';
import type { ProcStats } from '../../bench/e2e/sampler.js';
import { summarize } from '../../bench/e2e/summary.js';

const paths: PathInfo[] = [
  { id: 'direct', kind: 'direct', label: 'direct', processes: [] },
  { id: 'tls', kind: 'tunnel', label: 'tunnel over HTTPS + wss', processes: ['edge', 'client'], capture: true, inspect: true },
  { id: 'nginx2-tls', kind: 'floor', label: 'nginx → nginx, TLS on both hops', processes: ['nginx-tls-front', 'nginx-tls-back'] },
];

function load(reqPerSec: number): LoadResult {
  const latencyMs = { p50: 1, p90: 2, p99: 3, p999: 4, mean: 1, max: 5 };
  return { reqPerSec, requests: reqPerSec * 4, durationS: 4, bytesPerSec: 0, latencyMs, errors: 0, timeouts: 0, non2xx: 0, mismatches: 0, bodiesChecked: true, resets: 0, statusCodes: { '200': reqPerSec * 4 } };
}

function run(seq: number, method: 'POST' | 'GET', path: string, reqPerSec: number, pairedWith: number | null): RunRecord {
  const procs: Record<string, ProcStats> = path === 'direct' ? { target: { peakRssMiB: null, cpuPct: 50 } } : { target: { peakRssMiB: null, cpuPct: 30 }, a: { peakRssMiB: null, cpuPct: 40 }, b: { peakRssMiB: null, cpuPct: 40 } };
  return {
    seq,
    round: 1,
    scenario: `${method} 1 KiB ${method === 'POST' ? 'up' : 'down'}, length @100`,
    method,
    size: 1024,
    shape: 'length',
    connections: 100,
    path,
    capture: path === 'tls' ? true : null,
    inspect: path === 'tls' ? true : null,
    pairedWith,
    startedAtS: seq,
    load: load(reqPerSec),
    procs,
    runnerCpuPct: 20,
    systemCpuPct: 200,
    otherCpuPct: 0,
    stealCpuPct: 0,
    interruptCpuPct: 10,
    clientLog: null,
    discarded: null,
  };
}

const httpsRow = (https: HttpsRecord, method: 'POST' | 'GET') =>
  summarize([], [], paths, { https }).acceptance25!.find((row) => row.target.startsWith('HTTPS public side') && row.target.includes(method))!;

describe("issue 25's HTTPS rows", () => {
  test('the TLS tunnel is held to 0.4 of direct over plain HTTP, with the nginx TLS floor of the same group beside it', () => {
    const https: HttpsRecord = {
      path: 'tls',
      runs: [run(1, 'POST', 'direct', 10_000, null), run(2, 'POST', 'tls', 2_000, 1), run(3, 'POST', 'nginx2-tls', 3_000, 1), run(4, 'GET', 'direct', 10_000, null), run(5, 'GET', 'tls', 4_500, 4)],
      sshSkipped: 'no sshd here',
      error: null,
    };
    const post = httpsRow(https, 'POST');
    assert.equal(post.pass, false);
    assert.match(post.measured, /^0\.200 \(2,000 vs 10,000 req\/s; CPU \d+ µs\/req\); floor in the same run: nginx → nginx, TLS on both hops 0\.300 \(CPU \d+ µs\/req\)$/);
    assert.equal(post.ssh, 'not measured');
    // A group without the floor (nginx missing, or --no-floors) names none.
    const get = httpsRow(https, 'GET');
    assert.equal(get.pass, true);
    assert.doesNotMatch(get.measured, /floor/);
  });
});
