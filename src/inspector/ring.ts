/**
 * The inspector's memory: the last exchanges in a ring bounded by count and by bytes, with a table from
 * the edge's `req_` id to the entry, so a lookup is one get and an insert evicts without a scan.
 *
 * Recording is on the traffic's path (the client emits 'exchange' synchronously as a stream completes),
 * so `add` does O(1) work: no serialisation, no copies except when a body is a small view into a much
 * larger buffer (a received WebSocket message), which would otherwise keep the big buffer alive outside
 * the byte bound.
 */
import { bodyLength } from '../capture-buffer.js';
import { KeyTable } from '../key-table.js';
import type { Exchange, ExchangeBody } from '../client/exchange.js';

export interface RingOptions {
  /** Most exchanges kept (default 1000). */
  maxExchanges?: number;
  /** Most bytes kept: bodies, headers and a fixed overhead per entry (default 64 MiB). */
  maxBytes?: number;
}

export const DEFAULT_MAX_EXCHANGES = 1000;
export const DEFAULT_MAX_BYTES = 64 * 1024 * 1024;

/** What an entry costs besides its bodies and headers: the record, the Map slot, the strings' headers. */
export const ENTRY_OVERHEAD = 256;

/** A body view this much smaller than its backing buffer is copied, so the big buffer can be freed. */
const SLACK = 16 * 1024;

export interface Entry {
  readonly exchange: Exchange;
  /** Bytes this entry counts against the bound (recomputed by `resized`). */
  size: number;
  /** Insertion order: higher is newer. */
  readonly seq: number;
  /** KeyTable.hash of the exchange's id: its request id is hashed once, not at each of its table's uses. */
  readonly hash: number;
}

export class ExchangeRing {
  readonly maxExchanges: number;
  readonly maxBytes: number;
  /** Circular buffer, oldest at `head`. */
  private readonly slots: (Entry | undefined)[];
  private head = 0;
  private count = 0;
  private bytesValue = 0;
  private nextSeq = 1;
  /** Seqs handed to entries put behind the oldest (history loaded from the edge): 0, -1, -2, ... */
  private olderSeq = 0;
  /** A KeyTable, not a Map: one set and one delete an exchange (see src/key-table.ts). */
  private readonly byId = new KeyTable<string, Entry>();

  constructor(options: RingOptions = {}) {
    this.maxExchanges = options.maxExchanges ?? DEFAULT_MAX_EXCHANGES;
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    if (!Number.isInteger(this.maxExchanges) || this.maxExchanges < 1) throw new RangeError('maxExchanges must be a whole number of at least 1');
    if (!Number.isInteger(this.maxBytes) || this.maxBytes < ENTRY_OVERHEAD) throw new RangeError(`maxBytes must be at least ${ENTRY_OVERHEAD}`);
    this.slots = new Array<Entry | undefined>(this.maxExchanges);
  }

  get size(): number {
    return this.count;
  }

  get bytes(): number {
    return this.bytesValue;
  }

  /** Records an exchange, evicting the oldest entries until both bounds hold. Returns the entry. */
  add(exchange: Exchange): Entry {
    exchange.requestBody = compact(exchange.requestBody);
    exchange.responseBody = compact(exchange.responseBody);
    let size = sizeOf(exchange);
    if (size > this.maxBytes) {
      // One exchange larger than the whole bound keeps its head but not its bodies.
      if (exchange.requestBody !== null) exchange.requestTruncated = true;
      if (exchange.responseBody !== null) exchange.responseTruncated = true;
      exchange.requestBody = null;
      exchange.responseBody = null;
      size = sizeOf(exchange);
    }
    const hash = KeyTable.hash(exchange.id);
    const previous = this.byId.getHashed(exchange.id, hash);
    if (previous !== undefined) this.remove(previous);
    while (this.count > 0 && (this.count >= this.maxExchanges || this.bytesValue + size > this.maxBytes)) this.evictOldest();
    const entry: Entry = { exchange, size, seq: this.nextSeq++, hash };
    this.slots[(this.head + this.count) % this.maxExchanges] = entry;
    this.count++;
    this.bytesValue += size;
    this.byId.setHashed(exchange.id, hash, entry);
    return entry;
  }

  /**
   * Puts an exchange behind the oldest one (history, older than anything seen live), when both bounds
   * leave room; never evicts for it. Returns the entry, or undefined when there was no room or the id
   * is already here.
   */
  addOldest(exchange: Exchange): Entry | undefined {
    const hash = KeyTable.hash(exchange.id);
    if (this.byId.getHashed(exchange.id, hash) !== undefined || this.count >= this.maxExchanges) return undefined;
    const size = sizeOf(exchange);
    if (this.bytesValue + size > this.maxBytes) return undefined;
    const entry: Entry = { exchange, size, seq: this.olderSeq--, hash };
    this.head = (this.head - 1 + this.maxExchanges) % this.maxExchanges;
    this.slots[this.head] = entry;
    this.count++;
    this.bytesValue += size;
    this.byId.setHashed(exchange.id, hash, entry);
    return entry;
  }

