/**
 * Issue 25: 10,000 idle tunnels took 40 KiB of edge memory each, 39 of them the slot sizes of the
 * tunnel's capture ring (issue 23's quota), one Uint32 per slot from the ring's first open: 40 KB for a
 * PRO ring of 10,000 slots that had captured nothing. Slot sizes are now held only for the slots that
 * were filled. Real LMDB in a temp dir; the memory counted is the array buffers the rings hold
 * (process.memoryUsage().arrayBuffers), not RSS.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { CaptureStore, encodeStoredCapture, type RingHandle } from '../../src/store/captures.js';
import { tempDirs } from '../helpers.js';
import { postCapture } from './capture-fixture.js';

const freshDir = tempDirs('burrow-issue-25-ring-memory-');
const PRO_SLOTS = 10_000;
const RINGS = 500;


setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

function heldArrayBuffers(): number {
  collectGarbage();
  return process.memoryUsage().arrayBuffers;
}

test('an idle tunnel\'s PRO ring (10,000 slots, nothing captured) holds no slot sizes: 500 rings take well under 1 KiB each', () => {
  const store = CaptureStore.open(freshDir());
  try {
    store.ring('usr_warm', 'warm', PRO_SLOTS, 2 ** 31);
    const before = heldArrayBuffers();
    const rings: RingHandle[] = [];
    for (let i = 0; i < RINGS; i++) rings.push(store.ring(`usr_${i % 20}`, `idle-${i}`, PRO_SLOTS, 2 ** 31));
    const perRing = (heldArrayBuffers() - before) / RINGS;
    // One Uint32 per slot from the start was 40,000 bytes per ring.
    assert.ok(perRing < 1_024, `each idle ring holds ${Math.round(perRing)} bytes of array buffers`);
    assert.equal(rings.length, RINGS);
  } finally {
    void store.close();
  }
});

test('slot sizes held only for filled slots still count an account\'s bytes: writes past the held ones, a wrap, a clean restart', async () => {
  const dir = freshDir();
  let store = CaptureStore.open(dir);
  const sizes: number[] = [];
  let ring = store.ring('usr_a', 'grows', 200, 2 ** 31);
  for (let i = 0; i < 300; i++) {
    const { seq, id } = ring.next();
    const stored = postCapture(ring, seq, id, 10 + (i % 7));
    sizes[seq % 200] = encodeStoredCapture(stored).byteLength;
    assert.equal(store.writeAll([{ ring, seq, storedCapture: () => stored }]), 1);
  }
  const total = sizes.reduce((sum, size) => sum + size, 0);
  assert.equal(store.bytesOf('usr_a'), total, 'every slot counted once, the overwritten ones by their newer capture');
  await store.close();

  store = CaptureStore.open(dir);
  try {
    assert.equal(store.bytesOf('usr_a'), total);
    ring = store.ring('usr_a', 'grows', 200, 2 ** 31);
    const { seq, id } = ring.next();
    const stored = postCapture(ring, seq, id, 50);
    store.writeAll([{ ring, seq, storedCapture: () => stored }]);
    assert.equal(store.bytesOf('usr_a'), total - sizes[seq % 200]! + encodeStoredCapture(stored).byteLength, 'the sizes a clean close saved');
  } finally {
    await store.close();
  }
});
