/**
 * One edge per data directory. Two edges on one directory would each keep their own ring heads in memory
 * and write captures over each other's (and disagree on LMDB flags such as the capture environment's
 * write map), so the second is refused with a clear reason. The lock is a file holding the owner's pid,
 * created exclusively; one left by an edge that died (kill -9) names a process that no longer exists and
 * is taken over.
 */
import { closeSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export const LOCK_FILE = 'edge.pid';

/** Takes the data directory for this process; returns the release function (idempotent). */
export function lockDataDirectory(dir: string): () => void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, LOCK_FILE);
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number;
    try {
      fd = openSync(file, 'wx', 0o600);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const holder = readHolder(file);
      if (holder !== null && processExists(holder)) {
        const who = holder === process.pid ? 'another edge in this process' : `another edge (pid ${holder})`;
        throw new Error(`the data directory ${dir} is in use by ${who}; stop it first, or remove ${file} if no edge runs there`);
      }
      // Left by an edge that is gone: take it over (a concurrent start may win the race; then we retry).
      try {
        unlinkSync(file);
      } catch (unlinkError) {
        if ((unlinkError as NodeJS.ErrnoException).code !== 'ENOENT') throw unlinkError;
      }
      continue;
    }
    try {
      writeSync(fd, `${process.pid}\n`);
    } finally {
      closeSync(fd);
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      try {
        if (readHolder(file) === process.pid) unlinkSync(file);
      } catch {
        // Already gone: nothing to release.
      }
    };
  }
  throw new Error(`could not lock the data directory ${dir}: ${file} keeps changing (another edge starting?)`);
}

function readHolder(file: string): number | null {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
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
