/**
 * Issue 25: big capture records live in a file of fixed-size blocks beside the capture environment
 * (src/store/capture-blocks.ts); their slots hold stubs. What a reader sees does not change: the same
 * bodies byte for byte through get, search and list, the same quota bytes, across a lapping ring, a
 * sweep, a clean restart, a crash, a replayed journal and a full disk. Blocks are reused, so a ring that
 * laps stops growing the file, and blocks holding something else read as no capture, never as another
 * capture's bytes. Real LMDB and real files in temp dirs; a real loop-mounted file system for the full
 * disk.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { open } from 'lmdb';
import { BLOCK_BYTES, BLOCK_PAYLOAD_BYTES, BLOCK_RECORD_MIN_BYTES, BLOCKS_FILE } from '../../src/store/capture-blocks.js';
import { CAPTURE_PAGE_BYTES, CaptureStore, encodeStoredCapture, type RingHandle, type StoredCapture } from '../../src/store/captures.js';
import { tempDirs } from '../helpers.js';
import { loopFs } from '../loop-fs.js';
import { postCapture } from './capture-fixture.js';

const freshDir = tempDirs('burrow-capture-blocks-');
const RETENTION = 60_000;
const MIB = 1024 * 1024;
const ACCOUNT = 'usr_blocks';

interface Written {
  id: string;
  body: Buffer;
  size: number;
}

/** One capture of a POST with a random body of `bodySize` bytes, committed as the edge commits it. */
function capture(store: CaptureStore, ring: RingHandle, bodySize: number, receivedAt?: number): Written {
  const { seq, id } = ring.next();
  const body = randomBytes(bodySize);
  const stored: StoredCapture = { ...postCapture(ring, seq, id, bodySize, receivedAt), requestBody: body };
  const written = store.writeAll([{ ring, seq, storedCapture: () => stored }]);
  assert.equal(written, 1, `the capture of ${bodySize} bytes was written`);
  return { id, body, size: encodeStoredCapture(stored).byteLength };
}

function bodyOf(store: CaptureStore, id: string): Buffer | null {
  const record = store.get(ACCOUNT, id, RETENTION);
  return record === null ? null : Buffer.from(record.requestBody!);
}

const blocksFileBytes = (dir: string): number => statSync(join(dir, BLOCKS_FILE)).size;
const internals = (store: CaptureStore) =>
  store as unknown as { blocks: { freeBlocks: number; blocks: number }; slots: { getBinary(key: [number, number]): Buffer | undefined }; root: { close(): Promise<void> } };

test('a big record goes to the blocks file and its slot holds a stub; get and list read it, byte for byte, and the quota counts it whole', async () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir);
  try {
    const ring = store.ring(ACCOUNT, 'big', 8);
    const big = capture(store, ring, MIB);
    const mid = capture(store, ring, 40 * 1024);
    const small = capture(store, ring, 1024);
    const edge = capture(store, ring, BLOCK_PAYLOAD_BYTES * 3 - 200);
    for (const written of [big, mid, small, edge]) assert.deepEqual(bodyOf(store, written.id), written.body, `${written.body.byteLength} bytes back as written`);
    assert.ok(mid.size >= BLOCK_RECORD_MIN_BYTES && small.size < BLOCK_RECORD_MIN_BYTES);
    // Blocks for 1 MiB + 40 KiB + three blocks' worth; the small record stays in LMDB.
    const blocks = Math.ceil(big.size / BLOCK_PAYLOAD_BYTES) + Math.ceil(mid.size / BLOCK_PAYLOAD_BYTES) + Math.ceil(edge.size / BLOCK_PAYLOAD_BYTES);
    assert.equal(internals(store).blocks.blocks, blocks);
    assert.ok(blocksFileBytes(dir) > (blocks - 1) * BLOCK_BYTES, `the file holds them (${blocksFileBytes(dir)} bytes)`);
    const stub = internals(store).slots.getBinary([ring.ringId, 0])!;
    assert.ok(stub.byteLength < CAPTURE_PAGE_BYTES / 2, `the 1 MiB record's slot holds ${stub.byteLength} bytes`);
    assert.equal(internals(store).slots.getBinary([ring.ringId, 2])!.byteLength, small.size, 'a small record stays whole in its slot');

    assert.deepEqual(store.list(ACCOUNT, 'big', { limit: 10, retentionMs: RETENTION })!.map((entry) => entry.id), [edge.id, small.id, mid.id, big.id]);
    assert.equal(store.bytesOf(ACCOUNT), big.size + mid.size + small.size + edge.size, 'the quota counts every record whole');
  } finally {
    await store.close();
  }
});

