/**
 * A RedisStore whose connection ioredis ends (status 'end', no reconnection scheduled: what ioredis 5.x
 * does when its sentinel failover detector cuts a reconnection attempt short) connects again and
 * answers; once the store is closed, its connection stays ended (`reconnectWhenEnded`).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { RedisStore } from '../../src/store/redis-store.js';
import { waitFor } from '../helpers.js';
import { TestRedis, redisSkip } from '../redis-server.js';

test('a RedisStore whose connection ioredis ends answers again; once closed it stays closed', { skip: redisSkip, timeout: 30_000 }, async () => {
  const redis = await TestRedis.start();
  const store = await RedisStore.connect(redis.url);
  try {
    await store.countAccounts();
    const ended = once(store.redis, 'end');
    store.redis.disconnect();
    await ended;
    await waitFor(async () => await store.countAccounts().then(() => true, () => false), 5_000, 'the store to answer again');
  } finally {
    await store.close();
  }
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  assert.equal(store.redis.status, 'end');
});
