/**
 * Webhooks held for an offline tunnel (issue 18, docs/offline.md): the queued requests of reserved
 * subdomains in `queue` mode, in the account store's LMDB environment.
 *
 * An event is committed (and flushed) before its 202 leaves, so neither kill -9 nor a power cut loses an
 * accepted webhook. Events are kept per subdomain in arrival order (key [subdomain, seq]); a provider's
 * retry finds its first copy through the duplicate index ([subdomain, key] → event id).
 *
 * Issue 23: a body is written as it arrives, in pieces ([body id, index]; HeldBodySpool), so an upload
 * holds at most a couple of pieces in memory however slowly it comes. The commit that makes the pieces an
 * event checks, in the same transaction, that the reservation the request was accepted for still holds
 * the name (its `generation`): a release and the next account's reserve can never meet an event of the
 * previous owner. Quotas apply per name and per account.
 */
import { createHash, randomBytes, type Hash } from 'node:crypto';
import type { Database, RootDatabase } from 'lmdb';
import type { ReservationRecord } from './account-store.js';

export const OFFLINE_MODES = ['off', 'reject', 'queue'] as const;
export type OfflineMode = (typeof OFFLINE_MODES)[number];

export function isOfflineMode(value: unknown): value is OfflineMode {
  return typeof value === 'string' && (OFFLINE_MODES as readonly string[]).includes(value);
}

export type EventState = 'queued' | 'delivering' | 'delivered' | 'failed';

/** What a bulk discard may name (`DELETE /api/v1/queue?state=`): every event, or those of one state. */
export const DISCARD_STATES = ['all', 'queued', 'failed', 'delivered'] as const;
export type DiscardState = (typeof DISCARD_STATES)[number];

export function isDiscardState(value: unknown): value is DiscardState {
  return typeof value === 'string' && (DISCARD_STATES as readonly string[]).includes(value);
}

export interface QueuedEvent {
  id: string;
  subdomain: string;
  accountId: string;
  /** The reservation it was accepted for (ReservationRecord.generation; '' or absent on older records). */
  generation?: string;
  seq: number;
  method: string;
  /** Path and query, as received. */
  path: string;
  /** Header names and values, alternating, as received. */
  headers: string[];
  /** Body bytes; the body itself is kept apart (OfflineQueueStore.body), so listings never read it. */
  bodySize: number;
  /** Pieces the body is kept in (queue-body-pieces); absent on events stored whole before issue 23. */
  bodyPieces?: number;
  /** SHA-256 of the body, hex. */
  bodyDigest?: string;
  /** The sender's own id of this delivery (`github:<X-GitHub-Delivery>`, ...), or null. */
  senderId?: string | null;
  clientAddress: string;
  receivedAt: number;
  /** Bytes the event counts against the queue: body plus header text. */
  size: number;
  state: EventState;
  /** Delivery attempts so far (across redeliveries). */
  attempts: number;
  /** Attempts since it was queued or redelivered: the position in the retry schedule. */
  roundAttempts?: number;
  /**
   * When an event set aside for a retry is tried next (ms since the epoch); null (or absent) while it
   * waits for its turn in arrival order. Set-aside events do not hold live requests back.
   */
  retryAt?: number | null;
  /** The sender id plus the body's digest: what makes a request a duplicate of this event. */
  dedupeKey: string | null;
  /** The local server's status of the last attempt, or the edge's error code. */
  lastStatus: number | null;
  lastError: string | null;
  /** The capture of the last attempt. */
  lastCaptureId: string | null;
}

export interface QueueMeta {
  nextSeq: number;
  events: number;
  bytes: number;
  /** Events queued or being delivered. */
  pending: number;
  /** Of those, events set aside for a retry (retryAt set): they do not hold live requests. */
  aside: number;
  /** Events delivered (kept for redelivery; the first to go when room is needed), and their bytes. */
  delivered: number;
  deliveredBytes: number;
  paused: boolean;
  /** Events dropped by the age limit, ever. */
  expired: number;
}

