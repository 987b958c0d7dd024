/**
 * Issue 11, finding 2: a burst of more captures than the ring holds, then a crash before the lazily
 * written head was saved. Reloading walked forward from the stale head, found only slots that had since
 * been overwritten by later laps, and came back with a head far behind the slots: the newest captures
 * were missing from the list (once all but one of them) and new captures reused old request ids.
 *
 * A crash is simulated without killing anything: a second CaptureStore on the same directory loads the
 * ring from what is committed, exactly as a restarted edge would, while the first never saved its head.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { encode } from '../../src/protocol/codec.js';
import { FrameType } from '../../src/protocol/constants.js';
import { CaptureStore, parseCaptureId, type RingHandle, type StoredCapture } from '../../src/store/captures.js';
import { tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-issue-11-ring-');
const RETENTION = 60_000;
const RUNS = Number(process.env.BURROW_RING_RUNS ?? 60);

function capture(ring: RingHandle, seq: number, id: string, path: string): StoredCapture {
  return {
    id, seq, subdomain: ring.subdomain, accountId: ring.accountId, tokenId: 'tok_00000000', clientAddress: '127.0.0.1',
    method: 'POST', path, status: 200, receivedAt: Date.now(), durationMs: 1, error: null, replayOf: null,
    requestBodySize: 0, requestTruncated: false, responseBodySize: 0, responseTruncated: false,
    open: encode([FrameType.OPEN, 1, id, 'POST', path, [], '127.0.0.1', null, true, false]),
    requestHeaders: null, requestBody: null, response: null, responseHeaders: [], responseBody: null,
  };
}

/**
 * Ends a store as a kill -9 would: its LMDB environment closes with what is committed and nothing else
 * (the store's own close() would save its rings' heads). Lets the next open in this process start fresh.
 */
async function crash(store: CaptureStore): Promise<void> {
  await (store as unknown as { root: { close(): Promise<void> } }).root.close();
}

interface Written {
  seq: number;
  id: string;
  path: string;
}

/**
 * Sends `count` requests through the ring in turns of `turn`, as the edge does: a sequence is handed out
 * when a request arrives and its capture committed when it completes. Sequences listed in `inFlight` are
 * handed out and never committed (requests in flight at the crash).
 */
function burst(store: CaptureStore, ring: RingHandle, count: number, turn: number, inFlight: ReadonlySet<number> = new Set()): Written[] {
  const written: Written[] = [];
  let batch: { ring: RingHandle; seq: number; storedCapture(): StoredCapture }[] = [];
  for (let i = 0; i < count; i++) {
    const { seq, id } = ring.next();
    if (inFlight.has(i)) continue;
    const path = `/burst/${seq}`;
    const stored = capture(ring, seq, id, path);
    batch.push({ ring, seq, storedCapture: () => stored });
    written.push({ seq, id, path });
    if (batch.length === turn) {
      store.writeAll(batch);
      batch = [];
    }
  }
  if (batch.length > 0) store.writeAll(batch);
  return written;
}

/** What a restarted edge finds: every one of the ring's newest `capacity` captures, and fresh ids. */
function assertRecovered(dir: string, capacity: number, everWritten: readonly Written[], subdomain: string): void {
  const restarted = CaptureStore.open(dir);
  const listed = restarted.list('usr_a', subdomain, { limit: 1_000, retentionMs: RETENTION })!;
  const newest = Math.max(...everWritten.map((w) => w.seq));
  // The ring's newest `capacity` sequences that were committed, newest first.
  const expected = everWritten.filter((w) => w.seq > newest - capacity).sort((a, b) => b.seq - a.seq).map((w) => w.path);
  assert.deepEqual(listed.map((entry) => entry.path), expected.slice(0, 1_000));
  const newestId = everWritten.find((w) => w.seq === newest)!.id;
  assert.equal(restarted.get('usr_a', newestId, RETENTION)?.path, `/burst/${newest}`);
  const ring = restarted.ring('usr_a', subdomain, capacity);
  const next = ring.next();
  assert.ok(next.seq > newest, `the next sequence ${next.seq} must follow the newest committed ${newest}`);
  assert.ok(!everWritten.some((w) => w.id === next.id));
  assert.equal(parseCaptureId(next.id)?.seq, next.seq);
}

