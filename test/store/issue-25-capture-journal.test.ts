/**
 * Issue 25: an answer no longer waits for its capture's LMDB commit (50-90 µs of the edge's time at one
 * connection). The capture goes to the capture journal first, in one write(), the answer goes out, and
 * the commit follows in the same turn. "Nothing lost" must hold all the same: a capture journaled and
 * never committed (a kill -9 in between) is written at the next start. Real LMDB in temp dirs, the
 * crash a real SIGKILL of a child process, the full disk a real loop-mounted file system.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { readJournal } from '../../src/store/capture-journal.js';
import { CaptureStore, encodeStoredCapture, expandCapture, JOURNAL_FILE, JOURNAL_MAX_CAPTURE_BYTES, type CaptureToStore, type PendingCapture, type RingHandle } from '../../src/store/captures.js';
import { tempDirs } from '../helpers.js';
import { legacyJournal, postCapture } from './capture-fixture.js';
import { loopFs } from '../loop-fs.js';

const freshDir = tempDirs('burrow-issue-25-journal-');
const ACCOUNT = 'usr_journal';
const SUBDOMAIN = 'journaled';

/** Takes `count` sequences of the ring and hands their captures over as the edge's turn does. */
function pending(ring: RingHandle, count: number, bodySize: number): PendingCapture[] {
  const batch: PendingCapture[] = [];
  for (let i = 0; i < count; i++) {
    const { seq, id } = ring.next();
    const stored = postCapture(ring, seq, id, bodySize);
    batch.push({ ring, seq, storedCapture: () => stored });
  }
  return batch;
}

function listedPaths(store: CaptureStore): string[] {
  return (store.list(ACCOUNT, SUBDOMAIN, { limit: 100, retentionMs: 3_600_000 }) ?? []).map((entry) => entry.path);
}

/** How many captures the journal in `dir` holds: what a start would replay. */
function journaled(dir: string): number {
  return readJournal(readFileSync(join(dir, JOURNAL_FILE))).records.length;
}

/**
 * A process that opens the store in `dir`, commits `committed` captures, journals `journaled` more
 * without committing them, and is killed with SIGKILL: what an edge killed between a turn's answers and
 * its commit leaves. Returns the bytes of every capture it wrote or journaled.
 */
function crashAfterJournal(dir: string, committed: number, journaled: number, bodySize = 100): number {
  const module = (path: string): string => JSON.stringify(new URL(path, import.meta.url).href);
  const script = `
    const { CaptureStore, encodeStoredCapture } = await import(${module('../../src/store/captures.js')});
    const { postCapture } = await import(${module('./capture-fixture.js')});
    const store = CaptureStore.open(${JSON.stringify(dir)});
    const ring = store.ring(${JSON.stringify(ACCOUNT)}, ${JSON.stringify(SUBDOMAIN)}, 50, Infinity);
    const take = (count) => {
      const batch = [];
      for (let i = 0; i < count; i++) {
        const { seq, id } = ring.next();
        const stored = postCapture(ring, seq, id, ${bodySize});
        batch.push({ ring, seq, storedCapture: () => stored });
      }
      return batch;
    };
    const committed = take(${committed});
    store.journalAll(committed);
    store.commitQueued();
    const journaled = take(${journaled});
    store.journalAll(journaled);
    // Pipes are written synchronously on Linux: the sizes are out before the kill.
    process.stdout.write(JSON.stringify([...committed, ...journaled].map((item) => encodeStoredCapture(item.storedCapture()).byteLength)));
    process.kill(process.pid, 'SIGKILL');
  `;
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(child.signal, 'SIGKILL', child.stderr);
  return (JSON.parse(child.stdout) as number[]).reduce((total, size) => total + size, 0);
}

