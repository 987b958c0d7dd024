/**
 * One edge per data directory. Two edges on one directory would each keep their own ring heads in memory
 * and write captures over each other's (and disagree on LMDB flags such as the capture environment's
 * write map), so the second is refused with a clear reason. The lock is a file holding the owner's pid,
 * created only when the name is free; one left by an edge that died (kill -9) names a process that no
 * longer exists and is taken over.
 */
import { linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const LOCK_FILE = 'edge.pid';

/** Takes the data directory for this process; returns the release function (idempotent). */
export function lockDataDirectory(dir: string): () => void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, LOCK_FILE);
  // The pid is written to a file of our own first and linked into place, so the lock never exists
  // without its pid (link fails when the name exists, as an exclusive create would).
  const mine = `${file}.${process.pid}`;
  writeFileSync(mine, `${process.pid}\n`, { mode: 0o600 });
  try {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        place(mine, file);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        const holder = readHolder(file);
        if (holder !== null && processExists(holder)) {
          const who = holder === process.pid ? 'another edge in this process' : `another edge (pid ${holder})`;
          throw new Error(`the data directory ${dir} is in use by ${who}; stop it first, or remove ${file} if no edge runs there`);
        }
        // Left by an edge that is gone: take it over. (Two starts racing over a stale file within the same
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
          if (readHolder(file) === process.pid) unlinkSync(file);
        } catch {
          // Already gone: nothing to release.
        }
      };
    }
  } finally {
    try {
      unlinkSync(mine);
    } catch {
      // Never made or already gone.
    }
  }
  throw new Error(`could not lock the data directory ${dir}: ${file} keeps changing (another edge starting?)`);
}

/** Links our pid file into place; on a filesystem without hard links, creates it exclusively instead. */
function place(mine: string, file: string): void {
  try {
    linkSync(mine, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw error;
    writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o600 });
  }
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
