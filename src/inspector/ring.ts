/**
 * The inspector's memory: the last exchanges in a ring bounded by count and by bytes, with a table from
 * the edge's `req_` id to the entry, so a lookup is one get and an insert evicts without a scan.
 *
 * Recording is on the traffic's path (the client emits 'exchange' once a turn's frames are written),
 * so `add` does little for the head: a slot, a table entry, a byte count, and one copy of its strings
 * into a packed one (kept-exchange.ts), nothing serialised. A body of ARENA_MIN_BODY or more is copied
 * once into the ring's arena (see `arena`); a smaller one is copied only when it is a small view into a
 * much larger buffer (a received WebSocket message), which would otherwise keep the big buffer alive
 * outside the byte bound.
 */
import { bodyLength } from '../capture-buffer.js';
import { KeyTable } from '../key-table.js';
import type { Exchange, ExchangeBody } from '../client/exchange.js';
import { KeptExchange, keptExchange } from './kept-exchange.js';

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
  /** Where its bodies sit in the ring's arena: [arenaStart, arenaEnd), or -1 when none do (or no longer). */
  arenaStart: number;
  arenaEnd: number;
}

/**
 * A body this long or longer is copied into the ring's arena; a shorter one is kept as it came (a slice of
 * Node's shared buffer pool, or a small buffer of its own, which the young generation handles well).
 */
