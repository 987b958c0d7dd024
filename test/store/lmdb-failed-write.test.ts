/**
 * lmdb-js 3.5.6 overflows a heap block when one of LMDB's page writes fails (src/store/lmdb-native.ts):
 * a commit on a full disk then aborted the process with a glibc heap corruption in 29-30 of 30 runs.
 * Install mends the prebuilt binary. These tests check that the binary this process loads is the
 * mended one, that mending touches only the builds it knows, and, on a real loop-mounted full disk,
 * that a failed commit is an error the caller catches and the process goes on to a clean exit.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import { KNOWN_LMDB_BINARIES, lmdbBinaryPath, lmdbBinaryState, lmdbBinaryWarning, mendLmdbBinaries } from '../../src/store/lmdb-native.js';
import { tempDirs } from '../helpers.js';
import { loopFs } from '../loop-fs.js';

const freshDir = tempDirs('burrow-lmdb-native-');
const binary = lmdbBinaryPath();
const known = process.platform === 'linux' && process.arch === 'x64' && binary !== null ? null : `lmdb's mended builds are linux-x64 only (this is ${process.platform}-${process.arch})`;

test('the lmdb binary this process loads is the mended build', { skip: known ?? false }, () => {
  assert.equal(lmdbBinaryState(binary!), 'mended', `${binary} is not mended: run npm ci (scripts/prepare.mjs)`);
});

test('mending rewrites a published build, is idempotent, keeps the file mode, and leaves unknown files alone', { skip: known ?? false }, () => {
  const dir = freshDir();
  const file = join(dir, basename(binary!));
  // The published build is the mended one with its five bytes put back: undo the mend on a copy.
  const mended = readFileSync(binary!);
  const { offset } = KNOWN_LMDB_BINARIES.find((entry) => entry.file === basename(binary!))!;
  assert.deepEqual([...mended.subarray(offset, offset + 5)], [0xbf, 0x00, 0x01, 0x00, 0x00], 'mov edi, 256 where the table says');
  const published = Buffer.from(mended);
  published[offset + 1] = 0x64;
  published[offset + 2] = 0x00;
  writeFileSync(file, published);
  chmodSync(file, 0o750);
  assert.equal(lmdbBinaryState(file), 'published');
  assert.match(lmdbBinaryWarning(file) ?? '', /is the published build, not mended: .*reinstall with `npm ci`/, 'what the edge says at start');

  const first = mendLmdbBinaries(dir);
  assert.deepEqual(first, [{ path: file, before: 'published', after: 'mended' }]);
  assert.ok(readFileSync(file).equals(mended), 'byte for byte the installed mended build');
  assert.equal(statSync(file).mode & 0o777, 0o750);
  assert.deepEqual(mendLmdbBinaries(dir), [{ path: file, before: 'mended', after: 'mended' }], 'a second run changes nothing');
  assert.equal(lmdbBinaryWarning(file), null, 'nothing to say of a mended build');

  // Any other difference: not a build we know, never rewritten.
  const other = Buffer.from(published);
  other[other.length - 1] ^= 0xff;
  writeFileSync(file, other);
  assert.deepEqual(mendLmdbBinaries(dir), [{ path: file, before: 'unknown', after: 'unknown' }]);
  assert.ok(readFileSync(file).equals(other));
  assert.equal(lmdbBinaryWarning(file), null, 'nor of one it does not know');
  assert.equal(lmdbBinaryWarning(null), null);
});

test('mending a directory without lmdb binaries does nothing', () => {
  const dir = freshDir();
  copyFileSync(new URL(import.meta.url), join(dir, 'node.abi115.glibc.node.txt'));
  assert.deepEqual(mendLmdbBinaries(dir), []);
});

const OPEN_CAPTURES = (dir: string): string => `
  const { open } = await import('lmdb');
  const root = open({ path: ${JSON.stringify(join(dir, 'captures'))}, noSubdir: false, maxDbs: 8, compression: false, noSync: true });
  root.readerCheck();
  const rings = root.openDB({ name: 'capture-rings', encoding: 'msgpack' });
  const ringsById = root.openDB({ name: 'capture-rings-by-id', encoding: 'msgpack' });
  const slots = root.openDB({ name: 'capture-slots', encoding: 'binary' });
  const meta = root.openDB({ name: 'capture-meta', encoding: 'msgpack' });
  const accountBytes = root.openDB({ name: 'capture-account-bytes', encoding: 'msgpack' });
  root.openDB({ name: 'capture-slot-sizes', encoding: 'binary' });
`;

function run(script: string): { status: number | null; signal: NodeJS.Signals | null; stdout: string; stderr: string } {
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000, cwd: process.cwd() });
  return { status: child.status, signal: child.signal, stdout: child.stdout, stderr: child.stderr };
}

/**
 * An edge's first life on `dir`: a ring and a 1 MiB capture committed in a capture-like environment,
 * then the disk filled and the process killed.
 */
