/**
 * The benchmark's open-loop sender (bench/e2e/open-loop.ts) charges each request from its scheduled time
 * (the correction for coordinated omission), so a request the sender could not send on time still pays
 * its wait; and a run that did not hold its offered rate says so. The arithmetic is checked as pure
 * functions; the behaviour against a real local server with the sender's own event loop blocked for a
 * while (lower bounds only: a busier machine only makes the lag larger).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { achieved, chargedLatenciesUs, percentiles, runOpenLoop, scheduleOffsetNs } from '../../bench/e2e/open-loop.js';
import { postBody } from '../../bench/e2e/payloads.js';
import type { OpenLoopRecord, PathInfo } from '../../bench/e2e/records.js';
import { summarize } from '../../bench/e2e/summary.js';

describe('open-loop arithmetic', () => {
  test('requests are scheduled at fixed intervals from the start', () => {
    assert.deepEqual([0, 1, 2, 3].map((i) => scheduleOffsetNs(i, 4000)), [0, 250_000, 500_000, 750_000]);
  });

  test('latency is charged from the schedule, not from when a late request was sent', () => {
    // Scheduled every 1 ms; the second and third could only leave at 5 ms (the sender stalled) and took
    // 100 µs each once sent: they are charged 4.1 and 3.1 ms, not 100 µs. One never completed.
    const scheduled = [0, 1_000_000, 2_000_000, 3_000_000];
    const completed = [200_000, 5_100_000, 5_100_000, Number.NaN];
    assert.deepEqual([...chargedLatenciesUs(scheduled, completed)], [200, 4100, 3100]);
  });

  test('percentiles are nearest-rank over the charged latencies', () => {
    const values = Float64Array.from({ length: 100 }, (_, i) => i + 1);
    const p = percentiles(values);
    assert.equal(p.p50, 50);
    assert.equal(p.p99, 99);
    assert.equal(p.max, 100);
    assert.equal(p.mean, 50.5);
  });

  test('a run that completed under 97 % of the offered rate is invalid', () => {
    // 1,000 req/s offered over 1 s; the last answer came at 1.5 s.
    const late = achieved(1000, 0, 1e9, 1.5e9, 1000);
    assert.equal(late.valid, false);
    assert.match(late.reason ?? '', /achieved 667 req\/s/);
    const held = achieved(990, 0, 1e9, 0.99e9, 1000);
    assert.equal(held.valid, true);
    assert.equal(held.reason, null);
  });
});

describe("issue 25's open-loop row in the summary", () => {
  const paths: PathInfo[] = [
    { id: 'direct', kind: 'direct', label: 'direct', processes: [] },
    { id: 'cap-insp', kind: 'tunnel', label: 'tunnel', processes: ['edge', 'client'], capture: true, inspect: true },
  ];
  const latency = (p99: number) => ({ p50: 100, p90: 200, p99, p999: p99, max: p99, mean: 100 });
  const run = (round: number, path: string, p99: number, valid = true): OpenLoopRecord['runs'][number] => ({
    round,
    path,
    result: { offeredRate: 1000, achievedRate: valid ? 1000 : 500, scheduled: 1000, completed: 1000, errors: 0, timeouts: 0, non2xx: 0, mismatches: 0, latencyUs: latency(p99), serviceUs: latency(p99), dispatchLagUs: latency(10), peakInFlight: 4, valid, invalidReason: valid ? null : 'slow' },
    procs: {},
    runnerCpuPct: 10,
    otherCpuPct: 0,
    stealCpuPct: 0,
  });
  const record = (runs: OpenLoopRecord['runs']): OpenLoopRecord => ({ scenario: { method: 'POST', size: 1024, shape: 'length' }, rate: 1000, tunnelMaxReqPerSec: 2000, maxFrom: 'test', connections: 8, durationS: 1, warmupS: 0, runs, sshSkipped: null, error: null });
  const openRow = (openloop: OpenLoopRecord | null) => summarize([], [], paths, { openloop }).acceptance25!.find((row) => row.target.startsWith('open loop'))!;

  test('added p99 is the tunnel p99 minus direct p99 of the same round, median over rounds', () => {
    const summary = summarize([], [], paths, { openloop: record([run(1, 'direct', 1000), run(1, 'cap-insp', 2500), run(2, 'direct', 5000), run(2, 'cap-insp', 6000), run(3, 'direct', 1000), run(3, 'cap-insp', 4000)]) });
    assert.equal(summary.openloop!.paths.find((p) => p.path === 'cap-insp')!.addedP99Us, 1500);
    assert.equal(openRow(record([run(1, 'direct', 1000), run(1, 'cap-insp', 2500)])).pass, true);
    assert.equal(openRow(record([run(1, 'direct', 1000), run(1, 'cap-insp', 3500)])).pass, false);
  });

  test('a tunnel that did not hold the rate fails when over the limit; direct not held decides nothing', () => {
    assert.equal(openRow(record([run(1, 'direct', 1000), run(1, 'cap-insp', 90_000, false)])).pass, false);
    assert.equal(openRow(record([run(1, 'direct', 1000, false), run(1, 'cap-insp', 90_000)])).pass, null);
  });

  test('the row names nginx → nginx at the same rate as the floor, when the run has it', () => {
    const withFloor = [...paths, { id: 'nginx2', kind: 'floor', label: 'nginx → nginx (two hops)', processes: ['nginx-front', 'nginx-back'] } as PathInfo];
    const runs = [run(1, 'direct', 1000), run(1, 'cap-insp', 4000), run(1, 'nginx2', 2200)];
    const row = summarize([], [], withFloor, { openloop: record(runs) }).acceptance25!.find((r) => r.target.startsWith('open loop'))!;
    assert.match(row.measured, /^\+p99 3,000 µs at 1,000 req\/s \(p99 4,000 µs; achieved 1,000\); floor in the same run: nginx → nginx \+p99 1,200 µs \(achieved 1,000\)$/);
    assert.equal(row.pass, false);
    assert.doesNotMatch(openRow(record(runs.slice(0, 2))).measured, /floor/);
  });

  test('a results file without the phase says not measured', () => {
    const row = openRow(null);
    assert.equal(row.pass, null);
    assert.equal(row.measured, 'not measured');
  });
});

describe('the open-loop sender against a local server', () => {
  let server: Server;
  let origin: string;
  before(async () => {
    server = createServer((req, res) => {
      let length = 0;
      req.on('data', (chunk: Buffer) => (length += chunk.length));
      req.on('end', () => {
        const body = postBody(length);
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
        res.end(body);
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.closeAllConnections();
    server.close();
  });

  test('a request held back by a stalled sender is charged its wait, and the lag is reported', async () => {
    // The sender's own loop is blocked from 50 ms to 250 ms: requests scheduled in between leave late.
    setTimeout(() => {
      const until = Date.now() + 200;
      while (Date.now() < until);
    }, 50);
    const result = await runOpenLoop({ origin, host: null }, { rate: 200, durationS: 0.6, warmupS: 0, connections: 8, scenario: { method: 'POST', size: 1024, shape: 'length' } });
    assert.equal(result.errors + result.timeouts + result.non2xx + result.mismatches, 0);
    assert.equal(result.scheduled, 120);
    assert.equal(result.completed, 120);
    // The request scheduled at about 55 ms could not leave before 250 ms.
    assert.ok(result.dispatchLagUs.max >= 150_000, `dispatch lag max ${result.dispatchLagUs.max} µs`);
    assert.ok(result.latencyUs.max >= result.dispatchLagUs.max, 'latency from the schedule includes the lag');
    assert.ok(result.latencyUs.max > result.serviceUs.max, 'the charged latency is more than the time since sending');
  });
});
