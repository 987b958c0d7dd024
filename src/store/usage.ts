/**
 * Usage counters for the billing summary: requests and bytes through an account's tunnels per
 * calendar month (UTC). Counting happens in memory on the hot path; `flush()` adds the counts to
 * LMDB in one transaction, so a crash loses at most the counts since the last flush.
 */
import type { Database, RootDatabase } from 'lmdb';

export interface Usage {
  requests: number;
  bytesIn: number;
  bytesOut: number;
}

type UsageKey = [string, number];

export function periodOf(now: number): { start: number; end: number } {
  const date = new Date(now);
  const start = Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), 1);
  const end = Date.UTC(date.getUTCFullYear(), date.getUTCMonth() + 1, 1);
  return { start, end };
}

export class UsageMeter {
  private readonly db: Database<Usage, UsageKey>;
  private pending = new Map<string, Usage>();
  /** Counts handed to a flush that has not committed yet; still part of `current()`. */
  private flushing = new Map<string, Usage>();

  constructor(private readonly root: RootDatabase, private readonly clock: () => number = Date.now) {
    this.db = root.openDB({ name: 'usage', encoding: 'msgpack' });
  }

  count(accountId: string, bytesIn: number, bytesOut: number): void {
    let usage = this.pending.get(accountId);
    if (usage === undefined) {
      usage = { requests: 0, bytesIn: 0, bytesOut: 0 };
      this.pending.set(accountId, usage);
    }
    usage.requests++;
    usage.bytesIn += bytesIn;
    usage.bytesOut += bytesOut;
  }

  /** Stored counts plus those not flushed yet, for the current period. */
  current(accountId: string): Usage {
    const { start } = periodOf(this.clock());
    const total = { ...(this.db.get([accountId, start]) ?? { requests: 0, bytesIn: 0, bytesOut: 0 }) };
    for (const source of [this.flushing, this.pending]) {
      const counts = source.get(accountId);
      if (counts === undefined) continue;
      total.requests += counts.requests;
      total.bytesIn += counts.bytesIn;
      total.bytesOut += counts.bytesOut;
    }
    return total;
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    this.flushing = batch;
    const { start } = periodOf(this.clock());
    await this.root.transaction(() => {
      for (const [accountId, delta] of batch) {
        const key: UsageKey = [accountId, start];
        const stored = this.db.get(key) ?? { requests: 0, bytesIn: 0, bytesOut: 0 };
        this.db.put(key, {
          requests: stored.requests + delta.requests,
          bytesIn: stored.bytesIn + delta.bytesIn,
          bytesOut: stored.bytesOut + delta.bytesOut,
        });
      }
    });
    this.flushing = new Map();
  }
}
