/**
 * The capture environment's page size (CAPTURE_PAGE_BYTES): a new environment gets 8 KiB pages, so the
 * capture of a 1 KiB exchange lives in its leaf instead of an overflow page of its own (one page written
 * per capture, not two); an environment made with 4 KiB pages opens as it is and keeps working. Real LMDB
 * in temp dirs.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { after, test } from 'node:test';
import { open } from 'lmdb';
import { CAPTURE_PAGE_BYTES, CaptureStore, encodeStoredCapture, type RingHandle, type StoredCapture } from '../../src/store/captures.js';
import { tempDir } from '../helpers.js';
import { postCapture } from './capture-fixture.js';

const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function dir(): string {
  const made = tempDir('burrow-capture-pages-');
  dirs.push(made);
  return made;
}

/** A capture about the size of a 1 KiB POST's (~2.2 KiB encoded). */
function capture(ring: RingHandle, seq: number, id: string): StoredCapture {
  return postCapture(ring, seq, id, 2048);
}

function writeCaptures(store: CaptureStore, ring: RingHandle, count: number): string[] {
  const ids: string[] = [];
  const batch = [];
  for (let i = 0; i < count; i++) {
    const { seq, id } = ring.next();
    ids.push(id);
    const stored = capture(ring, seq, id);
    batch.push({ ring, seq, storedCapture: () => stored });
  }
  assert.equal(store.writeAll(batch), count);
  return ids;
}

/** The environment's page size and the slots' overflow pages, read with the store closed. */
async function slotStats(path: string): Promise<{ pageSize: number; overflowPages: number; entries: number }> {
  const root = open({ path, noSubdir: false, maxDbs: 8, compression: false });
  try {
    const stats = root.openDB({ name: 'capture-slots', encoding: 'binary' }).getStats() as { pageSize: number; overflowPages: number; entryCount: number };
    return { pageSize: stats.pageSize, overflowPages: stats.overflowPages, entries: stats.entryCount };
  } finally {
    await root.close();
  }
}

test('a new capture environment has 8 KiB pages, and a 1 KiB exchange\'s capture needs no overflow page', async () => {
  const path = dir();
  const store = CaptureStore.open(path);
  const ring = store.ring('usr_a', 'pages', 50);
  const probe = capture(ring, 0, 'req_probe');
  const size = encodeStoredCapture(probe).byteLength;
  assert.ok(size > 2048 && size < CAPTURE_PAGE_BYTES / 2 - 128, `a capture of ${size} bytes`);
  const ids = writeCaptures(store, ring, 40);
  assert.equal(store.get('usr_a', ids[39]!, 60_000)?.id, ids[39]);
  await store.close();
  assert.equal(CAPTURE_PAGE_BYTES, 8192);
  assert.deepEqual(await slotStats(path), { pageSize: 8192, overflowPages: 0, entries: 40 });
});

test('an environment made with 4 KiB pages keeps them: captures written, read, and read again after a reopen', async () => {
  const path = dir();
  const made = open({ path, noSubdir: false, maxDbs: 8, compression: false, pageSize: 4096 });
  await made.close();
  let store = CaptureStore.open(path);
  const ring = store.ring('usr_a', 'old-pages', 50);
  const ids = writeCaptures(store, ring, 10);
  await store.close();
  const stats = await slotStats(path);
  assert.equal(stats.pageSize, 4096);
  // At 4 KiB the same captures each took an overflow page: what 8 KiB pages save.
  assert.ok(stats.overflowPages >= 10, `${stats.overflowPages} overflow pages`);
  store = CaptureStore.open(path);
  try {
    const listed = store.list('usr_a', 'old-pages', { limit: 100, retentionMs: 60_000 })!;
    assert.deepEqual(listed.map((entry) => entry.id), [...ids].reverse());
    const reopened = store.ring('usr_a', 'old-pages', 50);
    writeCaptures(store, reopened, 5);
    assert.equal(store.list('usr_a', 'old-pages', { limit: 100, retentionMs: 60_000 })!.length, 15);
  } finally {
    await store.close();
  }
});
