/**
 * Webhooks held for an offline tunnel (issue 18, docs/offline.md): the queued requests of reserved
 * subdomains in `queue` mode, in the account store's LMDB environment.
 *
 * An event is committed (and flushed) before its 202 leaves, so neither kill -9 nor a power cut loses an
 * accepted webhook. Events are kept per subdomain in arrival order (key [subdomain, seq]); a provider's
 * retry finds its first copy through the duplicate index ([subdomain, key] → event id).
 */
import { randomBytes } from 'node:crypto';
import type { Database, RootDatabase } from 'lmdb';

export const OFFLINE_MODES = ['off', 'reject', 'queue'] as const;
export type OfflineMode = (typeof OFFLINE_MODES)[number];

export function isOfflineMode(value: unknown): value is OfflineMode {
  return typeof value === 'string' && (OFFLINE_MODES as readonly string[]).includes(value);
}

export type EventState = 'queued' | 'delivering' | 'delivered' | 'failed';

export interface QueuedEvent {
  id: string;
  subdomain: string;
  accountId: string;
  seq: number;
  method: string;
  /** Path and query, as received. */
  path: string;
  /** Header names and values, alternating, as received. */
  headers: string[];
  /** Body bytes; the body itself is kept apart (OfflineQueueStore.body), so listings never read it. */
  bodySize: number;
  clientAddress: string;
  receivedAt: number;
  /** Bytes the event counts against the queue: body plus header text. */
  size: number;
  state: EventState;
  /** Delivery attempts so far (across redeliveries). */
  attempts: number;
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
  /** Events delivered (kept for redelivery; the first to go when room is needed). */
  delivered: number;
  paused: boolean;
  /** Events dropped by the age limit, ever. */
  expired: number;
}

export interface QueueLimits {
  events: number;
  bytes: number;
}

export interface NewEvent {
  subdomain: string;
  accountId: string;
  method: string;
  path: string;
  headers: string[];
  body: Uint8Array | null;
  clientAddress: string;
  dedupeKey: string | null;
}

export type EnqueueOutcome =
  | { event: QueuedEvent; duplicate: boolean }
  | { full: string };

type Key = (string | number)[];
const RANGE_END = '\uffff';

const EMPTY_META: QueueMeta = { nextSeq: 1, events: 0, bytes: 0, pending: 0, delivered: 0, paused: false, expired: 0 };

function isPending(state: EventState): boolean {
  return state === 'queued' || state === 'delivering';
}

export function newEventId(): string {
  return `evt_${randomBytes(12).toString('hex')}`;
}

export function eventSize(headers: readonly string[], body: Uint8Array | null): number {
  let size = body === null ? 0 : body.byteLength;
  for (const part of headers) size += part.length + 2;
  return size;
}

export class OfflineQueueStore {
  private readonly events: Database<QueuedEvent, Key>;
  private readonly bodies: Database<Uint8Array, string>;
  private readonly byId: Database<Key, string>;
  private readonly dedupe: Database<string, Key>;
  private readonly meta: Database<QueueMeta, string>;