export interface QueueLimits {
  /** Per name. */
  events: number;
  bytes: number;
  /** Across the account's names. */
  accountEvents: number;
  accountBytes: number;
}

/** What the store reads of reservations, inside its own transactions (same LMDB environment). */
export interface ReservationView {
  reservation(subdomain: string): ReservationRecord | undefined;
  subdomainsOf(accountId: string): string[];
}

export interface NewEvent {
  /** Chosen when the upload began: its body pieces are already stored under it. */
  id: string;
  subdomain: string;
  accountId: string;
  generation: string;
  method: string;
  path: string;
  headers: string[];
  bodySize: number;
  bodyPieces: number;
  bodyDigest: string;
  senderId: string | null;
  clientAddress: string;
}

export type EnqueueOutcome =
  | { event: QueuedEvent; duplicate: boolean }
  | { full: string }
  /** The reservation the request was accepted for is gone (released, or the name reserved again). */
  | { released: true };

type Key = (string | number)[];
const RANGE_END = '\uffff';

const EMPTY_META: QueueMeta = { nextSeq: 1, events: 0, bytes: 0, pending: 0, aside: 0, delivered: 0, deliveredBytes: 0, paused: false, expired: 0 };

/**
 * Bytes per stored body piece: 16 KiB less the 16-byte header of an LMDB overflow page, so a piece fills
 * four 4 KiB pages exactly. Small enough that an upload holding two of them costs little memory.
 */
export const BODY_PIECE_BYTES = 16 * 1024 - 16;

function isPending(state: EventState): boolean {
  return state === 'queued' || state === 'delivering';
}

function isAside(event: Pick<QueuedEvent, 'state' | 'retryAt'>): boolean {
  return isPending(event.state) && event.retryAt != null;
}

export function newEventId(): string {
  return `evt_${randomBytes(12).toString('hex')}`;
}

export function headersSize(headers: readonly string[]): number {
  let size = 0;
  for (const part of headers) size += part.length + 2;
  return size;
}

/** The generation an event or reservation carries ('' when made before generations existed). */
export function generationOf(record: { generation?: string } | undefined): string {
  return record?.generation ?? '';
}

export class OfflineQueueStore {
  private readonly events: Database<QueuedEvent, Key>;
  /** Bodies stored whole (events from before issue 23). */
  private readonly bodies: Database<Uint8Array, string>;
  private readonly pieces: Database<Uint8Array, Key>;
  /** Body ids of uploads under way: their pieces are dropped if the edge stops before the commit. */
  private readonly uploads: Database<number, string>;
  private readonly byId: Database<Key, string>;
  private readonly dedupe: Database<string, Key>;
  private readonly meta: Database<QueueMeta, string>;

  constructor(
    private readonly root: RootDatabase,
    private readonly reservations: ReservationView,
  ) {
    this.events = root.openDB({ name: 'queue-events', encoding: 'msgpack' });
    this.bodies = root.openDB({ name: 'queue-bodies', encoding: 'binary' });
    this.pieces = root.openDB({ name: 'queue-body-pieces', encoding: 'binary' });
    this.uploads = root.openDB({ name: 'queue-uploads', encoding: 'msgpack' });
    this.byId = root.openDB({ name: 'queue-events-by-id', encoding: 'msgpack' });
    this.dedupe = root.openDB({ name: 'queue-dedupe', encoding: 'msgpack' });
    this.meta = root.openDB({ name: 'queue-meta', encoding: 'msgpack' });
  }

  metaOf(subdomain: string): QueueMeta {
    return { ...EMPTY_META, ...this.meta.get(subdomain) };
  }

  /** Subdomains that hold events. */
  subdomains(): string[] {
    const names: string[] = [];
    for (const { key, value } of this.meta.getRange()) if (value.events > 0 || value.paused) names.push(key);
    return names;
  }

