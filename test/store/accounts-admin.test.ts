/**
 * The store's operator queries behind `burrow admin` (issue 16, point 4): an account by e-mail, every
 * account, and a plan change that a second process (a running edge) sees.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Store } from '../../src/store/store.js';
import { tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-store-admin-');

test('findAccountByEmail, listAccounts and setPlan', async () => {
  const dir = freshDir();
  const store = Store.open(dir);
  try {
    const { account: b } = await store.createAccount('b@example.test', 'FREE', 'first');
    const { account: a } = await store.createAccount('a@example.test', 'PRO', 'first');
    assert.equal(store.findAccountByEmail('  A@Example.TEST ')?.id, a.id);
    assert.equal(store.findAccountByEmail('nobody@example.test'), undefined);
    assert.deepEqual(
      store.listAccounts().map((account) => account.email),
      ['a@example.test', 'b@example.test'],
    );
    const other = Store.open(dir);
    try {
      assert.equal((await store.setPlan(b.id, 'PRO'))?.plan, 'PRO');
      // lmdb-js keeps a reader's snapshot until its next macrotask (a setTimeout(0) renews it), as a
      // running edge's snapshot is renewed between requests; read after one, not in the same instant.
      await new Promise((resolve) => setTimeout(resolve, 5));
      assert.equal(other.getAccount(b.id)?.plan, 'PRO', 'another process on the directory sees the new plan');
    } finally {
      await other.close();
    }
    assert.equal(await store.setPlan('acc_missing', 'PRO'), undefined);
  } finally {
    await store.close();
  }
});
