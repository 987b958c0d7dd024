/**
 * One edge per data directory. Two edges on one directory would each keep their own ring heads in memory
 * and write captures over each other's, so the second is refused with a clear reason. The lock names the
 * owner's pid and is created only when the name is free; one left by an edge that died (kill -9) names a
 * process that no longer exists and is taken over.
 *
 * The lock is a symbolic link whose target is the pid: made in one step (so it never exists without its
 * pid), and a short link's target lives in its inode, so taking the lock needs no free data block. A
 * regular file holding a pid was the lock before, and needed one: an edge whose disk had filled up could
 * not start again (ENOSPC, issue 23). A regular file left by an older edge is still read as a lock.
 */
import { lstatSync, mkdirSync, readFileSync, readlinkSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const LOCK_FILE = 'edge.pid';

/** Takes the data directory for this process; returns the release function (idempotent). */
export function lockDataDirectory(dir: string): () => void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      place(file);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = readLockHolder(file);
      if (holder !== null && processExists(holder)) {
        const who = holder === process.pid ? 'another edge in this process' : `another edge (pid ${holder})`;
        throw new Error(`the data directory ${dir} is in use by ${who}; stop it first, or remove ${file} if no edge runs there`);
      }
      // Left by an edge that is gone: take it over. (Two starts racing over a stale lock within the same
      // moment could both get through; the lock is for the second edge started by mistake.)
      try {
        unlinkSync(file);
      } catch (unlinkError) {
        if ((unlinkError as NodeJS.ErrnoException).code !== 'ENOENT') throw unlinkError;
      }
      continue;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      try {
        if (readLockHolder(file) === process.pid) unlinkSync(file);
      } catch {
        // Already gone: nothing to release.
      }
    };
  }
  throw new Error(`could not lock the data directory ${dir}: ${file} keeps changing (another edge starting?)`);
}

/** Creates the lock naming this process; EEXIST when there is one. */
function place(file: string): void {
  try {
    symlinkSync(String(process.pid), file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // A filesystem without symbolic links: a file holding the pid, created exclusively.
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw error;
    writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
  }
}

/** The pid a lock names (a link's target, or an older edge's file), or null when it names none. */
export function readLockHolder(file: string): number | null {
  try {
    const text = lstatSync(file).isSymbolicLink() ? readlinkSync(file) : readFileSync(file, 'utf8');
    const pid = Number(text.trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
