/**
 * The cluster's offline queue in Redis (src/store/redis-offline-queue.ts), on a real Redis: the name's
 * and the account's bounds, duplicates (sender id and body together), the delivery lock (one edge at a
 * time; a lapsed lock passes to the next edge), and an ack only by the lock's holder and only once, so
 * the counts that bound the queue come back to zero whoever delivered.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RedisOfflineQueue, type NewHeldEvent } from '../../src/store/redis-offline-queue.js';
import { redisSkip, testRedisClient } from '../redis-server.js';

const { client } = await testRedisClient();
let counter = 0;

function fresh(): RedisOfflineQueue {
  return new RedisOfflineQueue(client, 0, 'test-commands', `queue${++counter}:`);
}

function event(n: number, accountId = 'acc_1', body = `{"n":${n}}`): NewHeldEvent {
  return { id: `evt_${n}`, accountId, generation: 'g1', method: 'POST', path: `/hook?n=${n}`, headers: ['Content-Type', 'application/json'], clientAddress: '203.0.113.7', receivedAt: 1_700_000_000_000 + n, body: Buffer.from(body) };
}

const LIMITS = { events: 3, bytes: 1_000, accountEvents: 4, accountBytes: 1_000 };

test('held events come back in order, whole; the name and the account are bounded', { skip: redisSkip }, async () => {
  const queue = fresh();
  for (let n = 0; n < 3; n++) assert.deepEqual(await queue.hold('hooks', event(n), LIMITS, null), { held: `evt_${n}`, duplicate: false });
  assert.deepEqual(await queue.hold('hooks', event(3), LIMITS, null), { full: 'it holds its limit of 3 events' });
  // Another name of the account: one more fits the account's 4, then the account is full.
  assert.deepEqual(await queue.hold('other', event(10), LIMITS, null), { held: 'evt_10', duplicate: false });
  assert.deepEqual(await queue.hold('other', event(11), LIMITS, null), { full: "the account's queues hold their limit of 4 events" });
  // Bytes too.
  assert.deepEqual(await queue.hold('big', event(20, 'acc_2', 'x'.repeat(1_001)), LIMITS, null), { full: 'it holds 0 of its 1000 bytes' });

  const held = await queue.oldest('hooks', 10);
  assert.deepEqual(held.map((entry) => [entry.id, entry.path, entry.body.toString(), entry.receivedAt]), [0, 1, 2].map((n) => [`evt_${n}`, `/hook?n=${n}`, `{"n":${n}}`, 1_700_000_000_000 + n]));
  assert.deepEqual(held[0]!.headers, ['Content-Type', 'application/json']);
  assert.deepEqual(await queue.use('hooks'), { events: 3, bytes: 21 });
});

test('a duplicate is the same sender id with the same body: the first event id is answered, nothing is stored', { skip: redisSkip }, async () => {
  const queue = fresh();
  assert.deepEqual(await queue.hold('hooks', event(1), LIMITS, 'github:abc digest1'), { held: 'evt_1', duplicate: false });
  assert.deepEqual(await queue.hold('hooks', event(2), LIMITS, 'github:abc digest1'), { held: 'evt_1', duplicate: true });
  assert.deepEqual(await queue.hold('hooks', event(3), LIMITS, 'github:abc digest2'), { held: 'evt_3', duplicate: false });
  assert.deepEqual((await queue.oldest('hooks', 10)).map((entry) => entry.id), ['evt_1', 'evt_3']);
});

test('one edge at a time delivers: only the lock holder acks, once; a lapsed lock passes to the next edge', { skip: redisSkip }, async () => {
  const queue = fresh();
  for (let n = 0; n < 2; n++) await queue.hold('hooks', event(n), LIMITS, null);
  assert.equal(await queue.lock('hooks', 'edge-a', 300), true);
  assert.equal(await queue.lock('hooks', 'edge-b', 300), false, 'held by a');
  assert.equal(await queue.lock('hooks', 'edge-a', 300), true, 'extended by a');
  const [first] = await queue.oldest('hooks', 1);
  assert.equal(await queue.ack('hooks', first!, 'edge-b', null), 'lost', 'b does not hold the lock');
  assert.equal(await queue.ack('hooks', first!, 'edge-a', null), 'ok');
  assert.equal(await queue.ack('hooks', first!, 'edge-a', null), 'gone', 'acked once');
  assert.deepEqual(await queue.use('hooks'), { events: 1, bytes: 7 });

  // a dies: its lock lapses and b goes on from the oldest event left.
  await new Promise((resolve) => setTimeout(resolve, 400));
  assert.equal(await queue.lock('hooks', 'edge-b', 300), true);
  const [second] = await queue.oldest('hooks', 1);
  assert.equal(second!.id, 'evt_1');
  assert.equal(await queue.ack('hooks', second!, 'edge-b', 'the local server answered 404'), 'ok');
  assert.deepEqual(await queue.use('hooks'), { events: 0, bytes: 0 });
  assert.deepEqual(await queue.oldest('hooks', 1), []);
  await queue.unlock('hooks', 'edge-b');
  assert.equal(await queue.lock('hooks', 'edge-a', 300), true, 'free again');
});
