/**
 * The capture journal: the write-ahead log that lets an answer go out before its capture's LMDB commit
 * without giving up "nothing lost" (DESIGN.md section 3; docs/architecture.md, "Capture durability").
 *
 * The edge writes a turn's encoded captures here in one write() before the turn's answers go out, and
 * commits them to LMDB a few milliseconds later. A write() that returned is in the operating system's
 * hands, as an LMDB commit without fsync is: a kill -9 of the edge cannot take it. At the next start the
 * store writes every journaled capture its slot does not already hold, then empties the file.
 *
 * The file is written over, not appended to. Everything in it is committed once a commit returns, so the
 * next turn's batch goes to offset 0 again (a new "lap"), over pages the file already has. Appending
 * cost the kernel a fresh page-cache page and block for every page written and a new file size each
 * time, and the truncate that kept the file small freed them all again: a turn of 10 captures of 2.6 KB
 * took 20-28 µs to append and 8-10 µs to write over (bench/store/capture-journal.ts).
 *
 * Layout: batches from offset 0, one per `append`, each
 *   header  [u32 LE MAGIC][u32 LE record count][f64 LE lap][u32 LE records' length]
 *   records [u32 LE length of what follows the length][u32 LE ring id][f64 LE sequence][capture bytes] ...
 *   trailer [f64 LE lap][u32 LE records' length][u32 LE MAGIC]
 * A lap starts with a batch of no records at offset 0 (written by `committed`), which hides the lap
 * before it. Reading starts at offset 0 and takes batches while each has the first one's lap and a
 * trailer that matches its header. Bytes past the lap's last batch are an older lap's (or zeros: laps
 * start at 1), and a batch the process died inside has no trailer: a write copies its bytes into the
 * file in order, so a trailer that is there was written after everything before it.
 *
 * A data directory from before this layout may hold `journal`, the appended records without batches
 * (`readLegacyJournal`): its records are read first, and the file is removed once the journal is
 * emptied (after the replay wrote them).
 */
import { closeSync, constants, fstatSync, ftruncateSync, openSync, readFileSync, rmSync, writeSync, writevSync } from 'node:fs';

export interface JournalRecord {
  readonly ringId: number;
  readonly seq: number;
  readonly bytes: Buffer;
}

const MAGIC = 0x314a4342; // "BCJ1" read as bytes, little-endian
const BATCH_HEADER = 4 + 4 + 8 + 4;
const BATCH_TRAILER = 8 + 4 + 4;
const RECORD_HEADER = 4 + 4 + 8;

/**
 * The most a lap holds. Commits start a new lap within COMMIT_DELAY_MS or at 8 MiB queued (src/edge/turn.ts),
 * so a lap rarely holds more than a few hundred KB; a batch that finds no room is committed before its
 * answers instead (`CaptureStore.journalAll`).
 */
export const JOURNAL_CAPACITY = 16 * 1024 * 1024;

/** The bytes `append` writes for `records`: a batch's header and trailer and each record's header. */
export function batchSize(records: readonly JournalRecord[]): number {
  let size = BATCH_HEADER + BATCH_TRAILER;
  for (let i = 0; i < records.length; i++) size += RECORD_HEADER + records[i]!.bytes.byteLength;
  return size;
}

/** The current lap's records in a journal's bytes, in order, up to the first batch that is not whole; and where that lap ends. */
export function readJournal(bytes: Buffer): { records: JournalRecord[]; lap: number; end: number } {
  const records: JournalRecord[] = [];
  let lap = 0;
  let offset = 0;
  while (offset + BATCH_HEADER + BATCH_TRAILER <= bytes.byteLength) {
    if (bytes.readUInt32LE(offset) !== MAGIC) break;
    const count = bytes.readUInt32LE(offset + 4);
    const batchLap = bytes.readDoubleLE(offset + 8);
    const length = bytes.readUInt32LE(offset + 16);
    if (!Number.isSafeInteger(batchLap) || batchLap < 1 || (lap !== 0 && batchLap !== lap)) break;
    const trailer = offset + BATCH_HEADER + length;
    if (trailer + BATCH_TRAILER > bytes.byteLength) break;
    if (bytes.readDoubleLE(trailer) !== batchLap || bytes.readUInt32LE(trailer + 8) !== length || bytes.readUInt32LE(trailer + 12) !== MAGIC) break;
    const batch = readRecords(bytes.subarray(offset + BATCH_HEADER, trailer));
    if (batch.length !== count) break;
    for (const record of batch) records.push(record);
    lap = batchLap;
    offset = trailer + BATCH_TRAILER;
  }
  return { records, lap, end: offset };
}

/** The records of a journal written before batches and laps (appended records), up to the first one cut short. */
export function readLegacyJournal(bytes: Buffer): JournalRecord[] {
  return readRecords(bytes);
}

function readRecords(bytes: Buffer): JournalRecord[] {
  const records: JournalRecord[] = [];
  let offset = 0;
  while (offset + RECORD_HEADER <= bytes.byteLength) {
    const length = bytes.readUInt32LE(offset);
    if (length < RECORD_HEADER - 4 || offset + 4 + length > bytes.byteLength) break;
    const ringId = bytes.readUInt32LE(offset + 4);
    const seq = bytes.readDoubleLE(offset + 8);
    records.push({ ringId, seq, bytes: bytes.subarray(offset + RECORD_HEADER, offset + 4 + length) });
    offset += 4 + length;
  }
  return records;
}

