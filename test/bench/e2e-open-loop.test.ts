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
