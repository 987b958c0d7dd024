/**
 * Big capture records in a file of fixed-size blocks beside the capture environment (issue 25).
 *
 * LMDB keeps a value larger than half a page in a run of overflow pages, and frees the run when the value
 * is overwritten. A ring whose captures change size (webhooks of 2 KB, uploads of 1 MiB) fills its free
 * list with thousands of runs of every length, and lmdb-js's free-list upkeep at each commit grew to most
 * of a commit's cost: measured in isolation, a 1 MiB capture 1.9-2.3 ms of CPU in such a ring against
 * ~0.2 ms in a ring of one size, a 66 KB capture 300-390 µs against 55-76 (bench/RESULTS.md, tuning log).
 *
 * So a record of BLOCK_RECORD_MIN_BYTES or more is written here, in blocks of BLOCK_BYTES, and its slot
 * in LMDB holds a stub: the record's header (listings and sweeps read only that) and its length. The
 * store indexes the blocks each slot owns in LMDB, in the commit that writes the stub; the file itself
 * has no structure but the blocks. While the edge runs, blocks are reused, not given back to the file
 * system: a rewrite of pages the file has costs ~0.1 ms a MiB where growing it cost 3.6-4.0 ms on ext4.
 * A start cuts the free blocks at the file's end off it.
 *
 * Crash rules:
 * - A record's blocks are written before the commit of its stub. Blocks written for a commit that never
 *   happened (a kill -9 between) are owned by no stub: the next start finds them free.
 * - Blocks a commit frees (their stub overwritten or removed) are reused only after that commit returned.
 * - Every block starts with a tag: the ring, the sequence and the block's place in the record. A read
 *   checks them all, so a stub whose blocks hold something else (a power loss that kept a block write but
 *   lost the commit that freed it: the capture environment commits without fsync) reads as no capture,
 *   never as another capture's bytes.
 *
 *   block  [u32 LE ring id][u32 LE index in the record][f64 LE sequence][payload, BLOCK_PAYLOAD_BYTES]
 */
import { closeSync, constants, fdatasync, fdatasyncSync, fstatSync, ftruncateSync, openSync, readvSync, writevSync } from 'node:fs';

export const BLOCK_BYTES = 64 * 1024;
const TAG_BYTES = 16;
export const BLOCK_PAYLOAD_BYTES = BLOCK_BYTES - TAG_BYTES;
/**
 * Records of this size or more go to blocks: at least half of every block they take holds the record,
 * and smaller ones stay in LMDB, whose overflow runs of a few pages its free list handles well.
 */
export const BLOCK_RECORD_MIN_BYTES = 32 * 1024;
/** The blocks file in the capture store's directory. */
export const BLOCKS_FILE = 'blocks-v1';

/** How many blocks a record of `length` bytes takes. */
export function blocksFor(length: number): number {
  return Math.ceil(length / BLOCK_PAYLOAD_BYTES);
}

export class CaptureBlocks {
  private readonly fd: number;
  /** Blocks the file has room for: every block below this is owned or free. */
  private count: number;
  /** Free blocks, taken from the end: highest first at the start, so new runs are handed out ascending. */
  private free: number[] = [];

