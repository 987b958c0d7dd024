/**
 * The free-space floor under the data directory (`burrow edge --min-free-disk`, issue 23): below it the
 * edge writes nothing new that a stranger can make it write (captures are skipped, held webhooks are
 * refused with 503 STORAGE_FULL), so public traffic cannot fill the disk under LMDB, the accounts or the
 * operating system. Read with statfs on a coarse timer, never per request; between two readings the
 * bytes the capture store commits are taken off the last one, so a burst of large captures stops at the
 * floor instead of running on for a whole interval.
 */
import { statfs, statfsSync, type StatsFs } from 'node:fs';

/** `--min-free-disk`: bytes, or a percentage of the file system's size. */
export type MinFreeSpace = { bytes: number } | { percent: number };

const MIB = 1024 * 1024;
/** Without `--min-free-disk`: the larger of 256 MiB and 5% of the file system. */
export const DEFAULT_MIN_FREE_BYTES = 256 * MIB;
export const DEFAULT_MIN_FREE_PERCENT = 5;
const UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, kib: 1024, m: MIB, mib: MIB, g: 1024 * MIB, gib: 1024 * MIB, t: 1024 * 1024 * MIB, tib: 1024 * 1024 * MIB };

/** Parses `--min-free-disk`: `268435456`, `256MiB`, `2G`, `5%`; a reason when it is none of those. */
export function parseMinFreeSpace(text: string): MinFreeSpace | string {
  const percent = /^\s*(\d+(?:\.\d+)?)\s*%\s*$/.exec(text);
  if (percent !== null) {
    const value = Number(percent[1]);
    return value <= 90 ? { percent: value } : `a percentage of at most 90, not ${text}`;
  }
  const bytes = parseByteSize(text);
  if (bytes === null) return `bytes (e.g. 268435456, 256MiB, 2GiB) or a percentage (e.g. 5%), not "${text}"`;
  return { bytes };
}

/** A size in bytes as people write it: `268435456`, `256MiB`, `2G`, `1.5GiB` (powers of 1024); null when it is none. */
export function parseByteSize(text: string): number | null {
  const size = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = size === null ? undefined : UNITS[size[2]!.toLowerCase()];
  return size === null || unit === undefined ? null : Math.round(Number(size[1]) * unit);
}

/** The floor in bytes on a file system of `totalBytes`. */
export function minFreeBytes(setting: MinFreeSpace | undefined, totalBytes: number): number {
  if (setting === undefined) return Math.max(DEFAULT_MIN_FREE_BYTES, Math.ceil((totalBytes * DEFAULT_MIN_FREE_PERCENT) / 100));
  return 'bytes' in setting ? setting.bytes : Math.ceil((totalBytes * setting.percent) / 100);
}

/** Bytes for people: 0 B, 512 KiB, 12.5 MiB, 3.2 GiB. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${unit === 0 || value >= 100 ? Math.round(value) : Math.round(value * 10) / 10} ${units[unit]}`;
}

export class FreeSpace {
  /** Free bytes at the last reading (available to unprivileged writers), less what was written since. */
  freeBytes = 0;
  totalBytes = 0;
  /** The floor in bytes (0: none). */
  minFreeBytes = 0;
  /** Below the floor: captures skipped, held webhooks refused. */
  low = false;
  private reading = false;
  private timer: NodeJS.Timeout | null = null;
  private failed = false;

  constructor(
    /** A directory on the file system to watch: the data directory. */
    readonly dir: string,
    private readonly setting: MinFreeSpace | undefined,
    private readonly log: (line: string) => void,
    private readonly checkEveryMs = 1_000,
  ) {}

  /** Reads the file system now, synchronously (at start, before anything is served), then every interval. */
  start(): void {
    try {
      this.update(statfsSync(this.dir), true);
    } catch (error) {
      this.readFailed(error as Error);
    }
    this.timer = setInterval(() => this.check(), this.checkEveryMs);
    this.timer.unref();
  }

  /**
   * The stored data grew by `bytes` (new captures less what they overwrote: LMDB reuses the pages of an
   * overwritten capture, so a ring going round grows nothing): taken off the estimate until the next
   * reading.
   */
  spent(bytes: number): void {
    this.freeBytes -= bytes;
    if (!this.low && this.minFreeBytes > 0 && this.freeBytes < this.minFreeBytes) this.told(true);
  }

  stop(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  private check(): void {
    if (this.reading) return;
    this.reading = true;
    statfs(this.dir, (error, stats) => {
      this.reading = false;
      if (this.timer === null) return;
      if (error !== null) this.readFailed(error);
      else this.update(stats, false);
    });
  }

  private update(stats: StatsFs, first: boolean): void {
    this.failed = false;
    this.totalBytes = stats.blocks * stats.bsize;
    this.freeBytes = stats.bavail * stats.bsize;
    this.minFreeBytes = minFreeBytes(this.setting, this.totalBytes);
    // Back above the floor only with a margin, so a disk hovering at the floor does not flap.
    const floor = this.low ? this.minFreeBytes + resumeMargin(this.minFreeBytes) : this.minFreeBytes;
    const low = this.minFreeBytes > 0 && this.freeBytes < floor;
    if (low !== this.low || (first && low)) this.told(low);
  }

  private told(low: boolean): void {
    this.low = low;
    const free = `${formatBytes(Math.max(0, this.freeBytes))} free on ${this.dir}`;
    const floor = `${formatBytes(this.minFreeBytes)} (--min-free-disk)`;
    this.log(
      low
        ? `storage: ${free}, below the minimum of ${floor}: new captures are skipped (requests are still forwarded) and new held webhooks are refused with 503 STORAGE_FULL until space is freed`
        : `storage: ${free}, above the minimum of ${floor} again: captures and held webhooks resume`,
    );
  }

  private readFailed(error: Error): void {
    if (this.failed) return;
    this.failed = true;
    this.log(`storage: cannot read the free space of ${this.dir}: ${error.message}; the last reading stands`);
  }
}

function resumeMargin(minFree: number): number {
  return Math.max(MIB, Math.round(minFree / 16));
}