test('search finds text inside a body kept in blocks, and not in a body that lacks it', async () => {
  const store = CaptureStore.open(freshDir());
  try {
    const ring = store.ring(ACCOUNT, 'search', 4);
    const { seq, id } = ring.next();
    const body = Buffer.alloc(2 * MIB, 0x2e);
    body.write('needle-in-the-second-mebibyte', MIB + 12345, 'latin1');
    const stored: StoredCapture = { ...postCapture(ring, seq, id, body.byteLength), requestBody: body };
    assert.equal(store.writeAll([{ ring, seq, storedCapture: () => stored }]), 1);
    const other = capture(store, ring, MIB);
    const options = { limit: 10, retentionMs: RETENTION, maxScanned: 10, maxBodyBytes: 64 * MIB };
    assert.deepEqual(store.search(ACCOUNT, 'search', 'NEEDLE-in-the-second', options)!.matches.map((match) => match.id), [id]);
    assert.equal(store.search(ACCOUNT, 'search', 'not-there-anywhere', options)!.matches.length, 0);
    assert.deepEqual(bodyOf(store, other.id), other.body);
  } finally {
    await store.close();
  }
});

test('a ring that laps reuses its blocks: the file stops growing after the first lap, and small captures over big ones free theirs', async () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir);
  try {
    const ring = store.ring(ACCOUNT, 'laps', 3);
    for (let i = 0; i < 3; i++) capture(store, ring, MIB);
    const perRecord = internals(store).blocks.blocks / 3;
    // A commit's new record cannot take the blocks that commit frees (crash rules): the file holds the
    // ring's records and one more.
    capture(store, ring, MIB);
    const blocks = internals(store).blocks.blocks;
    assert.equal(blocks, 4 * perRecord);
    let last: Written[] = [];
    for (let lap = 0; lap < 3; lap++) {
      last = [capture(store, ring, 300 * 1024), capture(store, ring, MIB), capture(store, ring, MIB)];
    }
    assert.equal(internals(store).blocks.blocks, blocks, 'no block was added');
    assert.ok(blocksFileBytes(dir) <= blocks * BLOCK_BYTES && blocksFileBytes(dir) > (blocks - 1) * BLOCK_BYTES, 'the file did not grow');
    for (const written of last) assert.deepEqual(bodyOf(store, written.id), written.body);
    for (let i = 0; i < 3; i++) capture(store, ring, 2_000);
    assert.equal(internals(store).blocks.freeBlocks, blocks, 'every block is free once small captures took the slots');
    const again = capture(store, ring, MIB);
    assert.equal(internals(store).blocks.blocks, blocks);
    assert.deepEqual(bodyOf(store, again.id), again.body);
  } finally {
    await store.close();
  }
});

test('a sweep frees the blocks of expired captures and gives their bytes back', async () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir);
  try {
    const ring = store.ring(ACCOUNT, 'sweep', 4);
    const old = Date.now() - 10 * RETENTION;
    capture(store, ring, MIB, old);
    capture(store, ring, MIB, old);
    const fresh = capture(store, ring, MIB);
    const free = internals(store).blocks.freeBlocks;
    assert.equal(await store.sweep(() => RETENTION), 2);
    assert.equal(internals(store).blocks.freeBlocks, free + 2 * Math.ceil(fresh.size / BLOCK_PAYLOAD_BYTES));
    assert.equal(store.bytesOf(ACCOUNT), fresh.size);
    assert.deepEqual(bodyOf(store, fresh.id), fresh.body);
  } finally {
    await store.close();
  }
});

test('after a clean restart and after a crash, big captures read back, sizes and quota are exact, and free blocks are known', async () => {
  for (const ending of ['clean', 'crash'] as const) {
    const dir = freshDir();
    let store = CaptureStore.open(dir);
    const ring = store.ring(ACCOUNT, ending, 3);
    const written = [capture(store, ring, MIB), capture(store, ring, 100 * 1024), capture(store, ring, 500)];
    capture(store, ring, MIB);
    // The first 1 MiB capture was overwritten by the last, whose commit could not take its blocks (crash
    // rules): they are free, and the file holds both.
    const kept = [written[1]!, written[2]!];
    const bytes = store.bytesOf(ACCOUNT);
    const blocks = internals(store).blocks.blocks;
    if (ending === 'clean') await store.close();
    else await internals(store).root.close();

    store = CaptureStore.open(dir);
    try {
      for (const capture of kept) assert.deepEqual(bodyOf(store, capture.id), capture.body, `${ending}: read back`);
      assert.equal(store.bytesOf(ACCOUNT), bytes, `${ending}: the account's bytes`);
      assert.equal(internals(store).blocks.blocks, blocks);
      const freed = Math.ceil(written[0]!.size / BLOCK_PAYLOAD_BYTES);
      assert.equal(internals(store).blocks.freeBlocks, freed, `${ending}: the overwritten capture's blocks are free`);
      const again = store.ring(ACCOUNT, ending, 3);
      // Slot 1 (100 KiB) and slot 2 (500 B) are overwritten next: 100 KiB's blocks are free again after it.
      const next = capture(store, again, 2_000);
      assert.equal(internals(store).blocks.freeBlocks, freed + Math.ceil(written[1]!.size / BLOCK_PAYLOAD_BYTES), `${ending}: the overwritten slot's blocks are free`);
      assert.deepEqual(bodyOf(store, next.id), next.body);
      assert.equal(bodyOf(store, written[1]!.id), null, 'overwritten');
    } finally {
      await store.close();
    }
  }
});

