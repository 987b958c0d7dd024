/**
 * The store on real LMDB in a temp dir: accounts, tokens, reservations, authentication, reopening, and
 * that a refused or interrupted write leaves nothing half made (DESIGN.md section 3, issue 2).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { BurrowError } from '../../src/errors.js';
import { Store } from '../../src/store/store.js';
import { tempDirs, waitFor } from '../helpers.js';

const freshDir = tempDirs('burrow-store-');

/** Every record of a named database, read straight from LMDB. */
function rawEntries(store: Store, name: string): { key: unknown; value: any }[] {
  const db = store.root.openDB({ name, encoding: 'msgpack' });
  return [...db.getRange()].map(({ key, value }) => ({ key, value }));
}

async function withStore<T>(dir: string, run: (store: Store) => Promise<T>): Promise<T> {
  const store = Store.open(dir);
  try {
    return await run(store);
  } finally {
    await store.close();
  }
}

test('createAccount makes an account and its first token', async () => {
  await withStore(freshDir(), async (store) => {
    const { account, token } = await store.createAccount('  Ada@Example.TEST ', 'FREE', 'first', 1_000);
    assert.match(account.id, /^usr_[0-9a-f]{16}$/);
    assert.deepEqual({ ...account, id: '' }, { id: '', email: 'ada@example.test', plan: 'FREE', createdAt: 1_000 });
    assert.match(token.token, /^svc_pat_[0-9a-f]{8}_[0-9a-f]{36}$/);
    assert.equal(token.id, `tok_${token.idSegment}`);
    assert.equal(token.prefix, `svc_pat_${token.idSegment}`);
    assert.ok(token.token.startsWith(`${token.prefix}_`));
    assert.equal(token.label, 'first');
    assert.equal(token.accountId, account.id);
    assert.deepEqual(store.getAccount(account.id), account);
    assert.equal(store.countAccounts(), 1);
  });
});

test('a second account with the same e-mail (any case, any spaces) is refused and writes nothing', async () => {
  await withStore(freshDir(), async (store) => {
    await store.createAccount('bo@example.test', 'FREE', 'first');
    const before = { accounts: rawEntries(store, 'accounts').length, tokens: rawEntries(store, 'tokens').length };
    await assert.rejects(store.createAccount(' BO@example.test', 'PRO', 'again'), (error: unknown) => {
      assert.ok(error instanceof BurrowError);
      assert.equal(error.code, 'INVALID_REQUEST');
      return true;
    });
    assert.equal(store.countAccounts(), 1);
    assert.deepEqual({ accounts: rawEntries(store, 'accounts').length, tokens: rawEntries(store, 'tokens').length }, before);
  });
});

test('tokens: create, list (oldest first, no secret), revoke, count', async () => {
  await withStore(freshDir(), async (store) => {
    const { account, token: first } = await store.createAccount('cy@example.test', 'FREE', 'first', 1_000);
    const second = await store.createToken(account, 'second', 2_000);
    assert.equal(store.countActiveTokens(account.id), 2);
    const list = store.listTokens(account.id);
    assert.deepEqual(list.map((t) => t.label), ['first', 'second']);
    for (const entry of list) {
      assert.equal('token' in entry, false);
      assert.equal(entry.lastUsedAt, null);
    }
    assert.equal(await store.revokeToken(account.id, first.idSegment, 3_000), true);
    assert.equal(await store.revokeToken(account.id, first.idSegment, 3_000), false, 'revoking twice');
    assert.deepEqual(store.listTokens(account.id).map((t) => t.id), [second.id]);
    assert.equal(store.countActiveTokens(account.id), 1);
    // The revoked record stays, marked, so its id is never handed out again.
    const stored = rawEntries(store, 'tokens').find((entry) => entry.key === first.idSegment);
    assert.equal(stored?.value.revokedAt, 3_000);
  });
});

test("revokeToken refuses another account's token", async () => {
  await withStore(freshDir(), async (store) => {
    const a = await store.createAccount('a@example.test', 'FREE', 'a');
    const b = await store.createAccount('b@example.test', 'FREE', 'b');
    assert.equal(await store.revokeToken(a.account.id, b.token.idSegment), false);
    assert.notEqual(store.authenticate(b.token.token), null);
  });
});

test('the active-token cap refuses with TOKEN_LIMIT_REACHED and writes nothing; a revoke frees a slot', async () => {
  await withStore(freshDir(), async (store) => {
    const { account, token } = await store.createAccount('dee@example.test', 'FREE', 'first');
    const cap = store.planLimits('FREE').activeTokens;
    assert.equal(cap, 5);
    for (let i = 1; i < cap; i++) await store.createToken(account, `t${i}`);
    const tokensBefore = rawEntries(store, 'tokens');
    const indexBefore = rawEntries(store, 'account-tokens');
    await assert.rejects(store.createToken(account, 'over'), (error: unknown) => {
      assert.ok(error instanceof BurrowError);
      assert.equal(error.code, 'TOKEN_LIMIT_REACHED');
      assert.equal(error.status, 403);
      return true;
    });
    assert.deepEqual(rawEntries(store, 'tokens'), tokensBefore);
    assert.deepEqual(rawEntries(store, 'account-tokens'), indexBefore);
    await store.revokeToken(account.id, token.idSegment);
    const next = await store.createToken(account, 'after revoke');
    assert.equal(store.countActiveTokens(account.id), cap);
    assert.notEqual(store.authenticate(next.token), null);
  });
});