  /** Events and bytes held across an account's reserved names, and how many of them are delivered. */
  accountUse(accountId: string): { events: number; bytes: number; delivered: number; deliveredBytes: number } {
    const use = { events: 0, bytes: 0, delivered: 0, deliveredBytes: 0 };
    for (const subdomain of this.reservations.subdomainsOf(accountId)) {
      const meta = this.meta.get(subdomain);
      if (meta === undefined) continue;
      use.events += meta.events;
      use.bytes += meta.bytes;
      use.delivered += meta.delivered;
      use.deliveredBytes += meta.deliveredBytes ?? 0;
    }
    return use;
  }

  // ---- bodies ------------------------------------------------------------------------------------------

  /** Starts storing a body under `id` (the event id to be); see HeldBodySpool. */
  spool(id: string, expectedBytes: number, onRoom: () => void): HeldBodySpool {
    // Not awaited: lmdb-js applies writes in order, so the record lands no later than the first piece.
    this.uploads.put(id, Date.now()).catch(() => {});
    return new HeldBodySpool(this, id, expectedBytes, onRoom);
  }

  /** @internal HeldBodySpool's write of one piece. */
  writePiece(id: string, index: number, bytes: Uint8Array): Promise<boolean> {
    return this.pieces.put([id, index], bytes);
  }

  /** Drops the pieces of an upload that will not become an event (abandoned, refused, too large). */
  async dropUpload(id: string): Promise<void> {
    await this.root.transaction(() => {
      this.removePieces(id);
      this.uploads.remove(id);
    });
  }

  /** Drops the pieces of uploads an earlier run of the edge never finished. Call before accepting any. */
  async dropUnfinishedUploads(): Promise<number> {
    const ids = [...this.uploads.getKeys()];
    if (ids.length === 0) return 0;
    await this.root.transaction(() => {
      for (const id of ids) {
        if (this.byId.get(id) === undefined) this.removePieces(id);
        this.uploads.remove(id);
      }
    });
    return ids.length;
  }

  private removePieces(id: string): void {
    for (const key of this.pieces.getKeys({ start: [id], end: [id, RANGE_END] })) this.pieces.remove(key);
  }

  /**
   * The first `maxBytes` of an upload's stored pieces (finished, not yet an event), or null when none:
   * what a capture of a refused upload keeps before its pieces are dropped.
   */
  uploadBody(id: string, maxBytes: number): Buffer | null {
    const parts: Buffer[] = [];
    let size = 0;
    for (const { value } of this.pieces.getRange({ start: [id], end: [id, RANGE_END] })) {
      if (size >= maxBytes) break;
      const piece = Buffer.from(value.buffer, value.byteOffset, Math.min(value.byteLength, maxBytes - size));
      parts.push(piece);
      size += piece.byteLength;
    }
    return parts.length === 0 ? null : Buffer.concat(parts, size);
  }

