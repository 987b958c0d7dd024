/**
 * The capture journal's file on its own (src/store/capture-journal.ts): batches written in laps from
 * offset 0, read back exactly as far as they are whole and of the current lap. The crash cases are the
 * bytes a killed write and an older lap leave in a real file; the store's replay of them is
 * test/store/issue-25-capture-journal.test.ts.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import fc from 'fast-check';
import { batchSize, CaptureJournal, readJournal, readLegacyJournal, type JournalRecord } from '../../src/store/capture-journal.js';
import { tempDirs } from '../helpers.js';
import { legacyJournal } from './capture-fixture.js';

const freshDir = tempDirs('burrow-capture-journal-');

function record(ringId: number, seq: number, size: number, fill = seq & 0xff): JournalRecord {
  return { ringId, seq, bytes: Buffer.alloc(size, fill) };
}

function summary(records: readonly JournalRecord[]): string[] {
  return records.map((r) => `${r.ringId}/${r.seq}/${r.bytes.byteLength}/${r.bytes[0] ?? ''}`);
}

test('capture journal: batches read back in order; a commit starts a new lap that hides the one before, written over it', () => {
  const dir = freshDir();
  const path = join(dir, 'journal-v2');
  const journal = new CaptureJournal(path);
  try {
    journal.append([record(1, 0, 100), record(2, 5, 0)]);
    journal.append([record(1, 1, 3_000)]);
    assert.deepEqual(summary(journal.existing()), ['1/0/100/0', '2/5/0/', '1/1/3000/1']);
    const firstLap = statSync(path).size;
    assert.equal(firstLap, batchSize([record(1, 0, 100), record(2, 5, 0)]) + batchSize([record(1, 1, 3_000)]));
    journal.committed();
    assert.deepEqual(journal.existing(), [], 'everything was committed');
    assert.equal(statSync(path).size, firstLap, 'written over, not appended');
    // Ends where the older lap's second batch begins (the new lap's empty first batch and this one take
    // what its first batch took): that batch is whole, and of another lap.
    journal.append([record(3, 9, 80)]);
    assert.equal(batchSize([]) + batchSize([record(3, 9, 80)]), batchSize([record(1, 0, 100), record(2, 5, 0)]));
    assert.deepEqual(summary(journal.existing()), ['3/9/80/9'], 'the older lap\'s bytes after it are not read');
    assert.deepEqual(summary(readJournal(readFileSync(path)).records), ['3/9/80/9']);
  } finally {
    journal.close();
  }
  // A new life continues the lap it finds, and cuts off what lies past it.
  const again = new CaptureJournal(path);
  try {
    assert.deepEqual(summary(again.existing()), ['3/9/80/9']);
    assert.equal(statSync(path).size, batchSize([]) + batchSize([record(3, 9, 80)]));
    again.append([record(3, 10, 10)]);
    assert.deepEqual(summary(again.existing()), ['3/9/80/9', '3/10/10/10']);
    again.empty();
    assert.equal(statSync(path).size, 0);
    assert.deepEqual(again.existing(), []);
  } finally {
    again.close();
  }
});

test('capture journal: a batch cut anywhere (a write a kill interrupted) is not read, and nothing after it is', () => {
  fc.assert(
    fc.property(
      fc.array(fc.array(fc.nat(300), { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 4 }),
      fc.nat(),
      fc.boolean(),
      (batches, cutSeed, afterCommit) => {
        const dir = freshDir();
        const path = join(dir, 'journal-v2');
        const journal = new CaptureJournal(path);
        let seq = 0;
        const whole: string[] = [];
        if (afterCommit) {
          // An older, longer lap under the new one: its bytes must never be read with it.
          for (let i = 0; i < 5; i++) journal.append([record(7, 1000 + i, 400)]);
          journal.committed();
        }
        const ends: number[] = [];
        let prior = Buffer.alloc(0);
        for (const sizes of batches) {
          const records = sizes.map((size) => record(1, seq++, size));
          prior = readFileSync(path);
          journal.append(records);
          whole.push(...summary(records));
          ends.push((ends.at(-1) ?? (afterCommit ? batchSize([]) : 0)) + batchSize(records));
        }
        journal.close();
        const bytes = readFileSync(path);
        const end = ends.at(-1)!;
        const lastStart = ends.length > 1 ? ends.at(-2)! : afterCommit ? batchSize([]) : 0;
        // Cut inside the last batch: from the cut on, the file holds what it held before that write (the
        // older lap, or nothing).
        const cut = lastStart + (cutSeed % (end - lastStart));
        const torn = Buffer.concat([bytes.subarray(0, cut), prior.subarray(Math.min(cut, prior.byteLength))]);
        const lastCount = batches.at(-1)!.length;
        assert.deepEqual(summary(readJournal(torn).records), whole.slice(0, whole.length - lastCount));
        assert.deepEqual(summary(readJournal(bytes).records), whole);
      },
    ),
    { numRuns: 200 },
  );
});

test('capture journal: a new life cuts off what follows the lap it continues, so a later, shorter batch is never read with it', () => {
  const dir = freshDir();
  const path = join(dir, 'journal-v2');
  const first = new CaptureJournal(path);
  first.append([record(1, 0, 10)]);
  first.append([record(1, 1, 2_000)]);
  first.close();
  // The second batch cut short by a kill.
  const size = statSync(path).size;
  truncateSync(path, size - 5);
  const second = new CaptureJournal(path);
  try {
    assert.deepEqual(summary(second.existing()), ['1/0/10/0']);
    assert.equal(statSync(path).size, batchSize([record(1, 0, 10)]), 'the cut batch is gone from the file');
    second.append([record(1, 2, 1)]);
    assert.deepEqual(summary(second.existing()), ['1/0/10/0', '1/2/1/2']);
  } finally {
    second.close();
  }
  // A file holding no whole batch at all starts empty.
  writeFileSync(path, Buffer.alloc(100, 0x42));
  const third = new CaptureJournal(path);
  try {
    assert.deepEqual(third.existing(), []);
    assert.equal(statSync(path).size, 0);
  } finally {
    third.close();
  }
});

test('capture journal: a batch that does not fit is refused before anything is written', () => {
  const dir = freshDir();
  const path = join(dir, 'journal-v2');
  const journal = new CaptureJournal(path, null, 1_000);
  try {
    assert.equal(journal.fits(batchSize([record(1, 0, 900)])), true);
    journal.append([record(1, 0, 900)]);
    assert.equal(journal.fits(batchSize([record(1, 1, 100)])), false);
    assert.throws(() => journal.append([record(1, 1, 100)]), /does not fit/);
    assert.deepEqual(summary(journal.existing()), ['1/0/900/0']);
    journal.committed();
    assert.equal(journal.fits(batchSize([record(1, 1, 100)])), true, 'a new lap has the room again');
  } finally {
    journal.close();
  }
});

test('capture journal: the records of a journal from before the laps are read first, and its file removed when the journal is emptied', () => {
  const dir = freshDir();
  const legacyPath = join(dir, 'journal');
  const legacy = [record(4, 1, 20), record(4, 2, 30)];
  const bytes = legacyJournal(legacy);
  writeFileSync(legacyPath, Buffer.concat([bytes, bytes.subarray(0, 20)]));
  assert.deepEqual(summary(readLegacyJournal(readFileSync(legacyPath))), summary(legacy), 'a record cut short ends it');
  const journal = new CaptureJournal(join(dir, 'journal-v2'), legacyPath);
  try {
    journal.append([record(4, 3, 5)]);
    assert.deepEqual(summary(journal.existing()), [...summary(legacy), '4/3/5/3']);
    journal.empty();
    assert.equal(existsSync(legacyPath), false);
    assert.deepEqual(journal.existing(), []);
  } finally {
    journal.close();
  }
  // Without one, nothing is read and nothing removed.
  const plain = new CaptureJournal(join(dir, 'other'), join(dir, 'absent'));
  try {
    assert.deepEqual(plain.existing(), []);
  } finally {
    plain.close();
  }
});