test('plan limits: FREE and PRO defaults (DESIGN.md section 4), overridable per store', async () => {
  await withStore(freshDir(), async (store) => {
    assert.deepEqual(store.planLimits('FREE'), {
      activeTokens: 5, activeTunnels: 3, capturedRequests: 1_000, retentionMs: 24 * 3_600_000, captureBytes: 100 * 1024 * 1024, reservedSubdomains: 3,
      queuedEvents: 1_000, queuedBytes: 100 * 1024 * 1024, queueMaxAgeMs: 72 * 3_600_000, accountQueuedEvents: 2_000, accountQueuedBytes: 200 * 1024 * 1024,
    });
    assert.deepEqual(store.planLimits('PRO'), {
      activeTokens: 50, activeTunnels: 25, capturedRequests: 10_000, retentionMs: 7 * 24 * 3_600_000, captureBytes: 2048 * 1024 * 1024, reservedSubdomains: 50,
      queuedEvents: 10_000, queuedBytes: 1024 * 1024 * 1024, queueMaxAgeMs: 7 * 24 * 3_600_000, accountQueuedEvents: 20_000, accountQueuedBytes: 2048 * 1024 * 1024,
    });
  });
  const store = Store.open(freshDir(), { plans: { FREE: { activeTokens: 2 } } });
  try {
    assert.equal(store.planLimits('FREE').activeTokens, 2);
    assert.equal(store.planLimits('FREE').activeTunnels, 3);
    const { account } = await store.createAccount('e@example.test', 'FREE', 'first');
    await store.createToken(account, 'second');
    await assert.rejects(store.createToken(account, 'third'), /allows 2 active tokens/);
  } finally {
    await store.close();
  }
});

test('authenticate: the right token only, compared by SHA-256; the secret is never stored', async () => {
  await withStore(freshDir(), async (store) => {
    const { account, token } = await store.createAccount('fay@example.test', 'PRO', 'first');
    const principal = store.authenticate(token.token);
    assert.equal(principal?.account.id, account.id);
    assert.equal(principal?.account.plan, 'PRO');
    assert.equal(principal?.token.id, token.id);

    const secret = token.token.slice(-36);
    const wrongSecret = `${token.prefix}_${secret.slice(0, 35)}${secret.endsWith('0') ? '1' : '0'}`;
    const unknownId = `svc_pat_${token.idSegment === '00000000' ? '11111111' : '00000000'}_${secret}`;
    for (const bad of [wrongSecret, unknownId, '', token.prefix, token.token.toUpperCase(), `${token.token}0`, ` ${token.token}`, token.token.slice(0, -1)]) {
      assert.equal(store.authenticate(bad), null, `accepted ${JSON.stringify(bad)}`);
    }

    const [record] = rawEntries(store, 'tokens');
    assert.deepEqual(Buffer.from(record!.value.hash), createHash('sha256').update(token.token).digest());
    assert.equal(JSON.stringify(record!.value).includes(secret), false);
    assert.equal(JSON.stringify(record!.value).includes(Buffer.from(secret).toString('base64')), false);

    await store.revokeToken(account.id, token.idSegment);
    assert.equal(store.authenticate(token.token), null, 'a revoked token');
  });
});

test('touchToken records last use, shown in lists', async () => {
  await withStore(freshDir(), async (store) => {
    const { account, token } = await store.createAccount('gus@example.test', 'FREE', 'first');
    assert.equal(store.listTokens(account.id)[0]!.lastUsedAt, null);
    await store.touchToken(token.idSegment, 5_000);
    assert.equal(store.listTokens(account.id)[0]!.lastUsedAt, 5_000);
    assert.equal(store.authenticate(token.token)?.token.lastUsedAt, 5_000);
  });
});

test('reservations: reserve, idempotent for the owner, SUBDOMAIN_TAKEN for others, release', async () => {
  await withStore(freshDir(), async (store) => {
    const a = (await store.createAccount('a@example.test', 'FREE', 'a')).account;
    const b = (await store.createAccount('b@example.test', 'FREE', 'b')).account;
    const record = await store.reserve(a.id, 'my-hook', 1_000);
    assert.deepEqual(record, { subdomain: 'my-hook', accountId: a.id, createdAt: 1_000, generation: record.generation });
    assert.match(record.generation!, /^[0-9a-f]{16}$/);
    assert.deepEqual(await store.reserve(a.id, 'my-hook', 2_000), record);
    await assert.rejects(store.reserve(b.id, 'my-hook'), (error: unknown) => error instanceof BurrowError && error.code === 'SUBDOMAIN_TAKEN');
    assert.deepEqual(store.listReservations(a.id), [record]);
    assert.deepEqual(store.listReservations(b.id), []);
    assert.equal(await store.releaseReservation(b.id, 'my-hook'), false);
    assert.equal(await store.releaseReservation(a.id, 'my-hook'), true);
    assert.equal(store.getReservation('my-hook'), undefined);
    assert.deepEqual(store.listReservations(a.id), []);
    const next = await store.reserve(b.id, 'my-hook');
    assert.equal(next.accountId, b.id);
    assert.notEqual(next.generation, record.generation, 'each reservation of a name is a new generation (issue 23)');
  });
});

