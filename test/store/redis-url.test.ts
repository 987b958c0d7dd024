/**
 * The --cluster URL (src/store/redis-url.ts): one Redis or a master through Sentinel, read into what
 * ioredis takes, with the replicas a lease write waits for; a bad URL says what is wrong, and no
 * password reaches a message.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RedisUrlError, redacted, redisTarget } from '../../src/store/redis-url.js';

test('redis:// is handed to ioredis as it is; its writes wait for no replica unless asked', () => {
  const plain = redisTarget('redis://:secret@10.0.0.2:6379/2');
  assert.equal(plain.url, 'redis://:secret@10.0.0.2:6379/2');
  assert.equal(plain.sentinel, false);
  assert.equal(plain.replicas, 0);
  assert.equal(plain.display, 'redis://:***@10.0.0.2:6379/2');
  const waiting = redisTarget('redis://10.0.0.2:6379?replicas=2&family=6');
  assert.equal(waiting.replicas, 2);
  assert.equal(waiting.url, 'redis://10.0.0.2:6379?family=6', "ioredis's own options stay");
});

test('redis-sentinel:// lists the sentinels, the master name, the database and the passwords; writes wait for one replica', () => {
  const target = redisTarget('redis-sentinel://:pw@10.0.0.2:26379,10.0.0.3,[::1]:26380/mymaster/3?sentinel-password=sp');
  assert.equal(target.url, null);
  assert.equal(target.sentinel, true);
  assert.equal(target.replicas, 1);
  assert.deepEqual(target.options, {
    sentinels: [
      { host: '10.0.0.2', port: 26379 },
      { host: '10.0.0.3', port: 26379 },
      { host: '::1', port: 26380 },
    ],
    name: 'mymaster',
    password: 'pw',
    db: 3,
    sentinelPassword: 'sp',
  });
  assert.equal(target.display, 'redis-sentinel://10.0.0.2:26379,10.0.0.3:26379,[::1]:26380/mymaster/3');
  assert.equal(redisTarget('redis-sentinel://s1:1,s2:2/m?replicas=0').replicas, 0);
});

test('bad URLs are refused with what is wrong and the shape to use', () => {
  const cases: [string, RegExp][] = [
    ['http://10.0.0.2:6379', /not a Redis URL; use redis:\/\/HOST:PORT.*redis-sentinel:\/\//],
    ['redis-sentinel://10.0.0.2:26379', /not a Sentinel URL; use redis-sentinel:\/\/.*\/MASTER/],
    ['redis-sentinel://10.0.0.2:99999/m', /"10.0.0.2:99999" is not a sentinel's HOST:PORT/],
    ['redis-sentinel://s1:1/m/x', /database .* must be a number/],
    ['redis-sentinel://s1:1/m?replicas=many', /replicas must be a number/],
    ['redis-sentinel://s1:1/m?timeout=1', /unknown option "timeout"/],
    ['redis://10.0.0.2:6379?replicas=-1', /replicas must be a number/],
  ];
  for (const [url, reason] of cases) {
    assert.throws(() => redisTarget(url), (error: unknown) => error instanceof RedisUrlError && reason.test(error.message), url);
  }
  assert.throws(() => redisTarget('redis-sentinel://:hunter2@s1:1'), (error: unknown) => !(error as Error).message.includes('hunter2'));
  assert.equal(redacted('redis-sentinel://user:pw@s1:1/m?sentinel-password=sp'), 'redis-sentinel://user:***@s1:1/m?sentinel-password=***');
});
