/**
 * A small ext4 file system of the test's own, loop-mounted, for the full-disk tests (issue 23): the
 * edge's data directory goes inside it, so filling it fills only it. Made without the blocks ext4
 * reserves for root (`-m 0`): the tests run as root, and a disk full for any other user must be full for
 * them too. Unmounted and removed in `after` (and, should the process die first, unmounted at exit).
 * Mounting needs root and a loop device; without them the caller skips with the reason.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, statfsSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { after } from 'node:test';
import { tempDir } from './helpers.js';

export interface LoopFs {
  /** Where the file system is mounted. */
  dir: string;
  /** Bytes an unprivileged writer could still write. */
  free(): number;
  /** Writes a file until the file system refuses another byte (ENOSPC). */
  fill(name?: string): void;
}

const mounted = new Set<string>();
process.once('exit', () => {
  for (const dir of mounted) unmount(dir, true);
});

function unmount(dir: string, lazy = false): void {
  try {
    execFileSync('umount', lazy ? ['-l', dir] : [dir], { stdio: 'ignore' });
    mounted.delete(dir);
  } catch {
    // Still busy (a child not yet reaped): the lazy unmount at exit detaches it.
  }
}

/** Makes and mounts a file system of `sizeMiB`; a reason to skip when this machine does not let us. */
export function loopFs(sizeMiB: number): LoopFs | string {
  const home = tempDir('burrow-loopfs-');
  const image = join(home, 'image');
  const dir = join(home, 'mnt');
  mkdirSync(dir);
  writeFileSync(image, '');
  truncateSync(image, sizeMiB * 1024 * 1024);
  try {
    execFileSync('mkfs.ext4', ['-q', '-F', '-m', '0', image], { stdio: 'pipe' });
    execFileSync('mount', ['-o', 'loop', image, dir], { stdio: 'pipe' });
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString().trim();
    return `cannot make and mount a loop file system here (needs root and a loop device): ${stderr || (error as Error).message}`;
  }
  mounted.add(dir);
  after(() => {
    unmount(dir);
    if (mounted.has(dir)) unmount(dir, true);
    rmSync(home, { recursive: true, force: true });
  });
  return {
    dir,
    free() {
      const stats = statfsSync(dir);
      return stats.bavail * stats.bsize;
    },
    fill(name = 'filler') {
      const fd = openSync(join(dir, name), 'a');
      try {
        for (const size of [1024 * 1024, 64 * 1024, 1024]) {
          const chunk = Buffer.alloc(size);
          try {
            for (;;) writeSync(fd, chunk);
          } catch (error) {
            if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
          }
        }
      } finally {
        closeSync(fd);
      }
    },
  };
}