// [name, capacity, head saved after this many requests (null: never), requests after that save, turn size, in flight]
const cases: [string, number, number | null, number, number, number[]][] = [
  ['one more than the ring since the head was saved', 50, 10, 51, 7, []],
  ['half a lap past the ring since the head was saved', 50, 10, 75, 7, []],
  ['one short of two laps', 50, 10, 99, 32, []],
  ['many laps, the head never saved', 50, null, 50 * 7 + 13, 32, []],
  ['many laps in turns of one', 20, 3, 20 * 5 + 4, 1, []],
  ['laps with requests in flight at the crash', 50, 10, 130, 16, [60, 61, 62, 128, 129]],
  ['a FREE ring of 1,000 after a burst of 1,900', 1_000, 100, 1_900, 32, [1_890]],
];

for (const [name, capacity, savedAfter, burstSize, turn, inFlight] of cases) {
  test(`ring head after a crash: ${name}`, () => {
    const dir = freshDir();
    const subdomain = 'wrapped';
    const crashed = CaptureStore.open(dir);
    const ring = crashed.ring('usr_a', subdomain, capacity);
    const written: Written[] = [];
    if (savedAfter !== null) {
      written.push(...burst(crashed, ring, savedAfter, turn));
    }
    written.push(...burst(crashed, ring, burstSize, turn, new Set(inFlight)));
    // The crash: `crashed` is never closed and never saves its head again.
    assertRecovered(dir, capacity, written, subdomain);
  });
}

test('ring head after a crash: twice in a row, each after a burst past the ring', () => {
  const dir = freshDir();
  const capacity = 30;
  const written: Written[] = [];
  for (let life = 0; life < 3; life++) {
    const store = CaptureStore.open(dir);
    const ring = store.ring('usr_a', 'twice', capacity);
    written.push(...burst(store, ring, capacity * 2 + life * 7, 8));
  }
  assertRecovered(dir, capacity, written, 'twice');
});

test('a capture that completes after a newer one took its slot does not overwrite it', () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir);
  const ring = store.ring('usr_a', 'slow-one', 4);
  const slow = ring.next(); // a slow request: its capture commits after four later ones
  const later = burst(store, ring, 4, 4);
  const stored = capture(ring, slow.seq, slow.id, '/slow');
  store.writeAll([{ ring, seq: slow.seq, storedCapture: () => stored }]);
  const listed = store.list('usr_a', 'slow-one', { limit: 10, retentionMs: RETENTION })!;
  assert.deepEqual(listed.map((entry) => entry.id), later.map((w) => w.id).reverse());
  assert.equal(store.get('usr_a', later[3]!.id, RETENTION)?.path, later[3]!.path);
  assert.equal(store.get('usr_a', slow.id, RETENTION), null);
});

/**
 * Any crash: requests arrive and complete out of order over many turns, some never complete, and each
 * life of the process ends in a crash at a random point or in a clean close (every request finished
 * first, as the edge's shutdown does). After the last life the restarted store lists exactly the
 * newest `capacity` committed sequences and hands out only sequences above every committed one.
 */