test('a record whose blocks hold something else reads as no capture, never as those bytes', async () => {
  const dir = freshDir();
  let store = CaptureStore.open(dir);
  const ring = store.ring(ACCOUNT, 'torn', 4);
  const first = capture(store, ring, MIB);
  const second = capture(store, ring, MIB);
  await store.close();
  // A power loss that kept a later block write: the fifth block of the first record now holds other bytes.
  const fd = openSync(join(dir, BLOCKS_FILE), 'r+');
  writeSync(fd, Buffer.alloc(BLOCK_BYTES, 0x41), 0, BLOCK_BYTES, 4 * BLOCK_BYTES);
  closeSync(fd);
  store = CaptureStore.open(dir);
  try {
    assert.equal(bodyOf(store, first.id), null, 'a block with the wrong tag: not found');
    assert.deepEqual(bodyOf(store, second.id), second.body, 'the other capture is whole');
  } finally {
    await store.close();
  }
});

test('records written whole into LMDB by an earlier version stay readable, and are overwritten as usual', async () => {
  const dir = freshDir();
  // As a version before the blocks file wrote them: the same environment, no blocks.
  const root = open({ path: dir, noSubdir: false, maxDbs: 8, compression: false, noSync: true, pageSize: CAPTURE_PAGE_BYTES });
  const before = new CaptureStore(root);
  const ring = before.ring(ACCOUNT, 'legacy', 2);
  const legacy = [capture(before, ring, MIB), capture(before, ring, 50 * 1024)];
  await before.close();
  const store = CaptureStore.open(dir);
  try {
    for (const written of legacy) assert.deepEqual(bodyOf(store, written.id), written.body);
    const again = store.ring(ACCOUNT, 'legacy', 2);
    const next = capture(store, again, MIB);
    assert.deepEqual(bodyOf(store, next.id), next.body);
    assert.equal(bodyOf(store, legacy[0]!.id), null);
    assert.equal(store.bytesOf(ACCOUNT), legacy[1]!.size + next.size);
  } finally {
    await store.close();
  }
});

test('a journaled capture big enough for blocks is replayed into them after a crash', async () => {
  const dir = freshDir();
  let store = CaptureStore.open(dir);
  const ring = store.ring(ACCOUNT, 'replay', 10);
  const { seq, id } = ring.next();
  const body = randomBytes(40 * 1024);
  const stored: StoredCapture = { ...postCapture(ring, seq, id, body.byteLength), requestBody: body };
  assert.ok(encodeStoredCapture(stored).byteLength >= BLOCK_RECORD_MIN_BYTES);
  assert.equal(store.journalAll([{ ring, seq, storedCapture: () => stored }]), false, 'journaled, its commit left for later');
  await internals(store).root.close();
  store = CaptureStore.open(dir);
  try {
    assert.deepEqual(bodyOf(store, id), body);
    assert.equal(internals(store).blocks.blocks, 1, 'replayed into a block');
  } finally {
    await store.close();
  }
});

