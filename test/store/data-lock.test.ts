/**
 * One edge per data directory (src/store/data-lock.ts): a second holder is refused with a clear reason,
 * release gives it back, and a lock left by a process that is gone (kill -9) is taken over.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { lstatSync, readdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LOCK_FILE, lockDataDirectory, readLockHolder } from '../../src/store/data-lock.js';
import { tempDirs } from '../helpers.js';

const freshDir = tempDirs('burrow-lock-');

/** The pid of a process that has exited (and been reaped). */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

test('a held data directory is refused with the holder named; release gives it back', () => {
  const dir = freshDir();
  const release = lockDataDirectory(dir);
  assert.equal(readLockHolder(join(dir, LOCK_FILE)), process.pid);
  assert.throws(() => lockDataDirectory(dir), (error: Error) => {
    assert.match(error.message, /^the data directory .+ is in use by another edge in this process; stop it first, or remove .+edge\.pid if no edge runs there$/);
    return true;
  });
  assert.deepEqual(readdirSync(dir), [LOCK_FILE], 'no helper file is left behind, held or refused');
  release();
  assert.deepEqual(readdirSync(dir), []);
  release(); // idempotent
  lockDataDirectory(dir)();
});

test('a lock held by another live process names its pid', () => {
  const dir = freshDir();
  // Our parent (the test runner) is alive and is not us.
  writeFileSync(join(dir, LOCK_FILE), `${process.ppid}\n`);
  assert.throws(() => lockDataDirectory(dir), new RegExp(`in use by another edge \\(pid ${process.ppid}\\)`));
  assert.equal(readFileSync(join(dir, LOCK_FILE), 'utf8'), `${process.ppid}\n`, 'the holder keeps its lock');
});

test('a lock left by a process that is gone, or holding no pid, is taken over', () => {
  for (const content of [`${deadPid()}\n`, 'not a pid\n', '']) {
    const dir = freshDir();
    writeFileSync(join(dir, LOCK_FILE), content);
    const release = lockDataDirectory(dir);
    assert.equal(readLockHolder(join(dir, LOCK_FILE)), process.pid);
    release();
  }
});

test('release leaves a lock that is no longer ours alone', () => {
  const dir = freshDir();
  const release = lockDataDirectory(dir);
  // Someone took it over after removing ours.
  unlinkSync(join(dir, LOCK_FILE));
  writeFileSync(join(dir, LOCK_FILE), `${process.ppid}\n`);
  release();
  assert.equal(readFileSync(join(dir, LOCK_FILE), 'utf8'), `${process.ppid}\n`);
});

test('the lock is a symbolic link naming the pid: taking it needs no free data block (issue 23)', () => {
  const dir = freshDir();
  const release = lockDataDirectory(dir);
  const lock = join(dir, LOCK_FILE);
  assert.equal(lstatSync(lock).isSymbolicLink(), true);
  // A short link's target is kept in its inode: the file system allocates no block for it.
  assert.equal(lstatSync(lock).blocks, 0);
  release();
  assert.deepEqual(readdirSync(dir), []);
});
