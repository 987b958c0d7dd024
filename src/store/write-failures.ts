/**
 * Writes to LMDB that fail (issue 23, finding 1): a full disk (ENOSPC, or EIO, which is how LMDB reports
 * the short write it gets when its file cannot grow), a disk quota, a failing disk. Each write path
 * answers for its own failure (a capture is skipped and the request still answered, an API change is
 * refused with 503 STORAGE_FULL, a held webhook too); what they share is here: the reporter that counts
 * failures for /metrics and logs one line per kind of write a minute, the error the API answers, and a
 * guard against the rejections lmdb-js leaves unhandled when an asynchronous commit fails.
 */
import { constants } from 'node:os';
import { sep } from 'node:path';
import { BurrowError } from '../errors.js';

/** What was being written: the `store` label of burrow_store_write_failures_total. */
export const WRITE_KINDS = ['captures', 'accounts', 'sessions', 'usage', 'queue'] as const;
export type WriteKind = (typeof WRITE_KINDS)[number];

/** What the edge does about a failed write of each kind: the end of its log line. */
const CONSEQUENCES: Record<WriteKind, string> = {
  captures: 'the requests are still answered; their captures are skipped',
  accounts: 'the API call is answered 503 STORAGE_FULL',
  sessions: 'the sign-in or sign-out is answered 503 STORAGE_FULL',
  usage: 'the counts stay in memory and are written at a later flush',
  queue: 'the webhook is answered 503 STORAGE_FULL',
};

const LMDB_CODES: Record<number, string> = { [-30792]: 'MDB_MAP_FULL', [-30791]: 'MDB_DBS_FULL', [-30796]: 'MDB_CORRUPTED' };
const ERRNO_NAMES = new Map<number, string>(Object.entries(constants.errno).map(([name, value]) => [value, name]));

/**
 * Whether `error` is a failed LMDB write: lmdb-js's "Commit failed" for an asynchronous commit (its
 * cause comes later, in `commitError`), or the error a synchronous commit throws (a numeric code: an
 * errno, or one of LMDB's own). Anything else thrown inside a transaction is a bug, not the disk.
 */
export function isWriteFailure(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  return 'commitError' in error || typeof (error as { code?: unknown }).code === 'number';
}

/** `error`'s cause, once known: for lmdb-js's "Commit failed" the error its `commitError` rejects with. */
function causeOf(error: unknown): Promise<unknown> {
  const pending = error instanceof Error ? (error as { commitError?: unknown }).commitError : undefined;
  if (pending instanceof Promise) return pending.then(() => error, (cause: unknown) => cause);
  return Promise.resolve(error);
}

/** One line for a storage error: its message, its code by name, and what EIO means here. */
export function describeWriteError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  if (typeof code !== 'number') return error.message;
  const name = LMDB_CODES[code] ?? ERRNO_NAMES.get(code) ?? String(code);
  const hint = name === 'EIO' ? ', the short write LMDB reports when its file cannot grow: is the disk full?' : '';
  return `${error.message} (${name}${hint})`;
}

/** The answer to an API call or a held webhook whose write failed: 503, retry in a minute. */
export function storageFullError(what = 'this change'): BurrowError {
  return new BurrowError('STORAGE_FULL', `The edge could not store ${what}: its disk is full or failing. Retry later.`, { 'Retry-After': String(STORAGE_RETRY_AFTER_SECONDS) });
}

export const STORAGE_RETRY_AFTER_SECONDS = 60;

/**
 * Counts failed writes by kind and logs them: the first failure of a kind at once, then at most one
 * line a minute per kind, saying how many more failed meanwhile. A disk that stays full would otherwise
 * write a line per request.
 */
export class WriteFailures {
  private readonly counts = new Map<WriteKind, number>();
  private readonly lastLine = new Map<WriteKind, number>();
  private readonly unlogged = new Map<WriteKind, number>();
  private lastFailure = -Infinity;

  constructor(
    private readonly log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
    private readonly intervalMs = 60_000,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * A write failed within the last interval: writes that can wait (a token's last use, usage counts)
   * are put off meanwhile, so a full disk costs a try a minute, not one per request.
   */
  get failing(): boolean {
    return this.clock() - this.lastFailure < this.intervalMs;
  }

  /** Failed writes of every kind since the process started. */
  get total(): number {
    let total = 0;
    for (const count of this.counts.values()) total += count;
    return total;
  }

  /** Failed writes of this kind since the process started. */
  count(kind: WriteKind): number {
    return this.counts.get(kind) ?? 0;
  }

  /** A write of `kind` failed with `error` (counted now, logged once its cause is known). */
  report(kind: WriteKind, error: unknown): void {
    this.counts.set(kind, this.count(kind) + 1);
    const now = this.clock();
    this.lastFailure = now;
    const last = this.lastLine.get(kind);
    if (last !== undefined && now - last < this.intervalMs) {
      this.unlogged.set(kind, (this.unlogged.get(kind) ?? 0) + 1);
      // The cause is still taken, so lmdb-js's `commitError` never goes unhandled.
      void causeOf(error);
      return;
    }
    this.lastLine.set(kind, now);
    const more = this.unlogged.get(kind) ?? 0;
    this.unlogged.delete(kind);
    void causeOf(error).then((cause) => {
      const since = more === 0 ? '' : `; ${more} more failed since the last line`;
      this.log(`storage: writing ${kind} failed: ${describeWriteError(cause)}; ${CONSEQUENCES[kind]}${since}`);
    });
  }

  /**
   * `write` as it is, or, when it fails to commit, reported and rejected with 503 STORAGE_FULL (the API
   * answers it in the spec's shape). Errors that are not failed writes pass through unchanged.
   */
  async guard<T>(kind: WriteKind, write: Promise<T>, what?: string): Promise<T> {
    try {
      return await write;
    } catch (error) {
      if (!isWriteFailure(error)) throw error;
      this.report(kind, error);
      throw storageFullError(what);
    }
  }
}

let guarded = false;

/**
 * lmdb-js 3.5 rejects, for every asynchronous commit that fails, promises no caller can reach: the
 * promise of the event-turn batch the write joined, and the `commitError` of each "Commit failed" error
 * (rejected with the cause). Unhandled, either ends a Node process, whatever the caller of the write did.
 * This settles those two (the write's own caller reports the failure) and leaves every other unhandled
 * rejection as fatal as Node makes it without a handler. Installed once per process, by the stores.
 */
export function guardLmdbRejections(): void {
  if (guarded) return;
  guarded = true;
  process.on('unhandledRejection', onUnhandledRejection);
}

function onUnhandledRejection(reason: unknown): void {
  if (reason instanceof Error && 'commitError' in reason) {
    void causeOf(reason);
    return;
  }
  if (isLmdbCause(reason)) return;
  // Alone, this handler must not swallow what would have ended the process; beside others (a test
  // runner's), they decide.
  if (process.listenerCount('unhandledRejection') === 1) throw reason;
}

/** The cause lmdb-js rejects `commitError` with: an error it made, with a numeric code. */
function isLmdbCause(reason: unknown): boolean {
  return reason instanceof Error && typeof (reason as { code?: unknown }).code === 'number' && (reason.stack ?? '').includes(`${sep}lmdb${sep}`);
}
