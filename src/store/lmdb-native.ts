/**
 * lmdb-js's native binary, mended for a heap overflow on a failed disk write.
 *
 * When one of LMDB's page writes fails outright (`pwrite` returns -1: a full disk, EIO), lmdb-js 3.5.6
 * formats "Attempting to write page at position %u, size %u, blocks %u, buffer sizes %i %i %i" into a
 * `malloc(100)` (dependencies/lmdb/libraries/liblmdb/mdb.c, `mdb_page_flush`, lines 4741-4743). The text
 * reaches ~130 characters, and the last two sizes are read from an uninitialised array, so most failed
 * writes run past the block into the next heap chunk's header; glibc then aborts the edge at a later
 * `free` ("corrupted size vs. prev_size"). Reproduced: a 1 MiB commit on a full disk aborted 29-30 of 30
 * runs, an edge restarted on a full disk 21 of 30 (docs/architecture.md, "A full disk"). lmdb-js's
 * newest source still has the line.
 *
 * The fix is one immediate: that `malloc(100)` becomes `malloc(256)` (every message fits, and
 * `mdb_strerror`'s `malloc(300)` still holds it with its prefix). Install (`npm install`, `npm ci`:
 * scripts/prepare.mjs) applies it to the prebuilt binaries of the pinned version, each known by its
 * SHA-256 and the offset of that instruction, and never touches a binary it does not know. The edge says
 * at start when the binary it loaded is a known one left unmended (an install with --ignore-scripts).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';

export interface KnownBinary {
  /** The file in @lmdb/lmdb-linux-x64 (lmdb 3.5.6). */
  file: string;
  /** SHA-256 of the binary as published. */
  published: string;
  /** Where `mov edi, 100` (bf 64 00 00 00), the size given to that malloc, starts. */
  offset: number;
}

/** The instruction as published, and as mended: `mov edi, 100` → `mov edi, 256`. */
const PUBLISHED = Buffer.from([0xbf, 0x64, 0x00, 0x00, 0x00]);
const MENDED = Buffer.from([0xbf, 0x00, 0x01, 0x00, 0x00]);

export const KNOWN_LMDB_BINARIES: readonly KnownBinary[] = [
  { file: 'node.abi115.glibc.node', published: 'f0fa4692f2574eb941f8ed98c722c71ef9c9738589e1279dd265124e45d8feed', offset: 0x87753 },
  { file: 'node.abi127.glibc.node', published: '34b64bb44a713689b17a043c3562f48486ccfca59eaa036613995e9fcaae03ae', offset: 0x87a05 },
  { file: 'node.napi.glibc.node', published: '0029b0965ac93b05c057a4c7cf6a10f59dccbe69b23a32518209e190181a0b1c', offset: 0x81852 },
  { file: 'node.napi.musl.node', published: '8dda4c141cd1ecbd365745c160e70c969d7e7de850a67b73c382c2ef361b2ba9', offset: 0x80c18 },
];

export type LmdbBinaryState = 'mended' | 'published' | 'unknown';

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function withBytes(bytes: Buffer, at: number, patch: Buffer): Buffer {
  const copy = Buffer.from(bytes);
  patch.copy(copy, at);
  return copy;
}

/** Known and as published, known and mended (the published file but for those five bytes), or neither. */
function stateOf(bytes: Buffer, name: string): LmdbBinaryState {
  const known = KNOWN_LMDB_BINARIES.find((entry) => entry.file === name);
  if (known === undefined || bytes.byteLength < known.offset + PUBLISHED.byteLength) return 'unknown';
  const at = bytes.subarray(known.offset, known.offset + PUBLISHED.byteLength);
  if (at.equals(PUBLISHED) && sha256(bytes) === known.published) return 'published';
  if (at.equals(MENDED) && sha256(withBytes(bytes, known.offset, PUBLISHED)) === known.published) return 'mended';
  return 'unknown';
}

/** lmdb-js's package directory (its exports hide package.json: found from its entry point up). */
function lmdbDir(): string {
  let dir = dirname(createRequire(import.meta.url).resolve('lmdb'));
  while (!existsSync(join(dir, 'package.json')) || (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string }).name !== 'lmdb') {
    const up = dirname(dir);
    if (up === dir) throw new Error('lmdb: package directory not found');
    dir = up;
  }
  return dir;
}

/** The native binary lmdb-js loads in this process, found the way lmdb-js finds it (null if none). */
export function lmdbBinaryPath(): string | null {
  try {
    const packageDir = lmdbDir();
    const finder = createRequire(join(packageDir, 'package.json'))('node-gyp-build-optional-packages') as { path(dir: string): string };
    return finder.path(packageDir);
  } catch {
    return null;
  }
}

/** Whether the binary at `path` is a known lmdb 3.5.6 build, mended or as published. */
export function lmdbBinaryState(path: string): LmdbBinaryState {
  return stateOf(readFileSync(path), basename(path));
}

/** What the edge says at start about the binary at `path`: a warning when it is a known one left as published, else null. */
export function lmdbBinaryWarning(path: string | null): string | null {
  if (path === null || lmdbBinaryState(path) !== 'published') return null;
  return (
    `lmdb's native binary ${path} is the published build, not mended: a disk write that fails (a full disk) can abort the edge ` +
    'with a heap corruption; reinstall with `npm ci` (scripts/prepare.mjs mends it; docs/deploy.md, "Disk space")'
  );
}

export interface MendResult {
  path: string;
  before: LmdbBinaryState;
  after: LmdbBinaryState;
}

/**
 * Mends every known published binary in `dir` (the @lmdb/lmdb-<platform>-<arch> package); leaves mended
 * and unknown ones as they are. Each is rewritten whole through a temporary file and a rename, so a
 * process that has one loaded keeps its mapping, and is read back to check.
 */
export function mendLmdbBinaries(dir: string): MendResult[] {
  const results: MendResult[] = [];
  for (const known of KNOWN_LMDB_BINARIES) {
    const path = join(dir, known.file);
    let bytes: Buffer;
    try {
      bytes = readFileSync(path);
    } catch {
      continue;
    }
    const before = stateOf(bytes, known.file);
    if (before === 'published') {
      const temporary = `${path}.mending`;
      writeFileSync(temporary, withBytes(bytes, known.offset, MENDED), { mode: statSync(path).mode & 0o777 });
      renameSync(temporary, path);
    }
    results.push({ path, before, after: lmdbBinaryState(path) });
  }
  return results;
}

/** The directory of the prebuilt binaries lmdb-js would use on this platform, or null. */
export function lmdbPrebuiltDir(): string | null {
  try {
    return dirname(createRequire(join(lmdbDir(), 'package.json')).resolve(`@lmdb/lmdb-${process.platform}-${process.arch}/package.json`));
  } catch {
    return null;
  }
}
