/**
 * The usage meter keeps the current month's bounds between requests and works them out again only when
 * the clock leaves them: counts land in the month the clock says, at a rollover and if the clock steps back.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Store } from '../../src/store/store.js';
import { CurrentPeriod, UsageMeter } from '../../src/store/usage.js';
import { tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-usage-period-');

test('counts follow the clock across a month boundary, forwards and back', async () => {
  const store = Store.open(freshDir());
  try {
    let now = Date.UTC(2026, 10, 30, 23, 59, 59, 999);
    const meter = new UsageMeter(store.root, () => now);
    meter.count('usr_a', 1, 2);
    meter.count('usr_a', 1, 2);
    assert.deepEqual(meter.current('usr_a'), { requests: 2, bytesIn: 2, bytesOut: 4 }, 'November');
    await meter.flush();
    now = Date.UTC(2026, 11, 1);
    assert.deepEqual(meter.current('usr_a'), { requests: 0, bytesIn: 0, bytesOut: 0 }, 'the first millisecond of December starts afresh');
    meter.count('usr_a', 5, 5);
    assert.deepEqual(meter.current('usr_a'), { requests: 1, bytesIn: 5, bytesOut: 5 }, 'December');
    await meter.flush();
    now = Date.UTC(2026, 10, 15);
    assert.deepEqual(meter.current('usr_a'), { requests: 2, bytesIn: 2, bytesOut: 4 }, 'a clock stepped back reads November again');
    now = Date.UTC(2026, 11, 31, 23, 59, 59, 999);
    assert.deepEqual(meter.current('usr_a'), { requests: 1, bytesIn: 5, bytesOut: 5 }, 'the last millisecond of December is December');
    const reopened = new UsageMeter(store.root, () => now);
    assert.deepEqual(reopened.current('usr_a'), { requests: 1, bytesIn: 5, bytesOut: 5 }, 'flushed per month');
  } finally {
    await store.close();
  }
});

test('CurrentPeriod works the month out again only when the clock leaves it, forwards or back', () => {
  let now = Date.UTC(2026, 1, 28, 12);
  let reads = 0;
  const period = new CurrentPeriod(() => {
    reads++;
    return now;
  });
  const february = Date.UTC(2026, 1, 1);
  assert.equal(period.startNow(), february);
  now = Date.UTC(2026, 1, 28, 23, 59, 59, 999);
  assert.equal(period.startNow(), february, 'the last millisecond of February');
  now = Date.UTC(2026, 2, 1);
  assert.equal(period.startNow(), Date.UTC(2026, 2, 1), 'March');
  now = Date.UTC(2026, 1, 1);
  assert.equal(period.startNow(), february, 'back to the first millisecond of February');
  now = Date.UTC(2026, 0, 31, 23, 59, 59, 999);
  assert.equal(period.startNow(), Date.UTC(2026, 0, 1), 'and a millisecond before it: January');
  assert.equal(reads, 5, 'the clock is read once a call');
});