test('reserve with a cap refuses past it with RESERVATION_LIMIT_REACHED, inside the transaction', async () => {
  await withStore(freshDir(), async (store) => {
    const { account } = await store.createAccount('ivy@example.test', 'FREE', 'a');
    const outcomes = await Promise.allSettled(['one-name', 'two-name', 'three-name', 'four-name'].map((name) => store.reserve(account.id, name, 1, 2)));
    assert.deepEqual(outcomes.map((o) => o.status), ['fulfilled', 'fulfilled', 'rejected', 'rejected']);
    for (const outcome of outcomes) {
      if (outcome.status === 'rejected') assert.equal((outcome.reason as BurrowError).code, 'RESERVATION_LIMIT_REACHED');
    }
    assert.equal(store.listReservations(account.id).length, 2);
    // A name already held is returned, not counted again.
    assert.equal((await store.reserve(account.id, 'one-name', 2, 2)).createdAt, 1);
  });
});

test('reopening the store keeps accounts, tokens, last use and reservations', async () => {
  const dir = freshDir();
  const saved = await withStore(dir, async (store) => {
    const { account, token } = await store.createAccount('hal@example.test', 'FREE', 'first', 1_000);
    const second = await store.createToken(account, 'second', 2_000);
    await store.revokeToken(account.id, token.idSegment, 3_000);
    await store.touchToken(second.idSegment, 4_000);
    await store.reserve(account.id, 'kept-name', 5_000);
    return { account, token, second, tokens: store.listTokens(account.id) };
  });
  await withStore(dir, async (store) => {
    assert.deepEqual(store.getAccount(saved.account.id), saved.account);
    assert.deepEqual(store.listTokens(saved.account.id), saved.tokens);
    assert.equal(store.listTokens(saved.account.id)[0]!.lastUsedAt, 4_000);
    assert.equal(store.authenticate(saved.token.token), null);
    assert.equal(store.authenticate(saved.second.token)?.account.id, saved.account.id);
    assert.deepEqual(
      store.listReservations(saved.account.id).map(({ generation: _, ...rest }) => rest),
      [{ subdomain: 'kept-name', accountId: saved.account.id, createdAt: 5_000 }],
    );
    // The e-mail index survived too.
    await assert.rejects(store.createAccount('hal@example.test', 'FREE', 'again'), /exists already/);
  });
});

test('kill -9 during token writes never leaves half a token', async () => {
  const dir = freshDir();
  // A writer in another process creates and revokes tokens as fast as it can until it is killed.
  const storeModule = new URL('../../src/store/store.js', import.meta.url).href;
  const script = `
    import { Store } from ${JSON.stringify(storeModule)};
    const store = Store.open(${JSON.stringify(dir)});
    const { account } = await store.createAccount('kill@example.test', 'PRO', 'first');
    process.stdout.write('ready\\n');
    for (let i = 0; ; i++) {
      const token = await store.createToken(account, 'churn ' + i);
      if (i % 2 === 0) await store.revokeToken(account.id, token.idSegment);
      if (store.countActiveTokens(account.id) >= 40) {
        for (const t of store.listTokens(account.id).slice(1)) await store.revokeToken(account.id, t.idSegment);
      }
    }
  `;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  await waitFor(() => output.includes('ready'), 10_000, 'the writer to start');
  // Let it write for a moment: enough for many transactions to be in flight when it dies.
  await waitFor(async () => {
    const probe = Store.open(dir);
    try {
      return rawEntries(probe, 'tokens').length > 50;
    } finally {
      await probe.close();
    }
  }, 10_000, 'tokens to be written');
  child.kill('SIGKILL');
  await exited;

  await withStore(dir, async (store) => {
    const tokens = rawEntries(store, 'tokens');
    const index = new Set(rawEntries(store, 'account-tokens').map(({ key }) => (key as [string, string])[1]));
    assert.ok(tokens.length > 50);
    for (const { key, value } of tokens) {
      // Active ⇔ in the account's index; every record complete.
      assert.equal(index.has(key as string), value.revokedAt === null, `token ${String(key)} and its index disagree`);
      assert.equal(value.hash.byteLength, 32);
      assert.equal(typeof value.label, 'string');
    }
    for (const idSegment of index) assert.ok(tokens.some(({ key }) => key === idSegment), `index entry ${idSegment} without a token`);
    const [account] = rawEntries(store, 'accounts');
    assert.equal(store.countActiveTokens(account!.value.id), index.size);
  });
});
