/**
 * The capture log of one edge: its own CaptureStore, as the API reads it (src/api/types.ts CaptureLog).
 */
import { BurrowError } from '../errors.js';
import type { CaptureRecord, CaptureStore, CaptureSummary, SearchResult } from '../store/captures.js';
import type { CaptureLog, CaptureQuery } from './types.js';

export class LocalCaptureLog implements CaptureLog {
  constructor(readonly store: CaptureStore) {}

  list(accountId: string, subdomain: string, query: CaptureQuery): CaptureSummary[] | null {
    return this.store.list(accountId, subdomain, this.options(accountId, subdomain, query));
  }

  search(accountId: string, subdomain: string, text: string, query: CaptureQuery & { maxScanned: number; maxBodyBytes: number }): SearchResult | null {
    return this.store.search(accountId, subdomain, text, { ...this.options(accountId, subdomain, query), maxScanned: query.maxScanned, maxBodyBytes: query.maxBodyBytes });
  }

  get(accountId: string, id: string, retentionMs: number, now: number): CaptureRecord | null {
    return this.store.get(accountId, id, retentionMs, now);
  }

  /**
   * Newest first, only those received before `receivedBefore` (ms): another edge's cursor is a time
   * here (src/edge/cluster/captures.ts). Pages through the ring, so captures newer than the time cost
   * a read each and nothing else.
   */
  listOlderThan(accountId: string, subdomain: string, receivedBefore: number, query: Omit<CaptureQuery, 'before'>): CaptureSummary[] | null {
    const found: CaptureSummary[] = [];
    let beforeSeq: number | undefined;
    for (;;) {
      const page = this.store.list(accountId, subdomain, { limit: Math.max(query.limit, 100), retentionMs: query.retentionMs, now: query.now, ...(beforeSeq === undefined ? {} : { beforeSeq }) });
      if (page === null) return beforeSeq === undefined ? null : found;
      for (const entry of page) {
        if (entry.receivedAt < receivedBefore) found.push(entry);
        if (found.length === query.limit) return found;
      }
      if (page.length === 0) return found;
      const last = this.store.seqInRing(accountId, subdomain, page[page.length - 1]!.id);
      if (last === null || last === 0) return found;
      beforeSeq = last;
    }
  }

  private options(accountId: string, subdomain: string, query: CaptureQuery): { limit: number; beforeSeq?: number; retentionMs: number; now: number } {
    if (query.before === undefined) return { limit: query.limit, retentionMs: query.retentionMs, now: query.now };
    const seq = this.store.seqInRing(accountId, subdomain, query.before);
    if (seq === null) throw new BurrowError('INVALID_REQUEST', `"before" must be a request id of ${subdomain.length <= 200 ? subdomain : `${subdomain.slice(0, 200)}…`}.`);
    return { limit: query.limit, beforeSeq: seq, retentionMs: query.retentionMs, now: query.now };
  }
}