export class CaptureJournal {
  private readonly fd: number;
  /** Where the next batch goes: the end of the current lap. */
  private position: number;
  private lap: number;
  /** The records of a journal from before this layout, until the journal is emptied. */
  private legacy: JournalRecord[];
  /** A header and a trailer, rewritten for each batch. */
  private readonly header = Buffer.alloc(BATCH_HEADER);
  private readonly trailer = Buffer.alloc(BATCH_TRAILER);

  /**
   * Opens (creating) the journal at `path`, after the lap a crash may have left in it (`existing()` reads
   * it); `legacyPath` is where a journal from before this layout would be.
   */
  constructor(
    readonly path: string,
    readonly legacyPath: string | null = null,
    readonly capacity = JOURNAL_CAPACITY,
  ) {
    // Read and write, created when missing, never truncated, and without O_APPEND: batches go where they are told.
    this.fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o600);
    const size = fstatSync(this.fd).size;
    const found = size === 0 ? null : readJournal(readFileSync(this.path));
    // Further batches continue the lap found (a replay that could not commit keeps it). What lies past its
    // end (an older lap, a batch cut short) is cut off, so that no batch written later can be read
    // together with bytes of another life.
    this.lap = found === null || found.records.length === 0 ? 1 : found.lap;
    this.position = found === null || found.records.length === 0 ? 0 : found.end;
    if (size > this.position) ftruncateSync(this.fd, this.position);
    this.legacy = [];
    if (legacyPath !== null) {
      try {
        this.legacy = readLegacyJournal(readFileSync(legacyPath));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
    }
  }

  /** What the journal holds now: after a crash, captures that may not be in LMDB (a legacy journal's first). */
  existing(): JournalRecord[] {
    const current = this.position === 0 ? [] : readJournal(readFileSync(this.path)).records;
    return this.legacy.length === 0 ? current : [...this.legacy, ...current];
  }

  /** Whether a batch of `size` bytes (`batchSize`) fits in the current lap. */
  fits(size: number): boolean {
    return this.position + size <= this.capacity;
  }

  /** Whether a batch of `size` bytes would fit in a new lap (after `committed`). */
  fitsInNewLap(size: number): boolean {
    return BATCH_HEADER + BATCH_TRAILER + size <= this.capacity;
  }

  /**
   * Writes the records as one batch at the end of the current lap, in one writev() (the capture bytes are
   * not copied again); throws what the file system says (a full disk), or when the batch does not fit.
   * `size` is `batchSize(records)`, for a caller that has it already.
   */
  append(records: readonly JournalRecord[], size = batchSize(records)): void {
    if (!this.fits(size)) throw new Error(`capture journal: a batch of ${size} bytes does not fit after ${this.position} of ${this.capacity}`);
    const headers = Buffer.allocUnsafe(RECORD_HEADER * records.length);
    const parts: Buffer[] = [this.header];
    const length = size - BATCH_HEADER - BATCH_TRAILER;
    this.header.writeUInt32LE(MAGIC, 0);
    this.header.writeUInt32LE(records.length, 4);
    this.header.writeDoubleLE(this.lap, 8);
    this.header.writeUInt32LE(length, 16);
    for (let i = 0; i < records.length; i++) {
      const record = records[i]!;
      const offset = i * RECORD_HEADER;
      headers.writeUInt32LE(RECORD_HEADER - 4 + record.bytes.byteLength, offset);
      headers.writeUInt32LE(record.ringId, offset + 4);
      headers.writeDoubleLE(record.seq, offset + 8);
      parts.push(headers.subarray(offset, offset + RECORD_HEADER), record.bytes);
    }
    this.trailer.writeDoubleLE(this.lap, 0);
    this.trailer.writeUInt32LE(length, 8);
    this.trailer.writeUInt32LE(MAGIC, 12);
    parts.push(this.trailer);
    try {
      const written = writevSync(this.fd, parts, this.position);
      // Short only when the disk filled mid-way (past the file's end) or past the iovec limit: the rest
      // in plain writes.
      if (written < size) {
        const rest = Buffer.concat(parts).subarray(written);
        for (let offset = 0; offset < rest.byteLength; ) offset += writeSync(this.fd, rest, offset, rest.byteLength - offset, this.position + written + offset);
      }
    } catch (error) {
      // A batch cut short has no trailer, so no reader takes it; it is cut off all the same, so that a
      // shorter batch written over it later cannot be read together with what is left of it.
      try {
        ftruncateSync(this.fd, this.position);
      } catch {
        // Left as it is: its trailer is missing.
      }
      throw error;
    }
    this.position += size;
  }

  /**
   * Called after a successful commit: everything the journal holds is in LMDB, so a new lap starts at
   * offset 0, with a batch of no records that hides the lap before.
   */
  committed(): void {
    if (this.position <= BATCH_HEADER + BATCH_TRAILER) return;
    this.lap++;
    this.position = 0;
    try {
      this.append([]);
    } catch {
      // The failed write cut the file at offset 0 (`append`). Had even that failed, the lap before would
      // stay readable until the next batch went over it, and a replay would skip its captures: LMDB
      // holds them.
    }
  }

  /** Empties the file (every record is committed), and removes a legacy journal. */
  empty(): void {
    ftruncateSync(this.fd, 0);
    this.position = 0;
    this.lap++;
    if (this.legacyPath !== null) rmSync(this.legacyPath, { force: true });
    this.legacy = [];
  }

  close(): void {
    closeSync(this.fd);
  }
}