test('issue 25: a capture journaled and never committed (kill -9 between the answer and the commit) is written at the next start', async () => {
  const dir = freshDir();
  const bytes = crashAfterJournal(dir, 2, 3);
  assert.equal(journaled(dir), 3, 'the journal holds the captures journaled since the last commit');
  const store = CaptureStore.open(dir);
  try {
    assert.deepEqual(listedPaths(store), ['/q/4', '/q/3', '/q/2', '/q/1', '/q/0'], 'committed and journaled captures alike, newest first');
    assert.equal(statSync(join(dir, JOURNAL_FILE)).size, 0, 'the replayed journal is emptied');
    const ring = store.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
    assert.equal(ring.next().seq, 5, 'no journaled id is handed out again');
    assert.equal(store.bytesOf(ACCOUNT), bytes, 'each capture counted once against the quota, the replayed ones included');
  } finally {
    await store.close();
  }
});

test('issue 25: a journal from before the laps is replayed, skipping what LMDB already holds and stopping at a record cut short, then removed', async () => {
  const dir = freshDir();
  const bytes = crashAfterJournal(dir, 0, 3);
  const records = readJournal(readFileSync(join(dir, JOURNAL_FILE))).records;
  assert.equal(records.length, 3);
  // The three records in the layout of before (appended, no batches), the first once more (its slot
  // holds it by then), and one cut short, as a write the kill interrupted would leave it; the journal of
  // now holds nothing.
  const legacy = legacyJournal([...records, records[0]!]);
  writeFileSync(join(dir, 'journal'), Buffer.concat([legacy, legacy.subarray(0, 40)]));
  writeFileSync(join(dir, JOURNAL_FILE), '');
  const store = CaptureStore.open(dir);
  try {
    assert.deepEqual(listedPaths(store), ['/q/2', '/q/1', '/q/0']);
    assert.equal(store.bytesOf(ACCOUNT), bytes, 'each capture counted once');
    assert.equal(existsSync(join(dir, 'journal')), false, 'the old journal is gone once replayed');
    assert.equal(journaled(dir), 0);
  } finally {
    await store.close();
  }
});

test('issue 25: a commit starts the journal over (it holds nothing after it, and its file stays as large as one lap needs); a clean close empties it', async () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir);
  const journalPath = join(dir, JOURNAL_FILE);
  const ring = store.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
  store.journalAll(pending(ring, 3, 1_000));
  assert.equal(journaled(dir), 3);
  store.commitQueued();
  assert.equal(journaled(dir), 0, 'committed: nothing to replay');
  const lap = statSync(journalPath).size;
  for (let i = 0; i < 10; i++) {
    store.journalAll(pending(ring, 3, 1_000));
    assert.equal(journaled(dir), 3);
    store.commitQueued();
  }
  assert.ok(statSync(journalPath).size < 1.1 * lap, `each lap is written over the one before (${statSync(journalPath).size} bytes after 11 laps of ~${lap})`);
  store.journalAll(pending(ring, 1, 1_000));
  assert.equal(journaled(dir), 1);
  await store.close();
  assert.equal(statSync(journalPath).size, 0, 'a clean close leaves nothing to replay');
  const again = CaptureStore.open(dir);
  try {
    assert.equal(listedPaths(again).length, 34);
  } finally {
    await again.close();
  }
});

test('issue 25: a turn that does not fit in the journal\'s lap commits what waits first; one larger than a whole lap is committed before its answers', async () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir, { journalCapacity: 4_000 });
  try {
    const ring = store.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
    assert.equal(store.journalAll(pending(ring, 2, 1_000)), false);
    assert.equal(store.queuedCaptures, 2);
    assert.equal(store.journalAll(pending(ring, 2, 1_000)), false, 'journaled after a commit of the two before');
    assert.equal(store.queuedCaptures, 2, 'the first two were committed to make room');
    assert.equal(journaled(dir), 2);
    assert.equal(store.journalAll(pending(ring, 4, 2_000)), true, 'more than a lap holds: to be committed at once');
    assert.equal(journaled(dir), 2, 'and not journaled');
    assert.equal(store.commitQueued(), 6, 'in one commit with the two that waited');
    assert.equal(listedPaths(store).length, 8);
  } finally {
    await store.close();
  }
});

test('issue 25: with --capture-fsync there is no journal: a commit is the durable step', async () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir, { fsync: true });
  try {
    assert.equal(store.journaling, false);
    assert.equal(existsSync(join(dir, JOURNAL_FILE)), false);
    const ring = store.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
    assert.equal(store.writeAll(pending(ring, 1, 10)), 1);
  } finally {
    await store.close();
  }
});