  /** The event's body, or null when it had none. (lmdb-js's get of a binary value returns its own copy.) */
  body(id: string): Buffer | null {
    const event = this.getSync(id);
    if (event !== undefined && (event.bodyPieces ?? 0) > 0) {
      const parts: Buffer[] = [];
      for (const { value } of this.pieces.getRange({ start: [id], end: [id, RANGE_END] })) parts.push(Buffer.from(value.buffer, value.byteOffset, value.byteLength));
      return Buffer.concat(parts);
    }
    const bytes = this.bodies.get(id);
    return bytes === undefined ? null : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  // ---- events ------------------------------------------------------------------------------------------

  /**
   * Makes a stored upload an event (or finds the first copy of a duplicate), then waits for the commit to
   * reach the disk. All in one transaction, checks first: the reservation the request was accepted for
   * must still hold the name; a duplicate is the same sender id with the same body; when a queue is full,
   * delivered events (kept for redelivery) make room first, oldest first, this name's before the
   * account's others. Whatever does not become an event has its pieces dropped in the same transaction.
   */
  async enqueue(input: NewEvent, limits: QueueLimits, now = Date.now()): Promise<EnqueueOutcome> {
    const committed = this.root.transaction((): EnqueueOutcome => {
      const refused = (answer: EnqueueOutcome): EnqueueOutcome => {
        this.removePieces(input.id);
        this.uploads.remove(input.id);
        return answer;
      };
      const reservation = this.reservations.reservation(input.subdomain);
      if (reservation === undefined || reservation.accountId !== input.accountId || generationOf(reservation) !== input.generation) {
        return refused({ released: true });
      }
      const dedupeKey = input.senderId === null ? null : `${input.senderId}#${input.bodyDigest}`;
      if (dedupeKey !== null) {
        const firstId = this.dedupe.get([input.subdomain, dedupeKey]);
        const first = firstId === undefined ? undefined : this.getSync(firstId);
        if (first !== undefined) return refused({ event: first, duplicate: true });
      }
      const size = input.bodySize + headersSize(input.headers);
      const meta = this.metaOf(input.subdomain);
      const account = this.accountUse(input.accountId);
      const fits = (): boolean =>
        meta.events + 1 <= limits.events && meta.bytes + size <= limits.bytes && account.events + 1 <= limits.accountEvents && account.bytes + size <= limits.accountBytes;
      if (!fits()) this.makeRoom(input.subdomain, input.accountId, meta, account, fits);
      if (meta.events + 1 > limits.events) return refused({ full: `the queue holds its limit of ${limits.events} events` });
      if (meta.bytes + size > limits.bytes) return refused({ full: `the queue holds ${meta.bytes} of its ${limits.bytes} bytes` });
      if (account.events + 1 > limits.accountEvents) return refused({ full: `the account's queues hold their limit of ${limits.accountEvents} events` });
      if (account.bytes + size > limits.accountBytes) return refused({ full: `the account's queues hold ${account.bytes} of their ${limits.accountBytes} bytes` });
      const event: QueuedEvent = {
        id: input.id,
        subdomain: input.subdomain,
        accountId: input.accountId,
        generation: input.generation,
        seq: meta.nextSeq,
        method: input.method,
        path: input.path,
        headers: input.headers,
        bodySize: input.bodySize,
        bodyPieces: input.bodyPieces,
        bodyDigest: input.bodyDigest,
        senderId: input.senderId,
        clientAddress: input.clientAddress,
        receivedAt: now,
        size,
        state: 'queued',
        attempts: 0,
        roundAttempts: 0,
        retryAt: null,
        dedupeKey,
        lastStatus: null,
        lastError: null,
        lastCaptureId: null,
      };
      meta.nextSeq++;
      meta.events++;
      meta.pending++;
      meta.bytes += size;
      this.events.put([event.subdomain, event.seq], event);
      this.uploads.remove(event.id);
      this.byId.put(event.id, [event.subdomain, event.seq]);
      if (dedupeKey !== null) this.dedupe.put([event.subdomain, dedupeKey], event.id);
      this.meta.put(event.subdomain, meta);
      return { event, duplicate: false };
    });
    // This commit's own flush, taken now: `root.flushed` read later names the newest batch's, and a batch
    // that fails to commit (a full disk) never flushes, which held the 202 back for ever (issue 23).
    const flushed = new Promise<void>((resolve, reject) => this.root.flushed.then(() => resolve(), reject));
    flushed.catch(() => undefined);
    const outcome = await committed;
    if ('event' in outcome && !outcome.duplicate) await flushed;
    return outcome;
  }

  /**
   * Inside a write transaction: removes delivered events, oldest first, this name's first, then those of
   * the account's other names, until `fits`. `meta` (this name's) and `account` are kept current.
   */
  private makeRoom(subdomain: string, accountId: string, meta: QueueMeta, account: { events: number; bytes: number }, fits: () => boolean): void {
    const names = [subdomain, ...this.reservations.subdomainsOf(accountId).filter((name) => name !== subdomain)];
    for (const name of names) {
      const own = name === subdomain;
      const nameMeta = own ? meta : this.metaOf(name);
      // Nothing to evict: a full queue answers without reading its events.
      if (nameMeta.delivered === 0) continue;
      for (const { value } of this.events.getRange({ start: [name], end: [name, RANGE_END] })) {
        if (fits()) break;
        if (value.state !== 'delivered') continue;
        this.removeInTransaction(value, nameMeta);
        account.events--;
        account.bytes -= value.size;
      }
      if (!own) this.meta.put(name, nameMeta);
      if (fits()) return;
    }
  }

  private removeInTransaction(event: QueuedEvent, meta: QueueMeta): void {
    this.events.remove([event.subdomain, event.seq]);
    this.bodies.remove(event.id);
    this.removePieces(event.id);
    this.byId.remove(event.id);
    if (event.dedupeKey !== null) this.dedupe.remove([event.subdomain, event.dedupeKey]);
    if (isPending(event.state)) meta.pending = Math.max(0, meta.pending - 1);
    if (isAside(event)) meta.aside = Math.max(0, meta.aside - 1);
    if (event.state === 'delivered') {
      meta.delivered = Math.max(0, meta.delivered - 1);
      meta.deliveredBytes = Math.max(0, meta.deliveredBytes - event.size);
    }
    meta.events = Math.max(0, meta.events - 1);
    meta.bytes = Math.max(0, meta.bytes - event.size);
  }

  private getSync(id: string): QueuedEvent | undefined {
    const key = this.byId.get(id);
    return key === undefined ? undefined : this.events.get(key);
  }

  get(id: string): QueuedEvent | undefined {
    return this.getSync(id);
  }

  /** The subdomain's events in arrival order. */
  list(subdomain: string): QueuedEvent[] {
    const list: QueuedEvent[] = [];
    for (const { value } of this.events.getRange({ start: [subdomain], end: [subdomain, RANGE_END] })) list.push(value);
    return list;
  }

  /**
   * The oldest event from sequence `fromSeq` on waiting for its turn (queued and not set aside, or
   * delivering when an edge stopped mid-attempt). Callers keep a cursor, so a long queue is not read from
   * its start per event.
   */
  nextInLine(subdomain: string, fromSeq = 0): QueuedEvent | undefined {
    for (const { value } of this.events.getRange({ start: [subdomain, fromSeq], end: [subdomain, RANGE_END] })) {
      if (isPending(value.state) && value.retryAt == null) return value;
    }
    return undefined;
  }

  /** The subdomain's events set aside for a retry: id and when each is due. */
  setAside(subdomain: string): Map<string, number> {
    const aside = new Map<string, number>();
    if (this.metaOf(subdomain).aside === 0) return aside;
    for (const { value } of this.events.getRange({ start: [subdomain], end: [subdomain, RANGE_END] })) {
      if (isAside(value)) aside.set(value.id, value.retryAt!);
    }
    return aside;
  }

  /** Events waiting for delivery, set aside or not. */
  hasPending(subdomain: string): boolean {
    return this.metaOf(subdomain).pending > 0;
  }

  /** Events waiting for their turn in arrival order: live requests queue behind them. */
  hasInLine(subdomain: string): boolean {
    const meta = this.metaOf(subdomain);
    return meta.pending - meta.aside > 0;
  }

  /** Updates an event's delivery state; undefined when it was discarded meanwhile. */
  async update(
    id: string,
    change: Partial<Pick<QueuedEvent, 'state' | 'attempts' | 'roundAttempts' | 'retryAt' | 'lastStatus' | 'lastError' | 'lastCaptureId'>>,
  ): Promise<QueuedEvent | undefined> {
    return this.root.transaction(() => {
      const key = this.byId.get(id);
      const event = key === undefined ? undefined : this.events.get(key);
      if (key === undefined || event === undefined) return undefined;
      const updated = { ...event, ...change };
      this.events.put(key, updated);
      const pending = Number(isPending(updated.state)) - Number(isPending(event.state));
      const aside = Number(isAside(updated)) - Number(isAside(event));
      const delivered = Number(updated.state === 'delivered') - Number(event.state === 'delivered');
      if (pending !== 0 || aside !== 0 || delivered !== 0) {
        const meta = this.metaOf(event.subdomain);
        meta.pending = Math.max(0, meta.pending + pending);
        meta.aside = Math.max(0, meta.aside + aside);
        meta.delivered = Math.max(0, meta.delivered + delivered);
        meta.deliveredBytes = Math.max(0, meta.deliveredBytes + delivered * event.size);
        this.meta.put(event.subdomain, meta);
      }
      return updated;
    });
  }

  async remove(id: string): Promise<QueuedEvent | undefined> {
    return this.root.transaction(() => {
      const event = this.getSync(id);
      if (event === undefined) return undefined;
      const meta = this.metaOf(event.subdomain);
      this.removeInTransaction(event, meta);
      this.meta.put(event.subdomain, meta);
      return event;
    });
  }

  /**
   * Drops a subdomain's events in one transaction: all of them, or those of one state (`queued` includes
   * events set aside for a retry, and not one being delivered). Returns how many went.
   */
  async discard(subdomain: string, which: DiscardState): Promise<number> {
    return this.root.transaction(() => {
      const meta = this.metaOf(subdomain);
      let count = 0;
      for (const { value } of this.events.getRange({ start: [subdomain], end: [subdomain, RANGE_END] })) {
        if (which !== 'all' && value.state !== which) continue;
        this.removeInTransaction(value, meta);
        count++;
      }
      if (count > 0) this.meta.put(subdomain, meta);
      return count;
    });
  }

  async setPaused(subdomain: string, paused: boolean): Promise<void> {
    await this.root.transaction(() => {
      this.meta.put(subdomain, { ...this.metaOf(subdomain), paused });
    });
  }

  /** Drops every event of a subdomain (its reservation was released). Call inside a write transaction. */
  clearInTransaction(subdomain: string): void {
    for (const { value } of this.events.getRange({ start: [subdomain], end: [subdomain, RANGE_END] })) {
      this.events.remove([subdomain, value.seq]);
      this.bodies.remove(value.id);
      this.removePieces(value.id);
      this.byId.remove(value.id);
    }
    for (const key of this.dedupe.getKeys({ start: [subdomain], end: [subdomain, RANGE_END] })) this.dedupe.remove(key);
    this.meta.remove(subdomain);
  }

  /** Drops events older than the age limit of their subdomain's plan; returns the dropped ones. */
  async expire(maxAgeOf: (accountId: string) => number | undefined, now = Date.now()): Promise<QueuedEvent[]> {
    const expired: QueuedEvent[] = [];
    for (const subdomain of this.subdomains()) {
      for (const event of this.list(subdomain)) {
        if (event.state === 'delivering') continue;
        const maxAge = maxAgeOf(event.accountId);
        if (maxAge !== undefined && now - event.receivedAt > maxAge) expired.push(event);
      }
    }
    if (expired.length === 0) return expired;
    await this.root.transaction(() => {
      for (const event of expired) {
        const current = this.getSync(event.id);
        if (current === undefined) continue;
        const meta = this.metaOf(event.subdomain);
        this.removeInTransaction(current, meta);
        if (current.state !== 'delivered') meta.expired++;
        this.meta.put(event.subdomain, meta);
      }
    });
    return expired;
  }
}

/**
 * A held request's body on its way to storage (issue 23): chunks are copied into a piece of
 * BODY_PIECE_BYTES and each full piece is written at once, so an upload holds the piece it fills and the
 * one being written, however slowly it arrives. `write` says false while a piece is being written: the
 * transport stops reading until `onRoom` is called (pieces recycle, so a steady upload allocates two).
 * The body's SHA-256 is computed on the way (duplicate detection).
 */
export class HeldBodySpool {
  size = 0;
  pieces = 0;
  private readonly hash: Hash = createHash('sha256');
  private filling: Buffer | null = null;
  private fill = 0;
  private spare: Buffer | null = null;
  private writing = 0;
  private writingBytes = 0;
  private waiting = false;
  private abandoned = false;
  private failure: Error | null = null;
  private drained: (() => void) | null = null;

