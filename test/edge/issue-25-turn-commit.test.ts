/**
 * Issue 25: the edge's turn journals a turn's captures before their answers go out and commits them to
 * LMDB off the answers' path: a few milliseconds later for many turns together, at once when the queue
 * is large. Real LMDB in a temp dir; the captured exchanges are stand-ins for the public streams (what
 * the turn asks of them is their ring, sequence, stored capture and `afterCapture`).
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { COMMIT_DELAY_MS, COMMIT_QUEUE_CAPTURES, Turn, type Captured } from '../../src/edge/turn.js';
import { CaptureStore, type RingHandle, type StoredCapture } from '../../src/store/captures.js';
import { tempDirs } from '../helpers.js';
import { postCapture } from '../store/capture-fixture.js';

const freshDir = tempDirs('burrow-issue-25-turn-');

class Exchange implements Captured {
  answered = false;
  readonly seq: number;
  private readonly stored: StoredCapture;

  constructor(readonly ring: RingHandle) {
    const { seq, id } = ring.next();
    this.seq = seq;
    this.stored = postCapture(ring, seq, id, 0);
  }

  storedCapture(): StoredCapture {
    return this.stored;
  }

  afterCapture(): void {
    this.answered = true;
  }
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('issue 25: a turn journals its captures before the answers and commits them within COMMIT_DELAY_MS, many turns in one commit', async () => {
  const store = CaptureStore.open(freshDir());
  const commits: number[] = [];
  const turn = new Turn(store, () => {}, (captures) => commits.push(captures));
  try {
    const ring = store.ring('usr_turn', 'turn', 1_000, Infinity);
    const first = new Exchange(ring);
    turn.capture(first);
    await nextTurn();
    assert.ok(first.answered, 'answered in its turn');
    assert.equal(store.queuedCaptures, 1, 'journaled, its commit still to come');
    const second = new Exchange(ring);
    turn.capture(second);
    await nextTurn();
    assert.ok(second.answered);
    assert.equal(store.queuedCaptures, 2);
    assert.deepEqual(commits, []);
    await sleep(COMMIT_DELAY_MS * 4);
    assert.equal(store.queuedCaptures, 0, 'committed without anyone reading');
    assert.deepEqual(commits, [2], 'both turns in one commit, told to the metrics');
  } finally {
    await store.close();
  }
});

test('issue 25: past COMMIT_QUEUE_CAPTURES the turn commits at once', async () => {
  const store = CaptureStore.open(freshDir());
  const commits: number[] = [];
  const turn = new Turn(store, () => {}, (captures) => commits.push(captures));
  try {
    const ring = store.ring('usr_turn', 'turn', 1_000, Infinity);
    for (let i = 0; i < COMMIT_QUEUE_CAPTURES; i++) turn.capture(new Exchange(ring));
    await nextTurn();
    assert.equal(store.queuedCaptures, 0);
    assert.deepEqual(commits, [COMMIT_QUEUE_CAPTURES]);
  } finally {
    await store.close();
  }
});

test('issue 25: with --capture-fsync a turn commits before the answers, as before the journal', async () => {
  const store = CaptureStore.open(freshDir(), { fsync: true });
  const turn = new Turn(store, () => {}, null);
  try {
    const ring = store.ring('usr_turn', 'turn', 1_000, Infinity);
    const exchange = new Exchange(ring);
    turn.capture(exchange);
    await nextTurn();
    assert.ok(exchange.answered);
    assert.equal(store.list('usr_turn', 'turn', { limit: 10, retentionMs: 60_000 })?.length, 1);
  } finally {
    await store.close();
  }
});
