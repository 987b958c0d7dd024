/**
 * The held webhooks a client delivered lately (src/client/delivered-events.ts): an id is known for its
 * time and forgotten after it, the oldest go first past the cap, and an event's id is read from its
 * request's fields in any case.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DeliveredEvents, eventIdOf } from '../../src/client/delivered-events.js';

test('ids are known for their time, and the oldest go first past the cap', () => {
  let now = 0;
  const delivered = new DeliveredEvents(1_000, 3, () => now);
  delivered.add('evt_1');
  now = 500;
  delivered.add('evt_2');
  assert.equal(delivered.has('evt_1'), true);
  assert.equal(delivered.has('evt_3'), false);
  now = 1_200;
  assert.equal(delivered.has('evt_1'), false, 'past its time');
  assert.equal(delivered.has('evt_2'), true);
  delivered.add('evt_3');
  delivered.add('evt_4');
  delivered.add('evt_5');
  assert.deepEqual(['evt_2', 'evt_3', 'evt_4', 'evt_5'].map((id) => delivered.has(id)), [false, true, true, true], 'three at most');
});

test("a request's event id, whatever the field name's case", () => {
  assert.equal(eventIdOf(['Host', 'x', 'Burrow-Event-Id', 'evt_9']), 'evt_9');
  assert.equal(eventIdOf(['burrow-event-id', 'evt_8']), 'evt_8');
  assert.equal(eventIdOf(['Accept-Encoding', 'gzip', 'X-Burrow-Event-Id', 'evt_7']), null);
});
