/**
 * FixedWindowLimiter with an injected clock: counting, the decision's numbers, window resets, keys
 * counted apart, peek without counting, and the sweep.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FixedWindowLimiter } from '../../src/store/rate-limit.js';

function limiter(limit = 3, windowMs = 10_000): { limiter: FixedWindowLimiter; advance: (ms: number) => void } {
  let now = 1_000_000;
  return { limiter: new FixedWindowLimiter(limit, windowMs, () => now), advance: (ms) => (now += ms) };
}

test('allows `limit` hits per window, then refuses', () => {
  const { limiter: l } = limiter(3);
  assert.deepEqual(l.hit('a'), { allowed: true, limit: 3, remaining: 2, resetSeconds: 10 });
  assert.deepEqual(l.hit('a'), { allowed: true, limit: 3, remaining: 1, resetSeconds: 10 });
  assert.deepEqual(l.hit('a'), { allowed: true, limit: 3, remaining: 0, resetSeconds: 10 });
  assert.deepEqual(l.hit('a'), { allowed: false, limit: 3, remaining: 0, resetSeconds: 10 });
  assert.equal(l.hit('a').allowed, false);
});

test('resetSeconds counts down in whole seconds, rounded up, never below 1', () => {
  const { limiter: l, advance } = limiter(3, 10_000);
  l.hit('a');
  advance(1);
  assert.equal(l.hit('a').resetSeconds, 10);
  advance(999);
  assert.equal(l.peek('a').resetSeconds, 9);
  advance(8_999);
  assert.equal(l.peek('a').resetSeconds, 1);
  const { limiter: short } = limiter(1, 200);
  assert.equal(short.hit('a').resetSeconds, 1);
});

test('the window resets after windowMs', () => {
  const { limiter: l, advance } = limiter(2, 10_000);
  l.hit('a');
  l.hit('a');
  assert.equal(l.hit('a').allowed, false);
  advance(9_999);
  assert.equal(l.hit('a').allowed, false);
  advance(1);
  assert.deepEqual(l.hit('a'), { allowed: true, limit: 2, remaining: 1, resetSeconds: 10 });
});

test('keys are counted apart', () => {
  const { limiter: l } = limiter(1);
  assert.equal(l.hit('a').allowed, true);
  assert.equal(l.hit('a').allowed, false);
  assert.equal(l.hit('b').allowed, true);
});

test('peek does not count', () => {
  const { limiter: l } = limiter(2);
  assert.deepEqual(l.peek('a'), { allowed: true, limit: 2, remaining: 2, resetSeconds: 10 });
  l.hit('a');
  assert.equal(l.peek('a').remaining, 1);
  assert.equal(l.peek('a').remaining, 1);
  l.hit('a');
  assert.deepEqual(l.peek('a'), { allowed: true, limit: 2, remaining: 0, resetSeconds: 10 });
  l.hit('a');
  assert.equal(l.peek('a').allowed, false);
});

test('sweep drops finished windows only', () => {
  const { limiter: l, advance } = limiter(5, 10_000);
  l.hit('old');
  advance(6_000);
  l.hit('new');
  assert.equal(l.size, 2);
  advance(4_000);
  l.sweep();
  assert.equal(l.size, 1);
  assert.equal(l.peek('new').remaining, 4);
  assert.equal(l.peek('old').remaining, 5);
});
