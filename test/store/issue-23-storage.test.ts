/**
 * Issue 23, finding 1: the pieces the full-disk handling stands on. `--min-free-disk` values; the
 * free-space floor read on a small loop-mounted file system (a burst past the floor is noticed before the
 * next reading, said once, and lifted only with a margin); failed writes logged once a minute per kind
 * with how many more failed meanwhile, and refused with 503 STORAGE_FULL in the spec's shape.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { BurrowError } from '../../src/errors.js';
import { FreeSpace, formatBytes, minFreeBytes, parseMinFreeSpace } from '../../src/store/free-space.js';
import { WriteFailures } from '../../src/store/write-failures.js';
import { waitFor } from '../helpers.js';
import { loopFs } from '../loop-fs.js';

const MIB = 1024 * 1024;

test('--min-free-disk takes bytes with binary units or a percentage, and nothing else', () => {
  for (const [text, expected] of [
    ['268435456', { bytes: 268435456 }],
    ['0', { bytes: 0 }],
    ['512KiB', { bytes: 512 * 1024 }],
    ['256MiB', { bytes: 256 * MIB }],
    ['256M', { bytes: 256 * MIB }],
    ['2GiB', { bytes: 2048 * MIB }],
    ['1.5G', { bytes: 1536 * MIB }],
    ['5%', { percent: 5 }],
    ['12.5%', { percent: 12.5 }],
  ] as const) {
    assert.deepEqual(parseMinFreeSpace(text), expected, text);
  }
  for (const text of ['', 'lots', '-1', '5MB', '95%', '10 %%']) assert.equal(typeof parseMinFreeSpace(text), 'string', text);
});

test('the default floor is the larger of 256 MiB and 5% of the file system', () => {
  assert.equal(minFreeBytes(undefined, 1024 * MIB), 256 * MIB);
  assert.equal(minFreeBytes(undefined, 100 * 1024 * MIB), 5 * 1024 * MIB);
  assert.equal(minFreeBytes({ percent: 10 }, 1000 * MIB), 100 * MIB);
  assert.equal(minFreeBytes({ bytes: 7 }, 1000 * MIB), 7);
  assert.equal(formatBytes(0), '0 B');
  assert.equal(formatBytes(1536 * MIB), '1.5 GiB');
});

test('the floor: a burst of writes past it is noticed before the next reading and said once; it lifts with a margin', async (t) => {
  const disk = loopFs(32);
  if (typeof disk === 'string') {
    t.skip(disk);
    return;
  }
  const lines: string[] = [];
  const space = new FreeSpace(disk.dir, { bytes: 8 * MIB }, (line) => lines.push(line), 50);
  space.start();
  try {
    assert.equal(space.low, false);
    space.spent(space.freeBytes - 7 * MIB);
    assert.equal(space.low, true, 'the estimate crossed the floor');
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /^storage: 7 MiB free on .*, below the minimum of 8 MiB \(--min-free-disk\): new captures are skipped/);
    space.spent(MIB);
    // The disk really is this full: readings just above the floor do not lift it (a 1 MiB margin here).
    writeFileSync(join(disk.dir, 'ballast'), Buffer.alloc(disk.free() - 8 * MIB - 512 * 1024));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(space.low, true, 'inside the margin');
    assert.equal(lines.length, 1, 'said once');
    writeFileSync(join(disk.dir, 'ballast'), '');
    await waitFor(() => !space.low, 5_000, 'the floor to lift');
    assert.equal(lines.length, 2);
    assert.match(lines[1]!, /above the minimum of 8 MiB \(--min-free-disk\) again: captures and held webhooks resume$/);
  } finally {
    space.stop();
  }
});

test('failed writes: counted; logged at once, then once a minute per kind with how many more failed', async () => {
  let now = 0;
  const lines: string[] = [];
  const failures = new WriteFailures((line) => lines.push(line), 60_000, () => now);
  const full = Object.assign(new Error('No space left on device'), { code: 28 });
  failures.report('captures', full);
  failures.report('captures', full);
  failures.report('accounts', full);
  now = 30_000;
  failures.report('captures', full);
  assert.equal(failures.failing, true);
  now = 61_000;
  failures.report('captures', full);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(failures.count('captures'), 4);
  assert.equal(failures.total, 5);
  assert.deepEqual(lines, [
    'storage: writing captures failed: No space left on device (ENOSPC); the requests are still answered; their captures are skipped',
    'storage: writing accounts failed: No space left on device (ENOSPC); the API call is answered 503 STORAGE_FULL',
    'storage: writing captures failed: No space left on device (ENOSPC); the requests are still answered; their captures are skipped; 2 more failed since the last line',
  ]);
  now = 200_000;
  assert.equal(failures.failing, false, 'writes that can wait are tried again');
});

test('a failed write is refused with 503 STORAGE_FULL and Retry-After; any other error passes through', async () => {
  const failures = new WriteFailures(() => {});
  const commitFailed = Object.assign(new Error('Commit failed (see commitError for details)'), { commitError: Promise.reject(Object.assign(new Error('Input/output error'), { code: 5 })) });
  await assert.rejects(failures.guard('accounts', Promise.reject(commitFailed)), (error: unknown) => {
    assert.ok(error instanceof BurrowError);
    assert.equal(error.code, 'STORAGE_FULL');
    assert.equal(error.status, 503);
    assert.deepEqual(error.headers, { 'Retry-After': '60' });
    assert.deepEqual(Object.keys(error.toBody().error), ['code', 'message']);
    return true;
  });
  await assert.rejects(failures.guard('accounts', Promise.reject(new TypeError('a bug'))), TypeError);
  assert.equal(failures.count('accounts'), 1);
});
