/**
 * The capture journal: the write-ahead log that lets an answer go out before its capture's LMDB commit
 * without giving up "nothing lost" (DESIGN.md section 3; docs/architecture.md, "Capture durability").
 *
 * The edge appends a turn's encoded captures here in one write() before the turn's answers go out, and
 * commits them to LMDB right after. A write() that returned is in the operating system's hands, as an
 * LMDB commit without fsync is: a kill -9 of the edge cannot take it. At the next start the store writes
 * every journaled capture its slot does not already hold, then empties the file. A clean close empties it
 * too, and so does a commit once the file has grown past `resetBytes`: everything in it is committed by
 * then. Measured: a lone capture commit is 50-90 µs of the edge's time at one connection, cold; the
 * journal's write is a few µs.
 *
 * A record is [u32 LE length of what follows the length][u32 LE ring id][f64 LE sequence][capture bytes].
 * A record cut short (the process died inside the write) ends the replay; so does one whose length is
 * impossible.
 */
import { closeSync, fstatSync, ftruncateSync, openSync, readFileSync, writeSync, writevSync } from 'node:fs';

export interface JournalRecord {
  readonly ringId: number;
  readonly seq: number;
  readonly bytes: Buffer;
}

const HEADER = 4 + 4 + 8;
/** Emptied after a commit once it holds this much: everything in it is committed by then. */
export const JOURNAL_RESET_BYTES = 4 * 1024 * 1024;

/** The records in a journal's bytes, in order, up to the first one cut short. */
export function readJournal(bytes: Buffer): JournalRecord[] {
  const records: JournalRecord[] = [];
  let offset = 0;
  while (offset + HEADER <= bytes.byteLength) {
    const length = bytes.readUInt32LE(offset);
    if (length < HEADER - 4 || offset + 4 + length > bytes.byteLength) break;
    const ringId = bytes.readUInt32LE(offset + 4);
    const seq = bytes.readDoubleLE(offset + 8);
    records.push({ ringId, seq, bytes: bytes.subarray(offset + HEADER, offset + 4 + length) });
    offset += 4 + length;
  }
  return records;
}

export class CaptureJournal {
  private readonly fd: number;
  private size: number;

  /** Opens (creating) the journal at `path` for appending; `existing()` reads what a crash left. */
  constructor(
    readonly path: string,
    private readonly resetBytes = JOURNAL_RESET_BYTES,
  ) {
    this.fd = openSync(path, 'a', 0o600);
    this.size = fstatSync(this.fd).size;
  }

  /** What the file holds now: after a crash, captures that may not be in LMDB. */
  existing(): JournalRecord[] {
    return this.size === 0 ? [] : readJournal(readFileSync(this.path));
  }

  /**
   * Appends the records in one writev() (the capture bytes are not copied again); throws what the file
   * system says (a full disk).
   */
  append(records: readonly JournalRecord[]): void {
    const headers = Buffer.allocUnsafe(HEADER * records.length);
    const parts: Buffer[] = [];
    let total = 0;
    for (let i = 0; i < records.length; i++) {
      const record = records[i]!;
      const offset = i * HEADER;
      headers.writeUInt32LE(HEADER - 4 + record.bytes.byteLength, offset);
      headers.writeUInt32LE(record.ringId, offset + 4);
      headers.writeDoubleLE(record.seq, offset + 8);
      parts.push(headers.subarray(offset, offset + HEADER), record.bytes);
      total += HEADER + record.bytes.byteLength;
    }
    try {
      const written = writevSync(this.fd, parts);
      // Short only when the disk filled mid-way (or past the iovec limit): the rest in plain writes.
      if (written < total) {
        const rest = Buffer.concat(parts).subarray(written);
        for (let offset = 0; offset < rest.byteLength; ) offset += writeSync(this.fd, rest, offset, rest.byteLength - offset);
      }
    } catch (error) {
      // The disk filled mid-way: a record cut short would end a later replay before the records after it.
      try {
        ftruncateSync(this.fd, this.size);
      } catch {
        // Left as it is: the replay stops at the cut record, losing only what follows it.
      }
      throw error;
    }
    this.size += total;
  }

  /** Called after a successful commit: what the journal holds is in LMDB, so it may start again. */
  committed(): void {
    if (this.size >= this.resetBytes) this.empty();
  }

  /** Empties the file (every record is committed). */
  empty(): void {
    ftruncateSync(this.fd, 0);
    this.size = 0;
  }

  close(): void {
    closeSync(this.fd);
  }
}