function firstLife(dir: string): void {
  const child = run(`${OPEN_CAPTURES(dir)}
    const { closeSync, openSync, writeSync } = await import('node:fs');
    root.transactionSync(() => {
      meta.put('next-ring-id', 2);
      rings.put(['usr_1', 'full'], { ringId: 1, capacity: 1000, head: 1, clean: false });
      ringsById.put(1, ['usr_1', 'full']);
      slots.put([1, 0], Buffer.alloc(1024 * 1024, 0x61));
      accountBytes.put('usr_1', 1024 * 1024);
    });
    const fd = openSync(${JSON.stringify(join(dir, 'filler'))}, 'a');
    for (const size of [1024 * 1024, 64 * 1024, 1024]) {
      const chunk = Buffer.alloc(size);
      try { for (;;) writeSync(fd, chunk); } catch (error) { if (error.code !== 'ENOSPC') throw error; }
    }
    closeSync(fd);
    process.kill(process.pid, 'SIGKILL');
  `);
  assert.equal(child.signal, 'SIGKILL', child.stderr);
}

/**
 * The next life, on the full disk: a commit of another 1 MiB capture, which fails, then a close and an
 * exit. LMDB writes that slot in two blocks, and lmdb-js's message then reads its third size from an
 * unset array entry (often ten digits): unmended, it ran past its block and glibc aborted the process.
 * `sync` commits as the capture store does (`transactionSync`); `async` puts as the main store does,
 * with the edge's guard for the rejections lmdb-js leaves unreachable (`guardLmdbRejections`).
 */
function nextLife(dir: string, mode: 'sync' | 'async'): ReturnType<typeof run> {
  const guard = JSON.stringify(new URL('../../src/store/write-failures.js', import.meta.url).href);
  return run(`${OPEN_CAPTURES(dir)}
    const { guardLmdbRejections } = await import(${guard});
    guardLmdbRejections();
    let failed = '';
    try {
      if (${JSON.stringify(mode)} === 'sync') {
        // A block body: a callback that returns put's promise makes transactionSync asynchronous.
        root.transactionSync(() => {
          slots.put([1, 1], Buffer.alloc(1024 * 1024, 0x62));
        });
      } else {
        await slots.put([1, 1], Buffer.alloc(1024 * 1024, 0x62));
      }
    } catch (error) {
      failed = error.message;
    }
    await root.close();
    process.stdout.write(JSON.stringify(failed));
  `);
}

for (const mode of ['sync', 'async'] as const) {
  test(`a ${mode === 'sync' ? 'synchronous commit' : 'put'} that fails on a full disk is an error the caller catches, and the process exits cleanly (no heap corruption)`, { skip: known ?? false, timeout: 240_000 }, (t) => {
    for (let attempt = 0; attempt < 3; attempt++) {
      const disk = loopFs(32);
      if (typeof disk === 'string') {
        t.skip(disk);
        return;
      }
      firstLife(disk.dir);
      const child = nextLife(disk.dir, mode);
      assert.equal(child.signal, null, `attempt ${attempt}: killed by ${child.signal}\n${child.stderr}`);
      assert.equal(child.status, 0, `attempt ${attempt}: exit ${child.status}\n${child.stderr}`);
      assert.match(JSON.parse(child.stdout) as string, /No space left on device|Commit failed/, 'the write failed as an error');
    }
  });
}
