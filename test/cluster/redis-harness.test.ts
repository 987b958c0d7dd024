import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Redis } from 'ioredis';
import { TestRedis, redisSkip } from '../redis-server.js';

test('the test Redis keeps acknowledged writes across kill -9 and a restart on the same port', { skip: redisSkip }, async () => {
  const server = await TestRedis.start();
  const client = new Redis(server.url, { maxRetriesPerRequest: null, lazyConnect: false });
  try {
    await client.set('burrow:test', 'kept');
    await server.kill();
    await server.restart();
    assert.equal(await client.get('burrow:test'), 'kept');
  } finally {
    client.disconnect();
  }
});
