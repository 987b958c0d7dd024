/**
 * The shared contract of `AccountStore` (src/store/account-store.ts), run against the LMDB Store
 * (account-store-lmdb.test.ts) and the RedisStore (account-store-redis.test.ts): every method and rule,
 * including the caps under concurrency, which in cluster mode are the writes racing across edges.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BurrowError, type ErrorCode } from '../../src/errors.js';
import type { AccountStore, Principal } from '../../src/store/account-store.js';
import type { StoredPolicy } from '../../src/protocol/policy.js';

export interface StoreUnderTest {
  store: AccountStore;
  close(): Promise<void>;
}

export interface SuiteOptions {
  /** A fresh, empty store per test. */
  open(): Promise<StoreUnderTest>;
  /**
   * Whether two usage counters of one store (two edges) sum. Redis: yes, that is cluster mode. LMDB: a
   * counter's in-memory totals are authoritative, since one edge owns a data directory (data-lock.ts).
   */
  sharedUsageCounters: boolean;
  /** Whether two limiter instances of one name share each key's window (Redis: one window per cluster). */
  sharedLimiterWindows: boolean;
  /** Waits for writes the store makes without being awaited (a session's new idle deadline). */
  settle(store: AccountStore): Promise<void>;
  skip?: string | false;
}

const HOUR = 3_600_000;

async function rejectsWith(promise: Promise<unknown>, code: ErrorCode): Promise<BurrowError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof BurrowError, `a BurrowError, got ${String(error)}`);
    assert.equal(error.code, code);
    return error;
  }
  assert.fail(`expected ${code}`);
}

