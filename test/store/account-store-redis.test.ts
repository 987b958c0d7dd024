/**
 * The shared AccountStore suite (account-store.suite.ts) on RedisStore against a real redis-server, a
 * fresh key prefix per test; then what only Redis has: it going away and coming back under a running store.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { BurrowError } from '../../src/errors.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { TestRedis, redisSkip } from '../redis-server.js';
import { accountStoreSuite } from './account-store.suite.js';

const redis = redisSkip === false ? await TestRedis.start() : null;
const freshPrefix = (): string => `test-${randomBytes(4).toString('hex')}:`;

accountStoreSuite('redis', {
  async open() {
    const store = await RedisStore.connect(redis!.url, { keyPrefix: freshPrefix() });
    return { store, close: () => store.close() };
  },
  sharedUsageCounters: true,
  sharedLimiterWindows: true,
  // Writes not awaited go out on the same connection before any later read.
  settle: async () => undefined,
  skip: redisSkip,
});

test('redis: only the SHA-256 of a token is stored, under the key prefix', { skip: redisSkip }, async () => {
  const keyPrefix = freshPrefix();
  const store = await RedisStore.connect(redis!.url, { keyPrefix });
  try {
    const { token } = await store.createAccount('keys@example.test', 'FREE', 'first');
    const keys = await store.redis.keys(`${keyPrefix}*`);
    assert.ok(keys.length >= 4, keys.join(' '));
    const stored = JSON.parse((await store.redis.get(`${keyPrefix}token:${token.idSegment}`))!) as { hash: string };
    assert.equal(stored.hash.length, 64);
    for (const key of keys) {
      const type = await store.redis.type(key);
      const dump = type === 'string' ? await store.redis.get(key) : JSON.stringify(await store.redis.hgetall(key).catch(() => store.redis.smembers(key)));
      assert.ok(!String(dump).includes(token.token.slice(17)), `${key} holds the secret`);
    }
  } finally {
    await store.close();
  }
});

test('redis: an unreachable URL fails connect with STORE_UNAVAILABLE, password not shown', { skip: redisSkip }, async () => {
  const { freePort } = await import('../helpers.js');
  const port = await freePort();
  await assert.rejects(RedisStore.connect(`redis://:hunter2@127.0.0.1:${port}/0`), (error: unknown) => {
    assert.ok(error instanceof BurrowError);
    assert.equal(error.code, 'STORE_UNAVAILABLE');
    assert.ok(error.message.includes(`127.0.0.1:${port}`), error.message);
    assert.ok(!error.message.includes('hunter2'), error.message);
    return true;
  });
});

test('redis: killed, calls fail fast with 503 STORE_UNAVAILABLE; restarted, the same store works with its data', { skip: redisSkip }, async () => {
  const store = await RedisStore.connect(redis!.url, { keyPrefix: freshPrefix() });
  try {
    const { account, token } = await store.createAccount('outage@example.test', 'FREE', 'first');
    await store.reserve(account.id, 'kept', Date.now(), 3);
    await redis!.kill();

    const error = await store.verify(token.token).then(
      () => assert.fail('verify answered without Redis'),
      (failure: unknown) => failure,
    );
    assert.ok(error instanceof BurrowError, String(error));
    assert.equal(error.code, 'STORE_UNAVAILABLE');
    assert.equal(error.status, 503);
    assert.deepEqual(error.headers, { 'Retry-After': '1' });
    assert.deepEqual(Object.keys(error.toBody().error), ['code', 'message']);
    assert.match(error.toBody().error.message, new RegExp(`Redis at ${redis!.url.replace(/[.]/g, '\\.')}`));
    await assert.rejects(store.createToken(account, 'during outage'), { code: 'STORE_UNAVAILABLE' });
    await assert.rejects(Promise.resolve(store.rateLimiter('outage', 5, 60_000).hit('k')), { code: 'STORE_UNAVAILABLE' });
    const counter = store.usageCounter();
    counter.count(account.id, 1, 1);
    await assert.rejects(counter.flush(), { code: 'STORE_UNAVAILABLE' });

    await redis!.restart();
    // ioredis reconnects by itself (its retry delay grows to 2 s at most).
    let outcome: Awaited<ReturnType<RedisStore['verify']>> | undefined;
    for (let attempt = 0; attempt < 100 && outcome === undefined; attempt++) {
      outcome = await store.verify(token.token).catch(async () => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        return undefined;
      });
    }
    assert.ok(outcome !== undefined && 'principal' in outcome, 'verified again after the restart');
    assert.equal((await store.getReservation('kept'))?.accountId, account.id);
    await counter.flush();
    assert.deepEqual(await store.usageCounter().current(account.id), { requests: 1, bytesIn: 1, bytesOut: 1 }, 'the failed flush was sent again');
  } finally {
    await store.close();
  }
});

test('redis: a usage flush whose reply was lost is sent again and counted once', { skip: redisSkip }, async () => {
  const keyPrefix = freshPrefix();
  const store = await RedisStore.connect(redis!.url, { keyPrefix, commandTimeoutMs: 300 });
  const operator = await RedisStore.connect(redis!.url, { keyPrefix });
  try {
    const counter = store.usageCounter();
    counter.count('usr_a', 10, 20);
    // Redis holds writes for a second: the flush times out here, and Redis applies it afterwards.
    await operator.redis.call('CLIENT', 'PAUSE', '1000', 'WRITE');
    await assert.rejects(counter.flush(), { code: 'STORE_UNAVAILABLE' });
    const reader = store.usageCounter();
    let applied = { requests: 0, bytesIn: 0, bytesOut: 0 };
    for (let attempt = 0; attempt < 50 && applied.requests === 0; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      // Calls behind the paused one on this connection time out as well until the pause ends.
      applied = await Promise.resolve(reader.current('usr_a')).catch(() => applied);
    }
    assert.deepEqual(applied, { requests: 1, bytesIn: 10, bytesOut: 20 }, 'applied once the pause ended');
    assert.deepEqual(await counter.current('usr_a'), { requests: 1, bytesIn: 10, bytesOut: 20 }, 'not also counted from memory');
    await counter.flush();
    assert.deepEqual(await counter.current('usr_a'), { requests: 1, bytesIn: 10, bytesOut: 20 }, 'the resent batch was not applied twice');
    assert.deepEqual(await reader.current('usr_a'), { requests: 1, bytesIn: 10, bytesOut: 20 });
  } finally {
    await store.close();
    await operator.close();
  }
});
