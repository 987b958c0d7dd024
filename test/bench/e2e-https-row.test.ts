/**
 * Issue 25's HTTPS rows in the benchmark's summary: the TLS tunnel against direct over plain HTTP, with
 * the encrypted floors of the same groups (nginx → nginx and two bare Node relays, TLS on both hops)
 * named beside it when the run has them, and left out when it does not.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { HttpsRecord, PathInfo, RunRecord } from '../../bench/e2e/records.js';
import { summarize } from '../../bench/e2e/summary.js';
import { procsAt, runRecord } from './run-records.js';

const paths: PathInfo[] = [
  { id: 'direct', kind: 'direct', label: 'direct', processes: [] },
  { id: 'tls', kind: 'tunnel', label: 'tunnel over HTTPS + wss', processes: ['edge', 'client'], capture: true, inspect: true },
  { id: 'nginx2-tls', kind: 'floor', label: 'nginx → nginx, TLS on both hops', processes: ['nginx-tls-front', 'nginx-tls-back'] },
  { id: 'relays2-tls', kind: 'floor', label: 'two bare Node relays, TLS on both hops', processes: ['relay-tls-front', 'relay-tls-back'] },
];

function run(seq: number, method: 'POST' | 'GET', path: string, reqPerSec: number, pairedWith: number | null): RunRecord {
  const procs = path === 'direct' ? procsAt(50, ['target']) : { ...procsAt(30, ['target']), ...procsAt(40, paths.find((p) => p.id === path)!.processes) };
  return runRecord({ seq, scenario: { method, size: 1024, shape: 'length' }, path, reqPerSec, pairedWith, procs, tunnel: path === 'tls' });
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
    // Each process on a path used 40% of a core: 800 ms of CPU a second over 2,000 and 3,000 req/s.
    assert.equal(post.measured, '0.200 (2,000 vs 10,000 req/s; CPU 400 µs/req); floor in the same run: nginx → nginx, TLS on both hops 0.300 (CPU 267 µs/req)');
    assert.equal(post.ssh, 'not measured');
    // A group without the floor (nginx missing, or --no-floors) names none.
    const get = httpsRow(https, 'GET');
    assert.equal(get.pass, true);
    assert.doesNotMatch(get.measured, /floor/);
  });

  test('with the Node TLS relays in the group too, both floors are named', () => {
    const https: HttpsRecord = {
      path: 'tls',
      runs: [run(1, 'POST', 'direct', 10_000, null), run(2, 'POST', 'tls', 2_000, 1), run(3, 'POST', 'nginx2-tls', 3_000, 1), run(4, 'POST', 'relays2-tls', 2_500, 1)],
      sshSkipped: 'no sshd here',
      error: null,
    };
    assert.equal(
      httpsRow(https, 'POST').measured,
      '0.200 (2,000 vs 10,000 req/s; CPU 400 µs/req); floors in the same run: nginx → nginx, TLS on both hops 0.300 (CPU 267 µs/req), two bare Node relays, TLS on both hops 0.250 (CPU 320 µs/req)',
    );
  });
});
