/**
 * What writing captures without a writable memory map costs (issue 23, finding 1): the capture
 * environment's commit as the edge makes it (`transactionSync`, `noSync`), with `useWritemap` (the old
 * setting, which let a full disk kill the edge with SIGBUS) and without it (the setting now), alternated
 * commit by commit so both see the same machine load; and without it plus what the capture quota adds
 * to a commit (one account counter put). Each commit writes captures shaped like
 * bench/store/capture.bench.ts's (a webhook with 1 KiB each way, ~1.6 KiB stored) into a ring of 10,000
 * slots, in turns of 1, 10 and 100 captures. Prints the median and mean per commit and per capture.
 *
 * Not a test and not in `npm run bench`: the numbers are in docs/architecture.md ("Capture durability").
 * Run: npx tsc -p . && node dist/bench/store/capture-writemap.js [--commits N]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { open, type Database, type RootDatabase } from 'lmdb';

const { values } = parseArgs({ options: { commits: { type: 'string', default: '20000' } } });
const commits = Number(values.commits);
const RING = 10_000;
const record = Buffer.alloc(1_650, 0x61);

interface Target {
  name: string;
  root: RootDatabase;
  slots: Database<Buffer, [number, number]>;
  /** The account counter the quota keeps, when measured. */
  counter: Database<number, string> | null;
  seq: number;
  samples: number[];
}

const dirs: string[] = [];
function target(name: string, useWritemap: boolean, counted = false): Target {
  const dir = mkdtempSync(join(tmpdir(), 'burrow-writemap-bench-'));
  dirs.push(dir);
  const root = open({ path: dir, noSubdir: false, maxDbs: 8, compression: false, noSync: true, useWritemap });
  const counter = counted ? root.openDB<number, string>({ name: 'capture-account-bytes', encoding: 'msgpack' }) : null;
  return { name, root, slots: root.openDB({ name: 'capture-slots', encoding: 'binary' }), counter, seq: 0, samples: [] };
}

function commit(t: Target, batch: number): void {
  const started = performance.now();
  t.root.transactionSync(() => {
    for (let i = 0; i < batch; i++) t.slots.put([1, t.seq++ % RING], record);
    t.counter?.put('usr_0123456789abcdef', t.seq * record.byteLength);
  });
  t.samples.push((performance.now() - started) * 1000);
}

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
}

const rows: string[] = [];
for (const batch of [1, 10, 100]) {
  const before = target('useWritemap (before)', true);
  const after = target('no write map', false);
  const counted = target('no write map + quota counter (now)', false, true);
  // Fill each ring once so every measured commit overwrites a slot, as a ring in use does.
  for (const t of [before, after, counted]) {
    while (t.seq < RING) commit(t, 100);
    t.samples = [];
  }
  const count = Math.max(200, Math.round(commits / batch));
  for (let i = 0; i < count; i++) {
    commit(before, batch);
    commit(after, batch);
    commit(counted, batch);
  }
  for (const t of [before, after, counted]) {
    const mean = t.samples.reduce((sum, value) => sum + value, 0) / t.samples.length;
    rows.push(
      `| ${batch} | ${t.name} | ${median(t.samples).toFixed(1)} | ${mean.toFixed(1)} | ${(median(t.samples) / batch).toFixed(2)} | ${t.samples.length} |`,
    );
    t.root.close();
  }
}
process.stdout.write('| captures per commit | environment | median µs per commit | mean µs | median µs per capture | commits |\n|---|---|---|---|---|---|\n');
process.stdout.write(`${rows.join('\n')}\n`);
for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