  /**
   * An entry's exchange grew or shrank in place (its detail arrived): counts it again, evicting the oldest
   * entries until the bound holds, this one too when it is the oldest left (a history entry is older than
   * everything seen live). The caller may still read an evicted entry; it is just no longer kept.
   */
  resized(entry: Entry): void {
    if (this.byId.getHashed(entry.exchange.id, entry.hash) !== entry) return;
    const size = sizeOf(entry.exchange);
    this.bytesValue += size - entry.size;
    entry.size = size;
    while (this.count > 0 && this.bytesValue > this.maxBytes) this.evictOldest();
  }

  /** Every entry, newest first (for searches). */
  *newestFirst(): Generator<Entry> {
    for (let i = this.count - 1; i >= 0; i--) yield this.slots[(this.head + i) % this.maxExchanges]!;
  }

  get(id: string): Entry | undefined {
    return this.byId.get(id);
  }

  /** The newest entry, or undefined when empty. */
  newest(): Entry | undefined {
    return this.count === 0 ? undefined : this.slots[(this.head + this.count - 1) % this.maxExchanges];
  }

  /**
   * Up to `limit` entries, newest first, starting after the entry `before` (a cursor: the id of the
   * last entry of the previous page). An unknown cursor yields nothing.
   */
  list(limit: number, before?: string): Entry[] {
    let start = this.count - 1;
    if (before !== undefined) {
      const cursor = this.byId.get(before);
      if (cursor === undefined) return [];
      start = this.indexOf(cursor) - 1;
    }
    const result: Entry[] = [];
    for (let i = start; i >= 0 && result.length < limit; i--) result.push(this.slots[(this.head + i) % this.maxExchanges]!);
    return result;
  }

  /** The logical index (0 = oldest) of a live entry: seqs are consecutive except where removed, so search. */
  private indexOf(entry: Entry): number {
    // Entries are in increasing seq order: binary search over the logical positions.
    let low = 0;
    let high = this.count - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      const seq = this.slots[(this.head + middle) % this.maxExchanges]!.seq;
      if (seq === entry.seq) return middle;
      if (seq < entry.seq) low = middle + 1;
      else high = middle - 1;
    }
    return -1;
  }

  private evictOldest(): void {
    const entry = this.slots[this.head]!;
    this.slots[this.head] = undefined;
    this.head = (this.head + 1) % this.maxExchanges;
    this.count--;
    this.bytesValue -= entry.size;
    this.byId.deleteIfHashed(entry.exchange.id, entry.hash, entry);
  }

  /** Removes an entry from the middle (a re-recorded id): rare, so shifting is fine. */
  private remove(entry: Entry): void {
    const index = this.indexOf(entry);
    if (index < 0) return;
    for (let i = index; i < this.count - 1; i++) {
      this.slots[(this.head + i) % this.maxExchanges] = this.slots[(this.head + i + 1) % this.maxExchanges];
    }
    this.slots[(this.head + this.count - 1) % this.maxExchanges] = undefined;
    this.count--;
    this.bytesValue -= entry.size;
    this.byId.deleteIfHashed(entry.exchange.id, entry.hash, entry);
  }
}

/** What an exchange counts against the byte bound. */
export function sizeOf(exchange: Exchange): number {
  let size = ENTRY_OVERHEAD + exchange.method.length + exchange.path.length + (exchange.error?.length ?? 0);
  for (const text of exchange.requestHeaders) size += text.length;
  for (const text of exchange.responseHeaders) size += text.length;
  size += bodyLength(exchange.requestBody) + bodyLength(exchange.responseBody);
  if (exchange.websocket !== undefined) for (const message of exchange.websocket.messages) size += 64 + message.data.byteLength;
  return size;
}

function compact(body: ExchangeBody | null): ExchangeBody | null {
  if (body === null) return null;
  if (body instanceof Uint8Array) return compactChunk(body);
  let compacted: Buffer[] | null = null;
  for (let i = 0; i < body.length; i++) {
    const chunk = compactChunk(body[i]!);
    if (chunk === body[i]) continue;
    compacted ??= body.slice();
    compacted[i] = chunk;
  }
  return compacted ?? body;
}

function compactChunk(chunk: Buffer): Buffer {
  return chunk.buffer.byteLength <= chunk.byteLength + SLACK ? chunk : Buffer.copyBytesFrom(chunk);
}