  constructor(private readonly root: RootDatabase) {
    this.events = root.openDB({ name: 'queue-events', encoding: 'msgpack' });
    this.bodies = root.openDB({ name: 'queue-bodies', encoding: 'binary' });
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

  /**
   * Commits a new event (or finds the first copy of a duplicate), then waits for the commit to reach the
   * disk. When the queue is full, delivered events (kept for redelivery) make room first, oldest first.
   */
  async enqueue(input: NewEvent, limits: QueueLimits, now = Date.now()): Promise<EnqueueOutcome> {
    const committed = this.root.transaction((): EnqueueOutcome => {
      if (input.dedupeKey !== null) {
        const firstId = this.dedupe.get([input.subdomain, input.dedupeKey]);
        const first = firstId === undefined ? undefined : this.getSync(firstId);
        if (first !== undefined) return { event: first, duplicate: true };
      }
      const meta = this.metaOf(input.subdomain);
      const size = eventSize(input.headers, input.body);
      if (meta.events + 1 > limits.events || meta.bytes + size > limits.bytes) this.evictDelivered(input.subdomain, meta, limits, size);
      if (meta.events + 1 > limits.events) return { full: `the queue holds its limit of ${limits.events} events` };
      if (meta.bytes + size > limits.bytes) return { full: `the queue holds ${meta.bytes} of its ${limits.bytes} bytes` };
      const event: QueuedEvent = {
        id: newEventId(),
        subdomain: input.subdomain,
        accountId: input.accountId,
        seq: meta.nextSeq,
        method: input.method,
        path: input.path,
        headers: input.headers,
        bodySize: input.body === null ? 0 : input.body.byteLength,
        clientAddress: input.clientAddress,
        receivedAt: now,
        size,
        state: 'queued',
        attempts: 0,
        dedupeKey: input.dedupeKey,
        lastStatus: null,
        lastError: null,
        lastCaptureId: null,
      };
      meta.nextSeq++;
      meta.events++;
      meta.pending++;
      meta.bytes += size;
      this.events.put([event.subdomain, event.seq], event);
      if (input.body !== null && input.body.byteLength > 0) this.bodies.put(event.id, input.body);
      this.byId.put(event.id, [event.subdomain, event.seq]);
      if (event.dedupeKey !== null) this.dedupe.put([event.subdomain, event.dedupeKey], event.id);
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

  /** Inside a write transaction: removes delivered events, oldest first, until `size` more fits. */
  private evictDelivered(subdomain: string, meta: QueueMeta, limits: QueueLimits, size: number): void {
    // Nothing to evict: a full queue answers without reading its events.
    if (meta.delivered === 0) return;
    for (const { value } of this.events.getRange({ start: [subdomain], end: [subdomain, RANGE_END] })) {
      if (meta.events + 1 <= limits.events && meta.bytes + size <= limits.bytes) return;
      if (value.state !== 'delivered') continue;
      this.removeInTransaction(value, meta);
    }
  }

  private removeInTransaction(event: QueuedEvent, meta: QueueMeta): void {
    this.events.remove([event.subdomain, event.seq]);
    this.bodies.remove(event.id);
    this.byId.remove(event.id);
    if (event.dedupeKey !== null) this.dedupe.remove([event.subdomain, event.dedupeKey]);
    if (isPending(event.state)) meta.pending = Math.max(0, meta.pending - 1);
    if (event.state === 'delivered') meta.delivered = Math.max(0, meta.delivered - 1);
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

  /** The event's body, or null when it had none. (lmdb-js's get of a binary value returns its own copy.) */
  body(id: string): Buffer | null {
    const bytes = this.bodies.get(id);
    return bytes === undefined ? null : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** The subdomain's events in arrival order. */
  list(subdomain: string): QueuedEvent[] {
    const list: QueuedEvent[] = [];
    for (const { value } of this.events.getRange({ start: [subdomain], end: [subdomain, RANGE_END] })) list.push(value);
    return list;
  }

  /**
   * The oldest event from sequence `fromSeq` on waiting for delivery (queued, or delivering when an edge
   * stopped mid-attempt). Callers keep a cursor, so a long queue is not read from its start per event.
   */
  nextPending(subdomain: string, fromSeq = 0): QueuedEvent | undefined {
    for (const { value } of this.events.getRange({ start: [subdomain, fromSeq], end: [subdomain, RANGE_END] })) {
      if (isPending(value.state)) return value;
    }
    return undefined;
  }

  hasPending(subdomain: string): boolean {
    return this.metaOf(subdomain).pending > 0;
  }

  /** Updates an event's delivery state; false when it was discarded meanwhile. */
  async update(id: string, change: Partial<Pick<QueuedEvent, 'state' | 'attempts' | 'lastStatus' | 'lastError' | 'lastCaptureId'>>): Promise<QueuedEvent | undefined> {
    return this.root.transaction(() => {
      const key = this.byId.get(id);
      const event = key === undefined ? undefined : this.events.get(key);
      if (key === undefined || event === undefined) return undefined;
      const updated = { ...event, ...change };
      this.events.put(key, updated);
      const pending = Number(isPending(updated.state)) - Number(isPending(event.state));
      const delivered = Number(updated.state === 'delivered') - Number(event.state === 'delivered');
      if (pending !== 0 || delivered !== 0) {
        const meta = this.metaOf(event.subdomain);
        meta.pending = Math.max(0, meta.pending + pending);
        meta.delivered = Math.max(0, meta.delivered + delivered);
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