test('on a full disk a big capture is skipped and reported, what was stored stays whole, and with room again captures go on', async (t) => {
  const disk = loopFs(32);
  if (typeof disk === 'string') {
    t.skip(disk);
    return;
  }
  const dir = join(disk.dir, 'captures');
  mkdirSync(dir);
  const store = CaptureStore.open(dir);
  try {
    const ring = store.ring(ACCOUNT, 'full', 4);
    const kept = capture(store, ring, MIB);
    const bytes = store.bytesOf(ACCOUNT);
    disk.fill();
    const { seq, id } = ring.next();
    const stored = postCapture(ring, seq, id, 2 * MIB);
    assert.equal(store.writeAll([{ ring, seq, storedCapture: () => stored }]), 0, 'not written');
    assert.equal(store.skipped.error, 1);
    assert.equal(store.failures.count('captures'), 1, 'reported');
    assert.equal(store.bytesOf(ACCOUNT), bytes, 'the quota did not move');
    assert.deepEqual(bodyOf(store, kept.id), kept.body);
    rmSync(join(disk.dir, 'filler'));
    const later = capture(store, ring, MIB);
    assert.deepEqual(bodyOf(store, later.id), later.body);
    assert.deepEqual(bodyOf(store, kept.id), kept.body, 'the failed write took no block of a stored record');
  } finally {
    await store.close();
  }
});

test('a body kept in chunks of any size goes from its chunks into blocks, through writeAll and through a turn committed at once, byte for byte', async () => {
  const store = CaptureStore.open(freshDir());
  try {
    const ring = store.ring(ACCOUNT, 'chunks', 8);
    for (const path of ['writeAll', 'journalAll'] as const) {
      const { seq, id } = ring.next();
      const chunks: Buffer[] = [];
      let size = 0;
      // Chunks from 1 byte to 50 KB, crossing block boundaries at every offset they happen to.
      for (let i = 0; size < 3 * MIB; i++) {
        const chunk = randomBytes(i % 7 === 0 ? 1 + (i % 13) : 1 + ((i * 7_919) % 50_000));
        chunks.push(chunk);
        size += chunk.byteLength;
      }
      const stored = { ...postCapture(ring, seq, id, size), requestBody: chunks };
      if (path === 'writeAll') assert.equal(store.writeAll([{ ring, seq, storedCapture: () => stored }]), 1);
      else {
        assert.equal(store.journalAll([{ ring, seq, storedCapture: () => stored }]), true, 'a big capture: its turn is committed at once');
        assert.equal(store.commitQueued(), 1);
      }
      assert.deepEqual(bodyOf(store, id), Buffer.concat(chunks), path);
      assert.equal(store.bytesOf(ACCOUNT) > size, true);
    }
  } finally {
    await store.close();
  }
});

test('with --capture-fsync (no journal, every commit synced) big records go to blocks and read back', async () => {
  const dir = freshDir();
  let store = CaptureStore.open(dir, { fsync: true });
  const ring = store.ring(ACCOUNT, 'fsync', 4);
  const written = [capture(store, ring, MIB), capture(store, ring, 80 * 1024)];
  assert.equal(internals(store).blocks.blocks, Math.ceil(written[0]!.size / BLOCK_PAYLOAD_BYTES) + Math.ceil(written[1]!.size / BLOCK_PAYLOAD_BYTES));
  await internals(store).root.close();
  store = CaptureStore.open(dir, { fsync: true });
  try {
    for (const each of written) assert.deepEqual(bodyOf(store, each.id), each.body);
  } finally {
    await store.close();
  }
});

test('a start cuts the free blocks at the file\'s end off it, and keeps the ones before a block in use', async () => {
  const dir = freshDir();
  let store = CaptureStore.open(dir);
  let ring = store.ring(ACCOUNT, 'trim', 4);
  const first = capture(store, ring, MIB);
  const second = capture(store, ring, MIB);
  const perRecord = Math.ceil(first.size / BLOCK_PAYLOAD_BYTES);
  capture(store, ring, 1_000);
  capture(store, ring, 1_000);
  capture(store, ring, 1_000); // over the first: its blocks, at the file's start, are free
  await store.close();
  store = CaptureStore.open(dir);
  assert.equal(internals(store).blocks.blocks, 2 * perRecord, 'a free block before one in use stays');
  assert.equal(internals(store).blocks.freeBlocks, perRecord);
  assert.deepEqual(bodyOf(store, second.id), second.body);
  ring = store.ring(ACCOUNT, 'trim', 4);
  const last = capture(store, ring, 1_000); // over the second: no block is in use
  await store.close();
  assert.ok(blocksFileBytes(dir) > 0, 'not cut while the edge ran');
  store = CaptureStore.open(dir);
  try {
    assert.equal(blocksFileBytes(dir), 0, 'cut at the start');
    assert.equal(internals(store).blocks.blocks, 0);
    assert.deepEqual(bodyOf(store, last.id), last.body);
    const again = store.ring(ACCOUNT, 'trim', 4);
    const big = capture(store, again, MIB);
    assert.deepEqual(bodyOf(store, big.id), big.body, 'the file grows again from its start');
    assert.equal(internals(store).blocks.blocks, perRecord);
  } finally {
    await store.close();
  }
});
