/**
 * What LMDB costs a big capture by itself (issue 25): a record of `--size` bytes put into a ring of
 * `--ring` slots and committed as the edge commits a turn that holds a big capture (`transactionSync`,
 * `noSync`, `--per` captures a commit), in steady state (after the ring went round twice). Beside it,
 * the floor of the same bytes: `pwrite` into a plain file of the ring's size. CPU µs per capture, user
 * and system.
 *
 * Not a test and not in `npm run bench`: the numbers are in bench/RESULTS.md's tuning log ("one copy
 * each way for big bodies"), against what the same calls cost inside a loaded edge.
 * Run: npx tsc -p . && node dist/bench/store/capture-large.js [--size 65536] [--ring 1000] [--per 1] [--commits 4000]
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { open } from 'lmdb';

const { values } = parseArgs({
  options: {
    size: { type: 'string', default: '65536' },
    ring: { type: 'string', default: '1000' },
    per: { type: 'string', default: '1' },
    commits: { type: 'string', default: '4000' },
  },
});
const size = Number(values.size);
const ring = Number(values.ring);
const per = Number(values.per);
const commits = Number(values.commits);

const dir = mkdtempSync(join(tmpdir(), 'burrow-capture-large-'));
try {
  const root = open({ path: dir, noSubdir: false, maxDbs: 8, compression: false, noSync: true });
  const slots = root.openDB<Buffer, [number, number]>({ name: 'capture-slots', encoding: 'binary' });
  const record = Buffer.alloc(size, 0x61);
  let seq = 0;
  const commit = (): void => {
    root.transactionSync(() => {
      for (let i = 0; i < per; i++) {
        const at = seq++;
        void slots.put([7, at % ring], record);
      }
    });
  };
  for (let i = 0; i < (ring * 2) / per; i++) commit();
  const captures = commits * per;
  let started = process.cpuUsage();
  for (let i = 0; i < commits; i++) commit();
  const lmdb = process.cpuUsage(started);
  await root.close();

  const fd = openSync(join(dir, 'plain'), 'w+');
  for (let i = 0; i < ring; i++) writeSync(fd, record, 0, size, i * size);
  started = process.cpuUsage();
  for (let i = 0; i < captures; i++) writeSync(fd, record, 0, size, (i % ring) * size);
  const plain = process.cpuUsage(started);
  closeSync(fd);

  const row = (name: string, usage: NodeJS.CpuUsage): string =>
    `| ${name} | ${((usage.user + usage.system) / captures).toFixed(1)} | ${(usage.user / captures).toFixed(1)} | ${(usage.system / captures).toFixed(1)} |`;
  console.log(`${size}-byte records, a ring of ${ring}, ${per} a commit, ${captures} captures`);
  console.log('| write | CPU µs a capture | user | system |');
  console.log('| :--- | ---: | ---: | ---: |');
  console.log(row('LMDB put and commit', lmdb));
  console.log(row('pwrite of the same bytes', plain));
} finally {
  rmSync(dir, { recursive: true, force: true });
}
