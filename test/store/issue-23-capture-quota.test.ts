/**
 * Issue 23, finding 1: a FREE tenant cycling subdomains could fill the disk with captures (a ring of
 * 1,000 slots per subdomain and no cap per account). Each account's captures now count against its
 * plan's quota in bytes, across all its rings: the counter moves in the commit that writes or removes
 * captures, an overwritten or swept slot gives its bytes back, and the count survives a clean restart,
 * a crash, and rings written before the quota existed. Real LMDB in temp dirs.
 *
 * A crash is simulated as in issue-11-ring-wrapped-past-stale-head.test.ts: the environment closes with
 * what is committed, without the store's own close().
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { open } from 'lmdb';
import { CaptureStore, encodeStoredCapture, type RingHandle } from '../../src/store/captures.js';
import { tempDirs } from '../helpers.js';
import { postCapture } from './capture-fixture.js';

const freshDir = tempDirs('burrow-issue-23-quota-');
const RETENTION = 60_000;


/** Captures `bodySizes` through the ring, one commit each, as the edge does; returns their stored sizes and ids. */
function write(store: CaptureStore, ring: RingHandle, bodySizes: number[], receivedAt?: number): { ids: string[]; sizes: number[]; written: number } {
  const ids: string[] = [];
  const sizes: number[] = [];
  let written = 0;
  for (const size of bodySizes) {
    const { seq, id } = ring.next();
    const stored = postCapture(ring, seq, id, size, receivedAt);
    ids.push(id);
    sizes.push(encodeStoredCapture(stored).byteLength);
    written += store.writeAll([{ ring, seq, storedCapture: () => stored }]);
  }
  return { ids, sizes, written };
}

const sum = (values: number[]): number => values.reduce((total, value) => total + value, 0);
const listed = (store: CaptureStore, account: string, subdomain: string): string[] =>
  store.list(account, subdomain, { limit: 1_000, retentionMs: RETENTION })!.map((entry) => entry.id);

async function crash(store: CaptureStore): Promise<void> {
  await (store as unknown as { root: { close(): Promise<void> } }).root.close();
}

test('an account counts the bytes of its captures across all its rings; an overwritten slot gives its bytes back', async () => {
  const store = CaptureStore.open(freshDir());
  try {
    const first = store.ring('usr_a', 'one', 2);
    const second = store.ring('usr_a', 'two', 2);
    const theirs = store.ring('usr_b', 'one', 2);
    const a1 = write(store, first, [1_000, 2_000, 3_000]);
    const a2 = write(store, second, [500]);
    const b = write(store, theirs, [4_000]);
    // The ring of two kept the last two: the first capture's bytes went with it.
    assert.equal(store.bytesOf('usr_a'), a1.sizes[1]! + a1.sizes[2]! + a2.sizes[0]!);
    assert.equal(store.bytesOf('usr_b'), b.sizes[0]);
    assert.equal(store.quotaUse().storedBytes, store.bytesOf('usr_a') + store.bytesOf('usr_b'));
  } finally {
    await store.close();
  }
});

test('over its quota an account\'s capture is skipped, the slot\'s older capture goes as an overwrite would, and another account still captures', async () => {
  const store = CaptureStore.open(freshDir());
  try {
    const quota = 5_000;
    const ring = store.ring('usr_a', 'capped', 2, quota);
    const other = store.ring('usr_b', 'free', 2, quota);
    const first = write(store, ring, [2_000, 2_000]);
    assert.equal(first.written, 2);
    const usedBefore = store.bytesOf('usr_a');
    // Slot 0 holds ~2 KB; 4 KB in its place would take the account to ~6 KB.
    const over = write(store, ring, [4_000]);
    assert.equal(over.written, 0);
    assert.equal(store.skipped.quota, 1);
    assert.equal(store.bytesOf('usr_a'), usedBefore - first.sizes[0]!, 'the overwritten capture gave its bytes back');
    assert.deepEqual(listed(store, 'usr_a', 'capped'), [first.ids[1]], 'the skipped capture is not listed, nor the one it replaced');
    assert.equal(store.get('usr_a', over.ids[0]!, RETENTION), null);
    // With room again, captures go on.
    assert.equal(write(store, ring, [1_000]).written, 1);
    assert.equal(write(store, other, [4_000]).written, 1, 'another account is not held to this one');
    assert.ok(store.bytesOf('usr_a') <= quota);
  } finally {
    await store.close();
  }
});

