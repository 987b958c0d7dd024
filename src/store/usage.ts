/**
 * Usage counters for the billing summary: requests and bytes through an account's tunnels per
 * calendar month (UTC). Counting happens in memory on the hot path; `flush()` writes the changed totals
 * to LMDB in one transaction, so a crash loses at most the counts since the last flush.
 */
import type { Database, RootDatabase } from 'lmdb';

import type { Usage, UsageCounter } from './account-store.js';
import { isWriteFailure, type WriteFailures } from './write-failures.js';

export type { Usage } from './account-store.js';

type UsageKey = [string, number];

export function periodOf(now: number): { start: number; end: number } {
  const date = new Date(now);
  const start = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
  const end = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  return { start, end };
}

/**
 * The start of the period the clock is in, for a counter that asks at every request: the month's bounds
 * are kept and worked out again only when the clock leaves them (forwards or back), where `periodOf`
 * builds a Date each time.
 */
export class CurrentPeriod {
  private start = 0;
  private end = 0;

  constructor(private readonly clock: () => number) {}

  startNow(): number {
    const now = this.clock();
    if (now < this.start || now >= this.end) {
      const period = periodOf(now);
      this.start = period.start;
      this.end = period.end;
    }
    return this.start;
  }
}

export class UsageMeter implements UsageCounter {
  private readonly db: Database<Usage, UsageKey>;
  /**
   * Each account's totals for the current period, in memory and authoritative: one edge owns a data
   * directory (src/store/data-lock.ts), so nothing else writes them. Reading totals as stored + not yet
   * flushed counted a flush twice in the moment between its commit and the resolution of its promise.
   */
  private readonly totals = new Map<string, Usage & { start: number }>();
  private readonly dirty = new Set<string>();
  private readonly period: CurrentPeriod;

  constructor(
    private readonly root: RootDatabase,
    clock: () => number = Date.now,
    /** Where a failed flush is reported (it is then retried at the next): without one, it rejects. */
    private readonly failures: WriteFailures | null = null,
  ) {
    this.db = root.openDB({ name: 'usage', encoding: 'msgpack' });
    this.period = new CurrentPeriod(clock);
  }

  private totalsOf(accountId: string): Usage & { start: number } {
    const start = this.period.startNow();
    let totals = this.totals.get(accountId);
    if (totals === undefined || totals.start !== start) {
      if (totals !== undefined && this.dirty.has(accountId)) this.db.put([accountId, totals.start], copy(totals)).catch(() => undefined);
      totals = { ...(this.db.get([accountId, start]) ?? { requests: 0, bytesIn: 0, bytesOut: 0 }), start };
      this.totals.set(accountId, totals);
    }
    return totals;
  }

  count(accountId: string, bytesIn: number, bytesOut: number): void {
    const totals = this.totalsOf(accountId);
    totals.requests++;
    totals.bytesIn += bytesIn;
    totals.bytesOut += bytesOut;
    this.dirty.add(accountId);
  }

  /** The account's counts for the current period, flushed or not. */
  current(accountId: string): Usage {
    return copy(this.totalsOf(accountId));
  }

  /** Writes the totals changed since the last flush, in one transaction. */
  async flush(): Promise<void> {
    // While writes fail (a full disk) the counts wait in memory; a try a minute is enough.
    if (this.dirty.size === 0 || this.failures?.failing === true) return;
    const batch: [UsageKey, Usage][] = [];
    for (const accountId of this.dirty) {
      const totals = this.totals.get(accountId)!;
      batch.push([[accountId, totals.start], copy(totals)]);
    }
    this.dirty.clear();
    try {
      await this.root.transaction(() => {
        for (const [key, usage] of batch) this.db.put(key, usage);
      });
    } catch (error) {
      // The totals stay in memory: the next flush writes them.
      for (const [[accountId]] of batch) this.dirty.add(accountId);
      if (this.failures === null || !isWriteFailure(error)) throw error;
      this.failures.report('usage', error);
    }
  }
}

function copy(usage: Usage): Usage {
  return { requests: usage.requests, bytesIn: usage.bytesIn, bytesOut: usage.bytesOut };
}
