/**
 * What a turn's journal write costs (issue 25): `--per` captures of `--size` bytes written by
 * `CaptureJournal.append` and committed every `--commit-every` turns (a new lap), against the layout before
 * it in the same run: the same records appended to a file that a truncate empties once it passes 4 MiB.
 * Rounds alternate the two; CPU µs per turn, user and system, from `process.cpuUsage`.
 *
 * Not a test and not in `npm run bench`: the figures are in bench/RESULTS.md's tuning log ("the
 * journal written in laps").
 * Run: npx tsc -p . && node dist/bench/store/capture-journal.js [--size 2600] [--per 10] [--commit-every 8] [--turns 3000] [--rounds 5] [--dir DIR]
 */
import { closeSync, ftruncateSync, mkdtempSync, openSync, rmSync, writevSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CaptureJournal, type JournalRecord } from '../../src/store/capture-journal.js';

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '2600' },
    per: { type: 'string', default: '10' },
    'commit-every': { type: 'string', default: '8' },
    turns: { type: 'string', default: '3000' },
    rounds: { type: 'string', default: '5' },
    dir: { type: 'string', default: tmpdir() },
  },
});
const size = Number(values.size);
const per = Number(values.per);
const commitEvery = Number(values['commit-every']);
const turns = Number(values.turns);
const rounds = Number(values.rounds);

const dir = mkdtempSync(join(values.dir, 'burrow-capture-journal-'));
try {
  const records: JournalRecord[] = Array.from({ length: per }, (_, i) => ({ ringId: 7, seq: i, bytes: Buffer.alloc(size, 0x61) }));

  const journal = new CaptureJournal(join(dir, 'journal-v2'));
  let turn = 0;
  const laps = (): void => {
    journal.append(records);
    if (++turn % commitEvery === 0) journal.committed();
  };

  // The layout before: [u32 length][u32 ring][f64 seq] records appended with writev, emptied by a
  // truncate after a commit once the file passed 4 MiB.
  const appended = openSync(join(dir, 'journal'), 'a', 0o600);
  const headers = Buffer.alloc(16 * per);
  const parts: Buffer[] = [];
  for (let i = 0; i < per; i++) parts.push(headers.subarray(i * 16, i * 16 + 16), records[i]!.bytes);
  let appendedSize = 0;
  let appendedTurn = 0;
  const append = (): void => {
    for (let i = 0; i < per; i++) {
      headers.writeUInt32LE(12 + size, i * 16);
      headers.writeUInt32LE(7, i * 16 + 4);
      headers.writeDoubleLE(i, i * 16 + 8);
    }
    appendedSize += writevSync(appended, parts);
    if (++appendedTurn % commitEvery === 0 && appendedSize >= 4 * 1024 * 1024) {
      ftruncateSync(appended, 0);
      appendedSize = 0;
    }
  };

  const measure = (write: () => void): NodeJS.CpuUsage => {
    const started = process.cpuUsage();
    for (let i = 0; i < turns; i++) write();
    return process.cpuUsage(started);
  };
  // Warm both files (the appended one to its truncation size) before measuring.
  for (let i = 0; i < (4 * 1024 * 1024) / (size * per) + commitEvery; i++) {
    laps();
    append();
  }

  const row = (name: string, round: number, usage: NodeJS.CpuUsage): string =>
    `| ${round} | ${name} | ${((usage.user + usage.system) / turns).toFixed(1)} | ${(usage.user / turns).toFixed(1)} | ${(usage.system / turns).toFixed(1)} |`;
  console.log(`${per} captures of ${size} B a turn, a commit every ${commitEvery} turns, ${turns} turns a round, files in ${values.dir}\n`);
  console.log('| round | journal | CPU µs/turn | user | system |');
  console.log('| ---: | :--- | ---: | ---: | ---: |');
  for (let round = 1; round <= rounds; round++) {
    console.log(row('appended, truncated past 4 MiB (before)', round, measure(append)));
    console.log(row('written in laps', round, measure(laps)));
  }
  journal.close();
  closeSync(appended);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