test('the count survives a clean restart and a crash; a restarted store overwrites with the right sizes', async () => {
  const dir = freshDir();
  let store = CaptureStore.open(dir);
  const written = write(store, store.ring('usr_a', 'kept', 3), [1_000, 2_000, 3_000]);
  const expected = sum(written.sizes);
  await store.close();

  store = CaptureStore.open(dir);
  assert.equal(store.bytesOf('usr_a'), expected, 'after a clean close');
  let ring = store.ring('usr_a', 'kept', 3);
  const next = write(store, ring, [100]);
  assert.equal(store.bytesOf('usr_a'), expected - written.sizes[0]! + next.sizes[0]!, 'the slot sizes a clean close saved');
  await crash(store);

  store = CaptureStore.open(dir);
  try {
    const afterCrash = expected - written.sizes[0]! + next.sizes[0]!;
    assert.equal(store.bytesOf('usr_a'), afterCrash, 'the counter is committed with the captures');
    ring = store.ring('usr_a', 'kept', 3);
    const again = write(store, ring, [200]);
    assert.equal(store.bytesOf('usr_a'), afterCrash - written.sizes[1]! + again.sizes[0]!, 'the slot sizes read back from the slots');
  } finally {
    await store.close();
  }
});

test('a sweep gives the bytes of expired captures back, and a ring written again later does not give them twice', async () => {
  const dir = freshDir();
  let store = CaptureStore.open(dir);
  const old = Date.now() - 2 * RETENTION;
  write(store, store.ring('usr_a', 'aging', 4), [1_000, 1_000, 1_000], old);
  const fresh = write(store, store.ring('usr_a', 'fresh', 4), [1_000]);
  await store.close();

  // Swept by a store that does not write the ring, then written by the next one.
  store = CaptureStore.open(dir);
  assert.equal(await store.sweep(() => RETENTION), 3);
  assert.equal(store.bytesOf('usr_a'), fresh.sizes[0]);
  await store.close();
  store = CaptureStore.open(dir);
  try {
    const ring = store.ring('usr_a', 'aging', 4);
    const more = write(store, ring, [500, 500, 500, 500, 500]);
    // Five into four slots: the last four stay; nothing swept is given back a second time.
    assert.equal(store.bytesOf('usr_a'), fresh.sizes[0]! + sum(more.sizes.slice(1)));
  } finally {
    await store.close();
  }
});

test('rings written before the quota existed are counted when they are written again', async () => {
  const dir = freshDir();
  let store = CaptureStore.open(dir);
  const before = write(store, store.ring('usr_a', 'legacy', 4), [1_000, 2_000]);
  await store.close();
  // What an edge of an older version leaves: ring records without `counted`, no counters, no saved sizes.
  const root = open({ path: dir, noSubdir: false, maxDbs: 8, compression: false });
  const rings = root.openDB({ name: 'capture-rings', encoding: 'msgpack' });
  root.transactionSync(() => {
    for (const { key, value } of rings.getRange()) {
      const { counted: _counted, ...record } = value as { counted?: boolean };
      rings.put(key, record);
    }
    root.openDB({ name: 'capture-account-bytes', encoding: 'msgpack' }).remove('usr_a');
    root.openDB({ name: 'capture-slot-sizes', encoding: 'binary' }).remove(1);
  });
  await root.close();

  store = CaptureStore.open(dir);
  try {
    assert.equal(store.bytesOf('usr_a'), 0, 'nothing counted until the ring is written again');
    const ring = store.ring('usr_a', 'legacy', 4);
    assert.equal(store.bytesOf('usr_a'), sum(before.sizes), 'counted when taken for writing');
    const after = write(store, ring, [300]);
    assert.equal(store.bytesOf('usr_a'), sum(before.sizes) + after.sizes[0]!);
  } finally {
    await store.close();
  }
});