  /**
   * Opens (or creates) the file at `path`. `owned` is every block list the store's index holds: every
   * other block of the file is free. Free blocks at the file's end are cut off it: a start gives back the
   * disk a burst of big captures took, once they were overwritten or expired. An index naming blocks
   * past the file's end (a write the file system lost) keeps them taken: their tags will not match, and
   * nothing else lands under those stubs.
   */
  constructor(path: string, owned: readonly Uint32Array[]) {
    this.fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o600);
    let count = 0;
    for (const blocks of owned) for (const block of blocks) if (block >= count) count = block + 1;
    const size = fstatSync(this.fd).size;
    if (size > count * BLOCK_BYTES) {
      try {
        ftruncateSync(this.fd, count * BLOCK_BYTES);
      } catch {
        // Kept whole (a file system that refuses): its free blocks stay free blocks.
        count = Math.ceil(size / BLOCK_BYTES);
      }
    }
    this.count = count;
    const used = new Uint8Array(count);
    for (const blocks of owned) for (const block of blocks) used[block] = 1;
    for (let block = count - 1; block >= 0; block--) if (used[block] === 0) this.free.push(block);
  }

  /** Blocks the file holds or will hold (owned and free). */
  get blocks(): number {
    return this.count;
  }

  /** Free blocks, for tests and metrics. */
  get freeBlocks(): number {
    return this.free.length;
  }

  /** `n` blocks for a new record: free ones first (lowest first), then new ones at the file's end. */
  take(n: number): Uint32Array {
    const blocks = new Uint32Array(n);
    for (let i = 0; i < n; i++) blocks[i] = this.free.length > 0 ? this.free.pop()! : this.count++;
    return blocks;
  }

  /** Blocks no stub owns any more (after the commit that freed them returned), or taken for a commit that failed. */
  give(blocks: Uint32Array): void {
    // Pushed last first: a run given back is taken again as the same run, in order.
    for (let i = blocks.length - 1; i >= 0; i--) this.free.push(blocks[i]!);
  }

  /**
   * Writes a record, the bytes of `parts` in order, into `blocks` (from `take`), each block with its tag:
   * one writev per run of adjacent blocks, straight from the parts. Throws the file system's error (a
   * full disk: ENOSPC).
   */
  write(blocks: Uint32Array, ringId: number, seq: number, parts: readonly Uint8Array[]): void {
    const tags = Buffer.allocUnsafe(blocks.length * TAG_BYTES);
    let part = 0;
    let offset = 0;
    let runStart = 0;
    let iovecs: Uint8Array[] = [];
    for (let i = 0; i < blocks.length; i++) {
      const tag = tags.subarray(i * TAG_BYTES, (i + 1) * TAG_BYTES);
      tag.writeUInt32LE(ringId, 0);
      tag.writeUInt32LE(i, 4);
      tag.writeDoubleLE(seq, 8);
      iovecs.push(tag);
      // The block's payload: the next BLOCK_PAYLOAD_BYTES of the parts, as views.
      let room = BLOCK_PAYLOAD_BYTES;
      while (room > 0 && part < parts.length) {
        const chunk = parts[part]!;
        const take = Math.min(room, chunk.byteLength - offset);
        iovecs.push(offset === 0 && take === chunk.byteLength ? chunk : chunk.subarray(offset, offset + take));
        room -= take;
        offset += take;
        if (offset === chunk.byteLength) {
          part++;
          offset = 0;
        }
      }
      if (i === blocks.length - 1 || blocks[i + 1] !== blocks[i]! + 1) {
        writeAll(this.fd, iovecs, blocks[runStart]! * BLOCK_BYTES);
        iovecs = [];
        runStart = i + 1;
      }
    }
    if (part < parts.length) throw new Error('capture blocks: a record longer than its blocks');
  }

  /**
   * The record of `length` bytes in `blocks`, or null when a block's tag names another record (or the
   * file ends before it). Throws the file system's error.
   */
  read(blocks: Uint32Array, ringId: number, seq: number, length: number): Buffer | null {
    if (blocks.length !== blocksFor(length)) return null;
    const record = Buffer.allocUnsafe(length);
    const tags = Buffer.allocUnsafe(blocks.length * TAG_BYTES);
    let runStart = 0;
    let parts: Uint8Array[] = [];
    let expected = 0;
    for (let i = 0; i < blocks.length; i++) {
      const payload = record.subarray(i * BLOCK_PAYLOAD_BYTES, Math.min(length, (i + 1) * BLOCK_PAYLOAD_BYTES));
      parts.push(tags.subarray(i * TAG_BYTES, (i + 1) * TAG_BYTES), payload);
      expected += TAG_BYTES + payload.byteLength;
      if (i === blocks.length - 1 || blocks[i + 1] !== blocks[i]! + 1) {
        if (readvSync(this.fd, parts, blocks[runStart]! * BLOCK_BYTES) !== expected) return null;
        parts = [];
        expected = 0;
        runStart = i + 1;
      }
    }
    for (let i = 0; i < blocks.length; i++) {
      const at = i * TAG_BYTES;
      if (tags.readUInt32LE(at) !== ringId || tags.readUInt32LE(at + 4) !== i || tags.readDoubleLE(at + 8) !== seq) return null;
    }
    return record;
  }

  /** Writes the file's data to disk now (before a commit that fsyncs, `--capture-fsync`). */
  syncNow(): void {
    fdatasyncSync(this.fd);
  }

  /** Asks the operating system to write the file's data to disk. */
  sync(): Promise<void> {
    return new Promise((resolve, reject) => fdatasync(this.fd, (error) => (error ? reject(error) : resolve())));
  }

  close(): void {
    closeSync(this.fd);
  }
}

/** writev until every byte of `parts` is written at `position` (a short write goes on where it stopped). */
function writeAll(fd: number, parts: Uint8Array[], position: number): void {
  let total = 0;
  for (const part of parts) total += part.byteLength;
  let written = writevSync(fd, parts, position);
  while (written < total) {
    // Rare (a signal, a file system's limit): the rest, from where the kernel stopped.
    let skip = written;
    const rest: Uint8Array[] = [];
    for (const part of parts) {
      if (skip >= part.byteLength) {
        skip -= part.byteLength;
        continue;
      }
      rest.push(skip > 0 ? part.subarray(skip) : part);
      skip = 0;
    }
    const more = writevSync(fd, rest, position + written);
    if (more === 0) throw Object.assign(new Error('short write to the capture blocks file'), { code: 'EIO' });
    written += more;
  }
}
