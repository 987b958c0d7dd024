/**
 * Dashboard sessions on real LMDB (src/store/sessions.ts, docs/dashboard.md): only the id's SHA-256 is
 * stored, a session stands for its token until the token is revoked, ends after its idle time (sliding)
 * and at its absolute cap, and closes on sign-out.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { SessionStore } from '../../src/store/sessions.js';
import { Store } from '../../src/store/store.js';
import { tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-sessions-');
const HOUR = 3_600_000;

async function withSessions(run: (store: Store, sessions: SessionStore) => Promise<void>): Promise<void> {
  const store = Store.open(freshDir());
  try {
    await run(store, new SessionStore(store.root, store, { idleMs: 2 * HOUR, maxAgeMs: 10 * HOUR }));
  } finally {
    await store.close();
  }
}

test('only the SHA-256 of the session id is stored, with the token it stands for', () =>
  withSessions(async (store, sessions) => {
    const { account, token } = await store.createAccount('a@example.test', 'FREE', 'first');
    const principal = store.authenticate(token.token)!;
    const id = await sessions.open(principal, 1_000);
    assert.match(id, /^[A-Za-z0-9_-]{43}$/);
    const rows = [...store.root.openDB({ name: 'dashboard-sessions', encoding: 'msgpack' }).getRange()];
    assert.equal(rows.length, 1);
    assert.equal(rows[0]!.key, createHash('sha256').update(id).digest('hex'));
    assert.ok(!JSON.stringify(rows).includes(id));
    assert.deepEqual(rows[0]!.value, { tokenIdSegment: token.idSegment, accountId: account.id, createdAt: 1_000, lastSeenAt: 1_000 });
    assert.equal(sessions.resolve(id, 2_000)?.principal.token.id, token.id);
    assert.equal(sessions.resolve(`${id.slice(0, -1)}${id.endsWith('A') ? 'B' : 'A'}`, 2_000), undefined);
    assert.equal(sessions.resolve('short', 2_000), undefined);
  }));

test('revoking the token ends its sessions at once', () =>
  withSessions(async (store, sessions) => {
    const { account, token } = await store.createAccount('b@example.test', 'FREE', 'first');
    const id = await sessions.open(store.authenticate(token.token)!, 0);
    assert.ok(await store.revokeToken(account.id, token.idSegment, 10));
    assert.equal(sessions.resolve(id, 20), undefined);
  }));

test('a session ends after its idle time, slides with use, and ends at its cap whatever the use', () =>
  withSessions(async (store, sessions) => {
    const { token } = await store.createAccount('c@example.test', 'FREE', 'first');
    const principal = store.authenticate(token.token)!;
    const idle = await sessions.open(principal, 0);
    assert.equal(sessions.resolve(idle, 2 * HOUR + 1), undefined);

    const used = await sessions.open(principal, 0);
    for (let hour = 1; hour <= 9; hour++) {
      assert.ok(sessions.resolve(used, hour * HOUR), `used at ${hour} h`);
      await store.root.committed; // the use's new deadline is written without waiting for it
    }
    assert.equal(sessions.resolve(used, 9.5 * HOUR)!.expiresAt, 10 * HOUR);
    assert.equal(sessions.resolve(used, 10 * HOUR + 1), undefined, 'the absolute cap');
  }));

test('close ends a session; sweep drops ended ones', () =>
  withSessions(async (store, sessions) => {
    const { token } = await store.createAccount('d@example.test', 'FREE', 'first');
    const principal = store.authenticate(token.token)!;
    const closed = await sessions.open(principal, 0);
    assert.equal(await sessions.close(closed), true);
    assert.equal(sessions.resolve(closed, 1), undefined);
    await sessions.open(principal, 0);
    const live = await sessions.open(principal, 3 * HOUR);
    assert.equal(sessions.sweep(3 * HOUR), 1, 'visits the ended one only');
    await store.root.committed;
    const rows = [...store.root.openDB({ name: 'dashboard-sessions', encoding: 'msgpack' }).getRange()];
    assert.equal(rows.length, 1);
    assert.ok(sessions.resolve(live, 3 * HOUR));
  }));

test('closing a session twice answers false the second time', () =>
  withSessions(async (store, sessions) => {
    const { token } = await store.createAccount('e@example.test', 'FREE', 'first');
    const id = await sessions.open(store.authenticate(token.token)!, 0);
    assert.equal(await sessions.close(id), true);
    assert.equal(await sessions.close(id), false);
  }));

test('sessions stored before the indexes existed are indexed once at start-up, then swept and capped', () =>
  withSessions(async (store) => {
    const { token } = await store.createAccount('f@example.test', 'FREE', 'first');
    const principal = store.authenticate(token.token)!;
    // As an edge before the indexes wrote them: the record alone.
    const records = store.root.openDB<object, string>({ name: 'dashboard-sessions', encoding: 'msgpack' });
    for (let i = 0; i < 5; i++) await records.put(`old-${i}`, { tokenIdSegment: principal.token.idSegment, accountId: principal.account.id, createdAt: i, lastSeenAt: i });
    const sessions = new SessionStore(store.root, store, { idleMs: 2 * HOUR, maxAgeMs: 10 * HOUR, perToken: 3 });
    await sessions.open(principal, 100);
    await store.root.committed;
    assert.equal(sessions.count(), 3, 'the cap counted the old sessions too');
    assert.equal(sessions.sweep(2 * HOUR + 50), 2, 'the two remaining old ones ended, and were found by the index');
    await store.root.committed;
    assert.equal(sessions.count(), 1);
  }));