  constructor(
    private readonly store: OfflineQueueStore,
    readonly id: string,
    /** The declared length, or -1 when unknown (chunked): sizes the last piece. */
    private readonly expectedBytes: number,
    private readonly onRoom: () => void,
  ) {}

  /** Takes a chunk (copied: the caller may reuse it at once); false: stop reading until `onRoom`. */
  write(chunk: Uint8Array): boolean {
    if (this.abandoned) return true;
    if (this.failure !== null) {
      // A piece failed to store (a full disk): `finish` will say so; the rest is counted, not written.
      this.size += chunk.byteLength;
      return true;
    }
    this.hash.update(chunk);
    let offset = 0;
    while (offset < chunk.byteLength) {
      if (this.filling === null) this.filling = this.takeBuffer();
      const n = Math.min(chunk.byteLength - offset, this.filling.byteLength - this.fill);
      this.filling.set(chunk.subarray(offset, offset + n), this.fill);
      this.fill += n;
      offset += n;
      if (this.fill === this.filling.byteLength) this.flush();
    }
    this.size += chunk.byteLength;
    if (this.writing === 0) return true;
    this.waiting = true;
    return false;
  }

  /** Writes the last piece; resolves once every piece is stored. */
  async finish(): Promise<void> {
    if (this.filling !== null && this.fill > 0) this.flush();
    if (this.writing > 0) await new Promise<void>((resolve) => (this.drained = resolve));
    if (this.failure !== null) throw this.failure;
  }