export const ARENA_MIN_BODY = 4 * 1024;

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
  /**
   * Where bodies of ARENA_MIN_BODY or more are kept: one buffer of maxBytes, made at the first such body,
   * filled in order and reused from its start once full, the entries whose bodies are in the way evicted
   * first. Kept as the buffers they came in, big bodies cost the client a mark-compact every ~64 MB of
   * them: each request's buffers survived their scavenge, and V8 starts a mark-compact when the external
   * memory that survived grows by its soft limit, whatever the heap's size. At POST 1 MiB @10 that was
   * ~625 µs of the client's CPU a request (bench/RESULTS.md, issue 25's tuning log). In the arena the
   * buffers they came in die young. Whoever reads a body must read it at once (the inspector's JSON and
   * search do): the bytes of an evicted entry are written over later.
   */
  private arena: Buffer | null = null;
  private arenaHead = 0;
  /** Entries holding arena bytes, in the order they were placed (oldest at `arenaFront`; null once passed). */
  private arenaEntries: (Entry | null)[] = [];
  private arenaFront = 0;

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

  /**
   * Records an exchange, evicting the oldest entries until both bounds hold. Returns the entry, whose
   * exchange is a packed copy of an HTTP exchange (kept-exchange.ts), not the object given.
   */
  add(recorded: Exchange): Entry {
    const exchange = keptExchange(recorded);
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
    const entry: Entry = { exchange, size, seq: this.nextSeq++, hash, arenaStart: -1, arenaEnd: -1 };
    this.keepBodies(entry);
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
    exchange.requestBody = compact(exchange.requestBody);
    exchange.responseBody = compact(exchange.responseBody);
    const entry: Entry = { exchange, size, seq: this.olderSeq--, hash, arenaStart: -1, arenaEnd: -1 };
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
    this.release(entry);
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
    this.release(entry);
    for (let i = index; i < this.count - 1; i++) {
      this.slots[(this.head + i) % this.maxExchanges] = this.slots[(this.head + i + 1) % this.maxExchanges];
    }
    this.slots[(this.head + this.count - 1) % this.maxExchanges] = undefined;
    this.count--;
    this.bytesValue -= entry.size;
    this.byId.deleteIfHashed(entry.exchange.id, entry.hash, entry);
  }
  /**
   * An entry leaves: its arena bytes are free to be written over. Its exchange lets go of them, so a
   * reader still holding it (an answer waiting on the edge for its event id) shows no body, marked
   * truncated, rather than another exchange's bytes.
   */
  private release(entry: Entry): void {
    if (entry.arenaStart < 0) return;
    entry.arenaStart = entry.arenaEnd = -1;
    const exchange = entry.exchange;
    const arena = this.arena!.buffer;
    if (exchange.requestBody instanceof Uint8Array && exchange.requestBody.buffer === arena) {
      exchange.requestBody = null;
      exchange.requestTruncated = true;
    }
    if (exchange.responseBody instanceof Uint8Array && exchange.responseBody.buffer === arena) {
      exchange.responseBody = null;
      exchange.responseTruncated = true;
    }
  }

  /**
   * Copies the exchange's bodies of ARENA_MIN_BODY or more into the arena (one buffer each, a view of
   * it) and compacts the others. The entry is not in the ring yet, so evictions here cannot take it.
   * Its bodies fit the arena: `add` drops the bodies of an exchange larger than the byte bound.
   */
  private keepBodies(entry: Entry): void {
    const exchange = entry.exchange;
    const request = bodyLength(exchange.requestBody);
    const response = bodyLength(exchange.responseBody);
    const toArena = (request >= ARENA_MIN_BODY ? request : 0) + (response >= ARENA_MIN_BODY ? response : 0);
    if (toArena === 0) {
      exchange.requestBody = compact(exchange.requestBody);
      exchange.responseBody = compact(exchange.responseBody);
      return;
    }
    let at = this.reserve(toArena);
    entry.arenaStart = at;
    entry.arenaEnd = at + toArena;
    this.arenaEntries.push(entry);
    const arena = this.arena!;
    if (request >= ARENA_MIN_BODY) {
      exchange.requestBody = copyInto(arena, at, exchange.requestBody!, request);
      at += request;
    } else exchange.requestBody = compact(exchange.requestBody);
    if (response >= ARENA_MIN_BODY) exchange.responseBody = copyInto(arena, at, exchange.responseBody!, response);
    else exchange.responseBody = compact(exchange.responseBody);
  }

  /**
   * The start of `bytes` free bytes in the arena: right after the last placed body, or at the arena's
   * start when they do not fit before its end (the rest of that lap is given up, so whatever still lies
   * there is in the way too). Bodies are placed in order and their entries leave in order, so the live
   * ones run from the oldest one's start, around the end when they wrapped, to the last one's end: going
   * on from there, the first live bytes met are the oldest entry's. So only the oldest entry still
   * holding arena bytes can be in the way, and it leaves with every entry older than it.
   */
  private reserve(bytes: number): number {
    const arena = (this.arena ??= Buffer.allocUnsafeSlow(this.maxBytes));
    const from = this.arenaHead;
    const wrap = from + bytes > arena.byteLength;
    const start = wrap ? 0 : from;
    const end = start + bytes;
    for (;;) {
      // Entries that left are passed, and not held on to.
      while (this.arenaFront < this.arenaEntries.length && this.arenaEntries[this.arenaFront]!.arenaStart < 0) this.arenaEntries[this.arenaFront++] = null;
      if (this.arenaFront === this.arenaEntries.length) break;
      const oldest = this.arenaEntries[this.arenaFront]!;
      const inTheWay = (oldest.arenaStart < end && oldest.arenaEnd > start) || (wrap && oldest.arenaEnd > from);
      if (!inTheWay) break;
      while (oldest.arenaStart >= 0 && this.count > 0) this.evictOldest();
    }
    // The queue's left end is dropped now and then, not at every placement.
    if (this.arenaFront > 1024 && this.arenaFront * 2 > this.arenaEntries.length) {
      this.arenaEntries = this.arenaEntries.slice(this.arenaFront);
      this.arenaFront = 0;
    }
    this.arenaHead = end;
    return start;
  }
}

/** The body's bytes copied into `arena` at `at`: a view of it. */
function copyInto(arena: Buffer, at: number, body: ExchangeBody, length: number): Buffer {
  if (body instanceof Uint8Array) arena.set(body, at);
  else {
    let offset = at;
    for (const chunk of body) {
      arena.set(chunk, offset);
      offset += chunk.byteLength;
    }
  }
  return arena.subarray(at, at + length);
}

/** What an exchange counts against the byte bound. */
export function sizeOf(exchange: Exchange): number {
  let size = ENTRY_OVERHEAD + (exchange.error?.length ?? 0);
  if (exchange instanceof KeptExchange) size += exchange.methodAndPathChars + exchange.headerChars;
  else {
    size += exchange.method.length + exchange.path.length;
    for (const text of exchange.requestHeaders) size += text.length;
    for (const text of exchange.responseHeaders) size += text.length;
  }
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