test('ring head after any crash: random bursts, completions out of order, crashes and clean closes', async () => {
  const life = fc.record({
    arrivals: fc.array(fc.integer({ min: 0, max: 60 }), { minLength: 1, maxLength: 12 }),
    // For each request: how many turns later it completes, or never (in flight at the crash).
    delays: fc.array(fc.option(fc.integer({ min: 0, max: 6 }), { freq: 12, nil: null }), { minLength: 64, maxLength: 64 }),
    end: fc.constantFrom('crash', 'clean close'),
  });
  await fc.assert(
    fc.asyncProperty(fc.oneof(fc.integer({ min: 1, max: 48 }), fc.integer({ min: 257, max: 320 })), fc.array(life, { minLength: 1, maxLength: 3 }), async (capacity, lives) => {
      const dir = freshDir();
      const committed = new Map<number, Written>();
      const committedIds = new Set<string>();
      for (const { arrivals, delays, end } of lives) {
        const store = CaptureStore.open(dir);
        const ring = store.ring('usr_a', 'any-crash', capacity);
        const pending = new Map<number, { ring: RingHandle; seq: number; written: Written; storedCapture(): StoredCapture }[]>();
        let requests = 0;
        const complete = (due: { seq: number; written: Written; ring: RingHandle; storedCapture(): StoredCapture }[]): void => {
          if (due.length === 0) return;
          store.writeAll(due);
          for (const item of due) {
            committed.set(item.seq, item.written);
            committedIds.add(item.written.id);
          }
        };
        arrivals.forEach((count, turn) => {
          for (let i = 0; i < count; i++) {
            const { seq, id } = ring.next();
            assert.ok(!committedIds.has(id), `${id} was handed out again after it was committed`);
            const delay = delays[requests++ % delays.length]!;
            const written = { seq, id, path: `/any/${seq}` };
            const stored = capture(ring, seq, id, written.path);
            // A request that never completes by itself is still running when the life ends.
            const at = delay === null ? Infinity : turn + delay;
            if (!pending.has(at)) pending.set(at, []);
            pending.get(at)!.push({ ring, seq, written, storedCapture: () => stored });
          }
          // Completions within a turn in either order: a newer capture may come first in its batch.
          complete(turn % 2 === 0 ? (pending.get(turn) ?? []) : (pending.get(turn) ?? []).reverse());
          pending.delete(turn);
        });
        if (end === 'clean close') {
          // Requests still running finish (the edge's shutdown waits for them or cuts them, and either
          // way captures them), then the store closes.
          for (const due of pending.values()) complete(due);
          await store.close();
        } else {
          // The crash: whatever has not completed by now never will, and nothing is saved.
          await crash(store);
        }
      }
      if (committed.size === 0) return;
      const everCommitted = [...committed.values()];
      const newest = Math.max(...committed.keys());
      // A late capture does not overwrite a newer one, so the ring holds what the newest `capacity`
      // sequences committed, and nothing older is listed.
      const restarted = CaptureStore.open(dir);
      const listed = restarted.list('usr_a', 'any-crash', { limit: 1_000, retentionMs: RETENTION })!;
      const expected = everCommitted.filter((w) => w.seq > newest - capacity).sort((a, b) => b.seq - a.seq);
      assert.deepEqual(listed.map((entry) => entry.id), expected.map((w) => w.id));
      const next = restarted.ring('usr_a', 'any-crash', capacity).next();
      assert.ok(next.seq > newest);
      await restarted.close();
    }),
    { numRuns: RUNS },
  );
});

test('ring head after a crash in a life that followed a clean close', async () => {
  const dir = freshDir();
  const capacity = 40;
  const first = CaptureStore.open(dir);
  const written = burst(first, first.ring('usr_a', 'after-clean', capacity), 30, 8);
  await first.close();
  // The next life writes past the ring and dies: the head its predecessor saved cleanly is stale now.
  const second = CaptureStore.open(dir);
  written.push(...burst(second, second.ring('usr_a', 'after-clean', capacity), capacity * 3 + 5, 8));
  assertRecovered(dir, capacity, written, 'after-clean');
});

test('a clean close saves the head: sequences handed out before it are never handed out again', async () => {
  const dir = freshDir();
  const store = CaptureStore.open(dir);
  const ring = store.ring('usr_a', 'clean-close', 10);
  burst(store, ring, 3, 3);
  ring.next(); // handed out; its capture was never written (the request failed before capture)
  await store.close();
  const reopened = CaptureStore.open(dir);
  assert.equal(reopened.ring('usr_a', 'clean-close', 10).next().seq, 4);
  await reopened.close();
});