/**
 * On a loop-mounted file system: one capture committed and two journaled when the process died (30 KB
 * each: a capture of 64 KiB or more would not be journaled), then the disk filled. Null (the test skipped) where no loop file system can be made.
 */
function crashedThenFull(t: { skip(message: string): void }): { dir: string; makeRoom(): void } | null {
  const disk = loopFs(32);
  if (typeof disk === 'string') {
    t.skip(disk);
    return null;
  }
  const dir = join(disk.dir, 'captures');
  mkdirSync(dir);
  crashAfterJournal(dir, 1, 2, 30_000);
  disk.fill();
  return { dir, makeRoom: () => rmSync(join(disk.dir, 'filler')) };
}

test('issue 25: a replay on a full disk keeps the journal and hands out none of its ids; with space back the next start writes it', async (t) => {
  const scene = crashedThenFull(t);
  if (scene === null) return;
  const { dir } = scene;
  const full = CaptureStore.open(dir);
  try {
    assert.equal(full.failures.count('captures'), 1, 'the replay\'s commit failed, and was reported');
    assert.deepEqual(listedPaths(full), ['/q/0'], 'only what was committed before');
    const ring = full.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
    assert.equal(ring.next().seq, 3, 'the journaled sequences are not handed out again');
  } finally {
    await full.close();
  }
  assert.equal(journaled(dir), 2, 'a clean close keeps a journal that was not replayed');
  scene.makeRoom();
  const later = CaptureStore.open(dir);
  try {
    assert.deepEqual(listedPaths(later), ['/q/2', '/q/1', '/q/0'], 'replayed once there is room');
  } finally {
    await later.close();
  }
});

test('issue 25: after a failed replay, the first commit with room again writes what the journal holds and empties it (it does not grow until a restart)', async (t) => {
  const scene = crashedThenFull(t);
  if (scene === null) return;
  const { dir } = scene;
  const store = CaptureStore.open(dir);
  try {
    assert.deepEqual(listedPaths(store), ['/q/0']);
    const ring = store.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
    scene.makeRoom();
    store.journalAll(pending(ring, 1, 10));
    store.commitQueued();
    assert.deepEqual(listedPaths(store), ['/q/3', '/q/2', '/q/1', '/q/0'], 'the journaled captures, and the new one');
    assert.equal(statSync(join(dir, JOURNAL_FILE)).size, 0, 'the journal is emptied again');
  } finally {
    await store.close();
  }
});

test('issue 25: a read of the store commits the journaled captures first: it never misses one whose answer went out', async () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir);
  try {
    const ring = store.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
    const batch = pending(ring, 3, 10);
    store.journalAll(batch);
    assert.equal(store.queuedCaptures, 3, 'queued, not committed');
    assert.deepEqual(listedPaths(store), ['/q/2', '/q/1', '/q/0'], 'a list finds them');
    assert.equal(store.queuedCaptures, 0);
    const got = pending(ring, 1, 10);
    store.journalAll(got);
    assert.equal(store.get(ACCOUNT, got[0]!.storedCapture().id, 3_600_000)?.path, '/q/3', 'so does a get');
    store.journalAll(pending(ring, 1, 10));
    assert.equal(store.search(ACCOUNT, SUBDOMAIN, '/q/4', { limit: 10, maxScanned: 100, maxBodyBytes: 1_000_000, retentionMs: 3_600_000 })?.matches.length, 1, 'and a search');
  } finally {
    await store.close();
  }
});

