/**
 * Issue 23, lower item: one cluster edge with a wrong clock deleted everyone's dashboard sessions from
 * Redis (it judged a session ended by its own clock, and deleted it). Sessions in Redis now end by their
 * PX alone, and their times are Redis's (TIME in the scripts): an edge's clock a month off either way
 * neither ends nor prolongs a session, while idle sliding and the max age still hold on Redis's clock.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { test } from 'node:test';
import { RedisStore } from '../../src/store/redis-store.js';
import { TestRedis, redisSkip } from '../redis-server.js';

const redis = redisSkip === false ? await TestRedis.start() : null;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

test('redis sessions: a wrong edge clock ends nobody; idle and max age run on Redis\'s clock', { skip: redisSkip }, async () => {
  const keyPrefix = `test-${randomBytes(4).toString('hex')}:`;
  const edgeA = await RedisStore.connect(redis!.url, { keyPrefix });
  const edgeB = await RedisStore.connect(redis!.url, { keyPrefix });
  try {
    const { token } = await edgeA.createAccount('clock@example.test', 'FREE', 'first');
    const outcome = await edgeA.verify(token.token);
    assert.ok('principal' in outcome);
    const sessions = edgeA.dashboardSessions({ idleMs: 2 * HOUR, maxAgeMs: 10 * HOUR });
    const skewed = edgeB.dashboardSessions({ idleMs: 2 * HOUR, maxAgeMs: 10 * HOUR });
    // An edge whose clock is a month ahead opens the session: its times are Redis's all the same.
    const id = await skewed.open(outcome.principal, Date.now() + 30 * DAY);
    const key = `${keyPrefix}session:${createHash('sha256').update(id).digest('hex')}`;
    const redisNow = async (): Promise<number> => {
      const [seconds, micros] = await edgeA.redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    };
    const stored = async (): Promise<{ createdAt: number; lastSeenAt: number }> => JSON.parse((await edgeA.redis.get(key))!);
    assert.ok(Math.abs((await stored()).createdAt - (await redisNow())) < 5_000, 'created on Redis\'s clock');

    for (const wrong of [Date.now() + 30 * DAY, Date.now() - 30 * DAY, Date.now() + 365 * DAY]) {
      assert.ok(await skewed.resolve(id, wrong), `resolved by an edge whose clock says ${new Date(wrong).toISOString()}`);
      assert.ok(await sessions.resolve(id), 'and still there for the edges with the right clock');
    }
    assert.ok((await edgeA.redis.pttl(key)) > 2 * HOUR - 60_000, 'its idle time untouched');

    // An hour passes on Redis's clock without use: the record says so, and one hour of idle time is left.
    const anHourAgo = (await redisNow()) - HOUR;
    await edgeA.redis.set(key, JSON.stringify({ ...(await stored()), createdAt: anHourAgo, lastSeenAt: anHourAgo }), 'PX', HOUR);
    const used = await skewed.resolve(id, Date.now() - 30 * DAY);
    assert.ok(used);
    assert.ok((await edgeA.redis.pttl(key)) > 2 * HOUR - 60_000, 'a use slid the idle deadline back to two hours');
    assert.ok(Math.abs((await stored()).lastSeenAt - (await redisNow())) < 5_000, 'the use is dated by Redis');

    // Nearly ten hours after sign-in, on Redis's clock: a use leaves only the rest of the max age.
    const nearlyTenHoursAgo = (await redisNow()) - (10 * HOUR - 5_000);
    await edgeA.redis.set(key, JSON.stringify({ ...(await stored()), createdAt: nearlyTenHoursAgo, lastSeenAt: nearlyTenHoursAgo + HOUR }), 'PX', HOUR);
    const late = await sessions.resolve(id);
    assert.ok(late);
    const left = await edgeA.redis.pttl(key);
    assert.ok(left > 0 && left <= 5_000, `the max age caps the idle time: ${left} ms left`);
    assert.ok(late.expiresAt <= Date.now() + 5_000);

    // Its PX runs out: gone for every edge, whatever their clocks say.
    await edgeA.redis.pexpire(key, 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.equal(await skewed.resolve(id, Date.now() - 30 * DAY), undefined);
    assert.equal(await sessions.resolve(id), undefined);
  } finally {
    await edgeA.close();
    await edgeB.close();
  }
});