export function accountStoreSuite(name: string, options: SuiteOptions): void {
  const run = (title: string, body: (store: AccountStore) => Promise<void>): void => {
    test(`${name}: ${title}`, { skip: options.skip ?? false }, async () => {
      const { store, close } = await options.open();
      try {
        await body(store);
      } finally {
        await close();
      }
    });
  };

  async function principalOf(store: AccountStore, token: string): Promise<Principal> {
    const outcome = await store.verify(token);
    assert.ok('principal' in outcome, `verified: ${JSON.stringify(outcome)}`);
    return outcome.principal;
  }

  run('accounts: create, find by e-mail (trimmed, lower-cased), list by e-mail, count; duplicate e-mail is 400', async (store) => {
    const b = await store.createAccount('B@Example.test ', 'FREE', 'first', 1_000);
    const a = await store.createAccount('a@example.test', 'PRO', 'first', 2_000);
    assert.equal(b.account.email, 'b@example.test');
    assert.match(b.account.id, /^usr_[0-9a-f]{16}$/);
    assert.deepEqual(await store.getAccount(b.account.id), b.account);
    assert.equal(await store.getAccount('usr_0000000000000000'), undefined);
    assert.deepEqual(await store.findAccountByEmail(' b@EXAMPLE.test'), b.account);
    assert.equal(await store.findAccountByEmail('nobody@example.test'), undefined);
    assert.deepEqual(await store.listAccounts(), [a.account, b.account]);
    assert.equal(await store.countAccounts(), 2);
    await rejectsWith(store.createAccount('b@example.TEST', 'FREE', 'again'), 'INVALID_REQUEST');
    assert.equal(await store.countAccounts(), 2);
    assert.equal(b.token.label, 'first');
    assert.equal(await store.countActiveTokens(b.account.id), 1);
  });

  run('setPlan moves an account and its limits; an unknown account is undefined', async (store) => {
    const { account } = await store.createAccount('plan@example.test', 'FREE', 'first');
    const moved = await store.setPlan(account.id, 'PRO');
    assert.deepEqual(moved, { ...account, plan: 'PRO' });
    assert.deepEqual(await store.getAccount(account.id), moved);
    assert.equal(await store.setPlan('usr_0000000000000000', 'PRO'), undefined);
    assert.ok(store.planLimits('PRO').activeTokens > store.planLimits('FREE').activeTokens);
  });

  run('tokens: the plan cap holds, list is oldest first, revoke frees a slot', async (store) => {
    const { account, token: first } = await store.createAccount('cap@example.test', 'FREE', 'first', 1_000);
    const cap = store.planLimits('FREE').activeTokens;
    const created = [first];
    for (let i = 1; i < cap; i++) created.push(await store.createToken(account, `t${i}`, 1_000 + i));
    await rejectsWith(store.createToken(account, 'one too many'), 'TOKEN_LIMIT_REACHED');
    const listed = await store.listTokens(account.id);
    assert.deepEqual(listed.map((t) => t.id), created.map((t) => t.id));
    assert.ok(listed.every((t) => !('token' in t) && t.prefix === `svc_pat_${t.idSegment}` && t.lastUsedAt === null));
    assert.equal(await store.revokeToken(account.id, created[2]!.idSegment, 5_000), true);
    assert.equal(await store.revokeToken(account.id, created[2]!.idSegment, 5_000), false, 'revoked already');
    assert.equal(await store.revokeToken('usr_0000000000000000', created[3]!.idSegment), false, 'not its token');
    assert.equal(await store.revokeToken(account.id, 'ffffffff'), false, 'no such token');
    assert.equal(await store.countActiveTokens(account.id), cap - 1);
    assert.ok(!(await store.listTokens(account.id)).some((t) => t.id === created[2]!.id));
    await store.createToken(account, 'after revoke');
    await rejectsWith(store.createToken(account, 'again too many'), 'TOKEN_LIMIT_REACHED');
  });

  run('tokens: 10 concurrent creates never pass the cap', async (store) => {
    const { account } = await store.createAccount('race@example.test', 'FREE', 'first');
    const cap = store.planLimits('FREE').activeTokens;
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => store.createToken(account, `race ${i}`)));
    const created = outcomes.filter((o) => o.status === 'fulfilled').length;
    assert.equal(created, cap - 1);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') assert.equal((outcome.reason as BurrowError).code, 'TOKEN_LIMIT_REACHED');
    }
    assert.equal(await store.countActiveTokens(account.id), cap);
  });

  run('verify: principal, malformed, unknown, wrong secret, revoked; activePrincipal ends with revoke', async (store) => {
    const { account, token } = await store.createAccount('verify@example.test', 'FREE', 'first');
    const principal = await principalOf(store, token.token);
    assert.deepEqual(principal.account, account);
    assert.equal(principal.token.id, token.id);
    assert.deepEqual(await store.verify('svc_pat_nope'), { failure: 'malformed' });
    const unknownSegment = token.idSegment === '00000000' ? '11111111' : '00000000';
    assert.deepEqual(await store.verify(`svc_pat_${unknownSegment}_${'0'.repeat(36)}`), { failure: 'unknown' });
    const wrongSecret = `svc_pat_${token.idSegment}_${'0'.repeat(36)}`;
    assert.deepEqual(await store.verify(wrongSecret), { failure: 'wrong-secret', idSegment: token.idSegment });
    assert.equal((await store.activePrincipal(token.idSegment))?.token.id, token.id);
    assert.equal(await store.activePrincipal('ffffffff'), undefined);
    assert.ok(await store.revokeToken(account.id, token.idSegment));
    assert.deepEqual(await store.verify(token.token), { failure: 'revoked', idSegment: token.idSegment });
    assert.equal(await store.activePrincipal(token.idSegment), undefined);
  });

  run('touchToken sets lastUsedAt, seen by verify, activePrincipal and listTokens', async (store) => {
    const { account, token } = await store.createAccount('touch@example.test', 'FREE', 'first');
    assert.equal((await principalOf(store, token.token)).token.lastUsedAt, null);
    await store.touchToken(token.idSegment, 123_456);
    assert.equal((await principalOf(store, token.token)).token.lastUsedAt, 123_456);
    assert.equal((await store.activePrincipal(token.idSegment))?.token.lastUsedAt, 123_456);
    assert.equal((await store.listTokens(account.id))[0]!.lastUsedAt, 123_456);
  });

  run('reservations: reserve, same name again, offline modes, another account\'s name, cap, release', async (store) => {
    const { account: a } = await store.createAccount('res-a@example.test', 'FREE', 'first');
    const { account: b } = await store.createAccount('res-b@example.test', 'FREE', 'first');
    const hooks = await store.reserve(a.id, 'hooks', 1_000, 2);
    assert.deepEqual(hooks, { subdomain: 'hooks', accountId: a.id, createdAt: 1_000, generation: hooks.generation });
    assert.match(hooks.generation!, /^[0-9a-f]{16}$/, 'each reservation of a name has its own generation (issue 23)');
    assert.deepEqual(await store.reserve(a.id, 'hooks', 2_000, 2), hooks, 'the same name again returns it');
    assert.deepEqual(await store.reserve(a.id, 'hooks', 2_000, 2, 'queue'), { ...hooks, offline: 'queue' });
    assert.deepEqual(await store.getReservation('hooks'), { ...hooks, offline: 'queue' });
    await rejectsWith(store.reserve(b.id, 'hooks', 3_000, 2), 'SUBDOMAIN_TAKEN');
    assert.deepEqual(await store.setOfflineMode(a.id, 'hooks', 'reject'), { ...hooks, offline: 'reject' });
    assert.equal(await store.setOfflineMode(b.id, 'hooks', 'off'), undefined, 'not its reservation');
    assert.equal(await store.setOfflineMode(a.id, 'nothing', 'off'), undefined);
    await store.reserve(a.id, 'alpha', 4_000, 2, 'queue');
    await rejectsWith(store.reserve(a.id, 'third', 5_000, 2), 'RESERVATION_LIMIT_REACHED');
    assert.deepEqual((await store.listReservations(a.id)).map((r) => r.subdomain), ['alpha', 'hooks']);
    assert.deepEqual(await store.listReservations(b.id), []);
    assert.equal(await store.releaseReservation(b.id, 'hooks'), false, 'not its reservation');
    assert.equal(await store.releaseReservation(a.id, 'hooks'), true);
    assert.equal(await store.releaseReservation(a.id, 'hooks'), false);
    assert.equal(await store.getReservation('hooks'), undefined);
    assert.equal((await store.reserve(b.id, 'hooks', 6_000, 2)).accountId, b.id, 'released names are free again');
    await store.reserve(a.id, 'third', 7_000, 2);
  });

  run('a reservation keeps its policy (empty lists too) through offline-mode changes, and loses it on release', async (store) => {
    const { account: a } = await store.createAccount('policy-a@example.test', 'FREE', 'first');
    const { account: b } = await store.createAccount('policy-b@example.test', 'FREE', 'first');
    await store.reserve(a.id, 'guarded', 1_000, 3);
    const policy: StoredPolicy = {
      basicAuth: [{ user: 'ann', hash: 'scrypt$16384$8$1$c2FsdA==$aGFzaA==' }],
      allowCidr: ['203.0.113.0/24', '2001:db8::/32'],
      webhooks: [{ id: 'wh_0123abcd', provider: 'github', secret: 'sk1.00000000.AAAA' }],
      oidc: { issuer: 'https://id.example', clientId: 'c', clientSecret: 'sk1.00000000.BBBB', allowEmail: [], allowDomain: ['example.test'] },
      requestHeaderAdd: [['X-From', 'edge']],
      rateLimit: { requests: 10, periodSeconds: 60 },
    };
    assert.deepEqual((await store.setPolicy(a.id, 'guarded', policy))?.policy, policy);
    assert.equal(await store.setPolicy(b.id, 'guarded', {}), undefined, 'not its reservation');
    assert.equal(await store.setPolicy(a.id, 'nothing', policy), undefined);
    assert.deepEqual((await store.getReservation('guarded'))?.policy, policy);
    await store.setOfflineMode(a.id, 'guarded', 'reject');
    const afterMode = await store.getReservation('guarded');
    assert.deepEqual(afterMode?.policy, policy, 'an offline-mode change keeps the policy byte for byte');
    assert.deepEqual(afterMode?.policy?.oidc?.allowEmail, [], 'an empty list stays a list');
    assert.deepEqual((await store.reserve(a.id, 'guarded', 2_000, 3, 'off'))?.policy, policy, 'reserving again keeps it');
    assert.deepEqual((await store.listReservations(a.id))[0]?.policy, policy);
    const cleared = await store.setPolicy(a.id, 'guarded', undefined);
    assert.equal(cleared !== undefined && 'policy' in cleared, false, 'removed');
    await store.setPolicy(a.id, 'guarded', policy);
    await store.releaseReservation(a.id, 'guarded');
    assert.equal((await store.reserve(b.id, 'guarded', 3_000, 3)).policy, undefined, 'a released name comes without the old policy');
  });

  run('a policy written only while the stored one is still the expected one (what a key rotation relies on)', async (store) => {
    const { account: a } = await store.createAccount('cas-a@example.test', 'FREE', 'first');
    await store.reserve(a.id, 'sealed', 1_000, 3);
    const first: StoredPolicy = { webhooks: [{ id: 'wh_00000001', provider: 'github', secret: 'sk1.00000000.AAAA' }], allowCidr: [] };
    const second: StoredPolicy = { webhooks: [{ id: 'wh_00000001', provider: 'github', secret: 'sk1.11111111.BBBB' }], allowCidr: [] };
    const changedMeanwhile: StoredPolicy = { webhooks: [{ id: 'wh_00000002', provider: 'stripe', secret: 'sk1.00000000.CCCC' }] };
    await store.setPolicy(a.id, 'sealed', first);
    // Read back (as the rotation reads it), then compared: the same policy, byte for byte.
    const read = (await store.getReservation('sealed'))!.policy!;
    assert.deepEqual((await store.setPolicy(a.id, 'sealed', second, read))?.policy, second);
    assert.equal(await store.setPolicy(a.id, 'sealed', first, read), undefined, 'no longer the expected one');
    await store.setPolicy(a.id, 'sealed', changedMeanwhile);
    assert.equal(await store.setPolicy(a.id, 'sealed', second, second), undefined);
    assert.deepEqual((await store.getReservation('sealed'))?.policy, changedMeanwhile, 'the change made meanwhile stays');
  });

  run('reservations: concurrent reserves never pass the cap, and one name goes to one account', async (store) => {
    const { account: a } = await store.createAccount('rc-a@example.test', 'FREE', 'first');
    const { account: b } = await store.createAccount('rc-b@example.test', 'FREE', 'first');
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => store.reserve(a.id, `name-${i}`, 1_000, 3)));
    assert.equal(outcomes.filter((o) => o.status === 'fulfilled').length, 3);
    assert.equal((await store.listReservations(a.id)).length, 3);
    const contest = await Promise.allSettled([store.reserve(a.id, 'contested', 1_000, 10), store.reserve(b.id, 'contested', 1_000, 10)]);
    assert.equal(contest.filter((o) => o.status === 'fulfilled').length, 1);
    const loser = contest.find((o) => o.status === 'rejected') as PromiseRejectedResult;
    assert.equal((loser.reason as BurrowError).code, 'SUBDOMAIN_TAKEN');
  });

  // Expiry by time is each store's own (the edge's clock on LMDB, Redis's in cluster mode): sessions.test.ts
  // and account-store-redis.test.ts. What follows holds on any clock.
  run('sessions: open, resolve, revoked token, close', async (store) => {
    const sessions = store.dashboardSessions({ idleMs: 2 * HOUR, maxAgeMs: 10 * HOUR });
    const { account, token } = await store.createAccount('sessions@example.test', 'FREE', 'first');
    const principal = await principalOf(store, token.token);
    const now = Date.now();
    const id = await sessions.open(principal, now);
    assert.match(id, /^[A-Za-z0-9_-]{43}$/);
    const resolved = await sessions.resolve(id, now + 1_000);
    assert.equal(resolved?.principal.token.id, token.id);
    assert.equal(resolved?.record.tokenIdSegment, token.idSegment);
    assert.equal(resolved?.record.accountId, account.id);
    assert.ok(Math.abs(resolved!.record.createdAt - now) < 60_000, 'created now, on a clock close to this one');
    assert.ok(resolved!.expiresAt > now + 1_000 && resolved!.expiresAt <= now + 1_000 + 2 * HOUR, `ends within its idle time: ${resolved!.expiresAt - now}`);
    assert.equal(await sessions.resolve(`${id.slice(0, -1)}${id.endsWith('A') ? 'B' : 'A'}`, now), undefined);
    assert.equal(await sessions.resolve('short', now), undefined);

    const closed = await sessions.open(principal, now);
    assert.equal(await sessions.close(closed), true);
    assert.equal(await sessions.close(closed), false);
    assert.equal(await sessions.resolve(closed, now), undefined);

    const revoked = await sessions.open(principal, now);
    assert.ok(await store.revokeToken(account.id, token.idSegment));
    assert.equal(await sessions.resolve(revoked, now + 1), undefined, 'ends with its token');
    sessions.sweep(now);
  });

  run('sessions: a token keeps at most perToken sessions, a new one ends the oldest; other tokens keep theirs', async (store) => {
    const sessions = store.dashboardSessions({ perToken: 3 });
    assert.equal(sessions.perToken, 3);
    assert.equal(store.dashboardSessions().perToken, 20, 'the default cap');
    const { account, token } = await store.createAccount('cap@example.test', 'FREE', 'first');
    const other = await store.createToken(account, 'second');
    const principal = await principalOf(store, token.token);
    const otherPrincipal = await principalOf(store, other.token);
    const now = Date.now();
    const others = [await sessions.open(otherPrincipal, now), await sessions.open(otherPrincipal, now + 1)];
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      ids.push(await sessions.open(principal, now + 10 + i));
      await options.settle(store);
    }
    const alive = [];
    for (const id of ids) alive.push((await sessions.resolve(id, now + 100)) !== undefined);
    assert.deepEqual(alive, [false, false, false, false, true, true, true], 'the newest three');
    for (const id of others) assert.ok(await sessions.resolve(id, now + 100), "the other token's sessions stay");
    // Closing one leaves room: the next sign-in ends nobody.
    assert.ok(await sessions.close(ids[4]!));
    const next = await sessions.open(principal, now + 50);
    for (const id of [ids[5]!, ids[6]!, next]) assert.ok(await sessions.resolve(id, now + 100));
  });

  run('usage: count, flush, current for this period', async (store) => {
    const counter = store.usageCounter();
    assert.deepEqual(await counter.current('usr_a'), { requests: 0, bytesIn: 0, bytesOut: 0 });
    counter.count('usr_a', 10, 20);
    counter.count('usr_a', 1, 2);
    counter.count('usr_b', 5, 5);
    assert.deepEqual(await counter.current('usr_a'), { requests: 2, bytesIn: 11, bytesOut: 22 }, 'not flushed yet');
    await counter.flush();
    assert.deepEqual(await counter.current('usr_a'), { requests: 2, bytesIn: 11, bytesOut: 22 }, 'flushed once');
    counter.count('usr_a', 1, 1);
    await counter.flush();
    await counter.flush();
    assert.deepEqual(await counter.current('usr_a'), { requests: 3, bytesIn: 12, bytesOut: 23 });
    assert.deepEqual(await counter.current('usr_b'), { requests: 1, bytesIn: 5, bytesOut: 5 });
    assert.deepEqual(await store.usageCounter().current('usr_a'), { requests: 3, bytesIn: 12, bytesOut: 23 }, 'a new counter reads the flushed totals');
  });

  run('usage: current is exact while a flush is on its way', async (store) => {
    const counter = store.usageCounter();
    for (let round = 1; round <= 10; round++) {
      counter.count('usr_a', 10, 20);
      let settled = false;
      const flushing = counter.flush().then(() => (settled = true));
      do {
        assert.deepEqual(await counter.current('usr_a'), { requests: round, bytesIn: round * 10, bytesOut: round * 20 });
        // LMDB answers in the same turn: let its commit callback run.
        await new Promise((resolve) => setImmediate(resolve));
      } while (!settled);
      await flushing;
    }
  });

  run('usage: counts land in the month the clock is in, across a boundary and back', async (store) => {
    let now = Date.UTC(2026, 10, 30, 23, 59, 59, 999);
    const counter = store.usageCounter(() => now);
    counter.count('usr_m', 1, 2);
    counter.count('usr_m', 1, 2);
    await counter.flush();
    now = Date.UTC(2026, 11, 1);
    assert.deepEqual(await counter.current('usr_m'), { requests: 0, bytesIn: 0, bytesOut: 0 }, 'December starts afresh');
    counter.count('usr_m', 5, 5);
    assert.deepEqual(await counter.current('usr_m'), { requests: 1, bytesIn: 5, bytesOut: 5 }, 'December, not flushed');
    await counter.flush();
    now = Date.UTC(2026, 10, 15);
    assert.deepEqual(await counter.current('usr_m'), { requests: 2, bytesIn: 2, bytesOut: 4 }, 'a clock stepped back reads November');
    now = Date.UTC(2026, 11, 31, 23, 59, 59, 999);
    assert.deepEqual(await counter.current('usr_m'), { requests: 1, bytesIn: 5, bytesOut: 5 }, 'the last millisecond of December');
    assert.deepEqual(await store.usageCounter(() => now).current('usr_m'), { requests: 1, bytesIn: 5, bytesOut: 5 }, 'another counter reads the same month');
  });

  if (options.sharedUsageCounters) {
    run('usage: two counters (two edges) on one store sum', async (store) => {
      const edgeA = store.usageCounter();
      const edgeB = store.usageCounter();
      edgeA.count('usr_a', 1, 1);
      edgeB.count('usr_a', 2, 2);
      edgeB.count('usr_a', 2, 2);
      await Promise.all([edgeA.flush(), edgeB.flush()]);
      edgeA.count('usr_a', 10, 10);
      assert.deepEqual(await edgeA.current('usr_a'), { requests: 4, bytesIn: 15, bytesOut: 15 });
      assert.deepEqual(await edgeB.current('usr_a'), { requests: 3, bytesIn: 5, bytesOut: 5 }, "edge A's unflushed count is A's alone");
      await edgeA.flush();
      assert.deepEqual(await edgeB.current('usr_a'), { requests: 4, bytesIn: 15, bytesOut: 15 });
    });
  }

  run('limiters: limit, remaining, reset; another key has its own window', async (store) => {
    const limiter = store.rateLimiter('suite', 3, 60_000);
    assert.equal(limiter.limit, 3);
    assert.equal(limiter.windowMs, 60_000);
    const decisions = [];
    for (let i = 0; i < 4; i++) decisions.push(await limiter.hit('tok_a'));
    assert.deepEqual(decisions.map((d) => [d.allowed, d.remaining, d.limit]), [[true, 2, 3], [true, 1, 3], [true, 0, 3], [false, 0, 3]]);
    for (const decision of decisions) assert.ok(decision.resetSeconds >= 1 && decision.resetSeconds <= 60, `reset ${decision.resetSeconds}`);
    assert.deepEqual(await limiter.hit('tok_b'), { allowed: true, limit: 3, remaining: 2, resetSeconds: 60 });
    limiter.sweep();
  });

  run('limiters: a window ends and the next hit starts a new one', async (store) => {
    let now = 1_000_000;
    const limiter = store.rateLimiter('short', 1, 200, () => now);
    assert.equal((await limiter.hit('k')).allowed, true);
    assert.equal((await limiter.hit('k')).allowed, false);
    now += 250;
    await new Promise((resolve) => setTimeout(resolve, 250));
    assert.deepEqual(await limiter.hit('k'), { allowed: true, limit: 1, remaining: 0, resetSeconds: 1 });
  });

  if (options.sharedLimiterWindows) {
    run('limiters: two limiter instances of one name (two edges) share the window', async (store) => {
      const edgeA = store.rateLimiter('shared', 2, 60_000);
      const edgeB = store.rateLimiter('shared', 2, 60_000);
      const other = store.rateLimiter('other', 2, 60_000);
      assert.equal((await edgeA.hit('tok_a')).remaining, 1);
      assert.equal((await edgeB.hit('tok_a')).remaining, 0);
      assert.equal((await edgeA.hit('tok_a')).allowed, false);
      assert.equal((await other.hit('tok_a')).remaining, 1, 'another limiter name is another window');
    });
  }
}