test('issue 25: a turn holding a large capture is not journaled (its body would be written twice): the caller is told to commit it at once', async () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir);
  try {
    const ring = store.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
    assert.equal(store.journalAll(pending(ring, 1, 1_000)), false, 'a small turn is journaled');
    assert.equal(journaled(dir), 1);
    assert.equal(store.journalAll(pending(ring, 1, JOURNAL_MAX_CAPTURE_BYTES)), true, 'a large one is to be committed now');
    assert.equal(journaled(dir), 1, 'and is not in the journal');
    assert.equal(store.queuedCaptures, 2, 'both wait in the queue for that commit');
    assert.equal(store.commitQueued(), 2);
    assert.deepEqual(listedPaths(store), ['/q/1', '/q/0']);
    // Small captures stay journaled, however many bytes they make together.
    assert.equal(store.journalAll(pending(ring, 2, JOURNAL_MAX_CAPTURE_BYTES / 2)), false);
    assert.equal(journaled(dir), 2, 'in the journal');
    store.commitQueued();
  } finally {
    await store.close();
  }
  const again = CaptureStore.open(dir);
  try {
    assert.deepEqual(listedPaths(again), ['/q/3', '/q/2', '/q/1', '/q/0']);
  } finally {
    await again.close();
  }
});

/** `count` captures of `size`-byte bodies, each filled with its own letter from `letters`. */
function lettered(ring: RingHandle, letters: string, size: number): PendingCapture[] {
  return [...letters].map((letter) => {
    const { seq, id } = ring.next();
    const stored = { ...postCapture(ring, seq, id, size), requestBody: Buffer.alloc(size, letter) };
    return { ring, seq, storedCapture: () => stored };
  });
}

test('issue 25: the records of turns committed at once share one arena, and every capture reads back as it was; a turn queued behind an uncommitted one gets buffers of its own', async () => {
  const store = CaptureStore.open(freshDir());
  try {
    const ring = store.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
    const size = JOURNAL_MAX_CAPTURE_BYTES + 1_000;
    const turns: [PendingCapture[], string][] = [];
    // Two turns, each committed before the next: the second's records are encoded where the first's were.
    for (const letters of ['ab', 'cd']) {
      const batch = lettered(ring, letters, size);
      assert.equal(store.journalAll(batch), true);
      assert.equal(store.commitQueued(), 2);
      turns.push([batch, letters]);
    }
    // A caller that does not commit a commit-now turn before the next one: the arena is still in use.
    const late = lettered(ring, 'ef', size);
    assert.equal(store.journalAll(late), true);
    const next = lettered(ring, 'gh', size);
    assert.equal(store.journalAll(next), true);
    assert.equal(store.commitQueued(), 4);
    turns.push([late, 'ef'], [next, 'gh']);
    for (const [batch, letters] of turns) {
      for (let i = 0; i < batch.length; i++) {
        const captured = store.get(ACCOUNT, batch[i]!.storedCapture().id, 60_000);
        assert.ok(captured !== null);
        assert.ok(Buffer.alloc(size, letters[i]!).equals(captured.requestBody ?? Buffer.alloc(0)), `the body of ${letters[i]} is whole and its own`);
      }
    }
  } finally {
    await store.close();
  }
});

test('issue 25: a body handed over in the chunks it arrived in is stored as one, byte for byte', async () => {
  const store = CaptureStore.open(freshDir());
  try {
    const ring = store.ring(ACCOUNT, SUBDOMAIN, 50, Infinity);
    const chunks = [Buffer.alloc(70_000, 0x61), Buffer.from('middle'), Buffer.alloc(3, 0x7a)];
    const { seq, id } = ring.next();
    const whole = postCapture(ring, seq, id, 0);
    const inChunks: CaptureToStore = { ...whole, requestBody: chunks, requestBodySize: 70_009, responseBody: [Buffer.from('one chunk')], responseBodySize: 9 };
    const joined: CaptureToStore = { ...inChunks, requestBody: Buffer.concat(chunks), responseBody: Buffer.from('one chunk') };
    assert.deepEqual(encodeStoredCapture(inChunks), encodeStoredCapture(joined), 'the same record as from one buffer');
    assert.deepEqual(expandCapture(inChunks).requestBody, Buffer.concat(chunks), 'a reader of the uncommitted capture (a replay) gets it whole');
    if (store.journalAll([{ ring, seq, storedCapture: () => inChunks }])) store.commitQueued();
    const read = store.get(ACCOUNT, id, 3_600_000);
    assert.ok(read !== null);
    assert.deepEqual(read.requestBody, Buffer.concat(chunks));
    assert.deepEqual(read.responseBody, Buffer.from('one chunk'));
  } finally {
    await store.close();
  }
});