  /** Bytes of memory the upload holds now: the piece it fills, a spare one, the pieces being written. */
  get heldBytes(): number {
    return (this.filling?.byteLength ?? 0) + (this.spare?.byteLength ?? 0) + this.writingBytes;
  }

  digest(): string {
    return this.hash.digest('hex');
  }

  /** Drops what was stored (the upload was abandoned or refused before it became an event). */
  abandon(): Promise<void> {
    this.abandoned = true;
    this.filling = null;
    this.spare = null;
    return this.store.dropUpload(this.id);
  }

  private takeBuffer(): Buffer {
    const spare = this.spare;
    this.spare = null;
    this.fill = 0;
    if (spare !== null) return spare;
    const left = this.expectedBytes < 0 ? BODY_PIECE_BYTES : this.expectedBytes - this.size;
    return Buffer.allocUnsafeSlow(Math.max(1, Math.min(BODY_PIECE_BYTES, left)));
  }

  private flush(): void {
    const piece = this.filling!;
    const bytes = this.fill === piece.byteLength ? piece : piece.subarray(0, this.fill);
    this.filling = null;
    this.fill = 0;
    this.writing++;
    this.writingBytes += piece.byteLength;
    this.store.writePiece(this.id, this.pieces++, bytes).then(
      () => this.written(piece, true),
      (error: Error) => {
        this.failure ??= error;
        this.written(piece, false);
      },
    );
  }

  private written(piece: Buffer, stored: boolean): void {
    this.writing--;
    this.writingBytes -= piece.byteLength;
    // lmdb-js reads a value's bytes when its batch commits: the piece is free again only now.
    if (stored && this.spare === null && piece.byteLength === BODY_PIECE_BYTES && !this.abandoned) this.spare = piece;
    if (this.writing > 0) return;
    if (this.drained !== null) {
      const drained = this.drained;
      this.drained = null;
      drained();
    }
    if (this.waiting) {
      this.waiting = false;
      if (!this.abandoned) this.onRoom();
    }
  }
}
