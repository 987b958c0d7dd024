/**
 * Webhooks held while a reserved subdomain's tunnel is offline, delivered when it comes back (issue 18,
 * docs/offline.md), and held safely against anonymous senders (issue 23).
 *
 * Public side: a reserved subdomain in `reject` mode answers 503 TUNNEL_UNAVAILABLE with Retry-After
 * while offline; in `queue` mode a request is accepted (`accept`: rate per source, the disk's free-space
 * floor, body size, quotas per name and per account), its body streamed to LMDB in pieces as it arrives
 * (bounded memory per upload), then committed (src/store/offline-queue.ts) before the 202 with
 * `Burrow-Event-Id` leaves; a write that fails (a full disk) is answered 503 STORAGE_FULL. The commit
 * checks that the reservation the request was accepted for still holds the name. While a subdomain holds
 * events waiting for their turn (or its queue is paused), live requests are queued behind them too.
 *
 * Delivery side: when the owner's tunnel connects, events go through it one at a time, in arrival order,
 * by the replay machinery (a ReplayHttpStream with memory as the sink, so every attempt is a capture
 * whose `replay_of` is the event id). An answer that will not change (3xx, 4xx other than 408 and 429)
 * parks the event as failed at once. A 5xx, 408, 429 or timeout sets the event aside for a retry with
 * backoff while the events behind it and live requests go on; a local server that cannot be reached
 * holds the whole name (every event would fail alike) for the same backoff. After its attempts an event
 * is parked as failed.
 */
import { BurrowError, ERROR_CODES } from '../errors.js';
import { nowIso } from '../ids.js';
import type { QueueDriver } from '../api/types.js';
import type { ReservationRecord } from '../store/account-store.js';
import type { CaptureRecord } from '../store/captures.js';
import { generationOf, headersSize, newEventId, type HeldBodySpool, type NewEvent, type QueuedEvent } from '../store/offline-queue.js';
import type { PlanLimits } from '../store/plans.js';
import { FixedWindowLimiter, type RateDecision } from '../store/rate-limit.js';
import type { Store } from '../store/store.js';
import { isWriteFailure, storageFullError } from '../store/write-failures.js';
import type { ExchangeSink, ServerExchange } from '../http1/server.js';
import type { SecretBox } from '../store/secret-box.js';
import { beginWebhookChecks, fieldValue, signatureRefusal, type WebhookChecks } from './policy/webhooks.js';
import { ReservationVerifiers, VerifiersUnavailable } from './policy/reservation-verifiers.js';
import type { PublicRequestHead } from './headers.js';
import type { RejectedRequest } from './policy-gate.js';
import type { EdgeMetrics } from './metrics.js';
import type { EdgeObserver } from './observer.js';
import type { EdgeRegistry } from './registry.js';
import { writeOwn, writePublicError } from './responses.js';
import type { TunnelSession } from './session.js';

export interface OfflineQueueOptions {
  /** Waits between the attempts of one event: n delays make n + 1 attempts. */
  retryDelaysMs?: readonly number[];
  /** Largest request body held (413 beyond). */
  maxEventBody?: number;
  /** Retry-After of `reject` mode and of a full queue, in seconds. */
  retryAfterSeconds?: number;
  /** How often events past their plan's age limit are dropped (and the per-source windows swept). */
  expirySweepMs?: number;
  /** Requests held per minute from one client address (an IPv6 /64) on one name; 429 beyond. */
  sourceRateLimit?: number;
  /** Whether the disk is below the edge's free-space floor: new events are then refused (issue 23). */
  storageLow?: () => boolean;
  /** Opens the webhook secrets of stored policies (issue 26); without it a name that verifies webhooks holds nothing (503). */
  secrets?: SecretBox;
  /**
   * A request refused for its webhook signature (its headers as sent): the edge keeps it as a capture
   * marked "rejected: signature", credentials redacted, reading its body at once, synchronously; then it
   * calls `answer` (src/edge/policy-gate.ts).
   */
  signatureRejected?: (rejected: RejectedRequest, accountId: string, answer: () => void) => void;
}

export const DEFAULT_RETRY_DELAYS_MS: readonly number[] = [1_000, 2_000, 4_000, 8_000];
export const DEFAULT_MAX_EVENT_BODY = 1024 * 1024;
export const DEFAULT_SOURCE_RATE_LIMIT = 120;
const SOURCE_RATE_WINDOW_MS = 60_000;
/** Bytes of a body's start kept to find a Stripe event id in (Stripe writes `"id"` first). */
const BODY_START_BYTES = 256;
const EMPTY_SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

interface Use {
  events: number;
  bytes: number;
}

interface Sleeper {
  timer: NodeJS.Timeout;
  wake: () => void;
}

/** What one held request is, once its body is stored. */
type Arrival = Omit<NewEvent, 'bodySize' | 'bodyPieces' | 'bodyDigest' | 'senderId'>;

/**
 * A stored policy's webhook signature verification (issue 26, `--verify-webhook PROVIDER:SECRET`). A
 * request without a signature header its verifiers look for is refused before its body is read; else it
 * is fed the body's chunks as they arrive (an HMAC over the body needs no copy of it) and gives its
 * verdict once the body is stored, BEFORE duplicate detection and before the event is accepted: a forged
 * request must never be stored, nor answered as a duplicate of a real one, nor be what a real retry is
 * matched against.
 */
type WebhookVerification = WebhookChecks;

export class OfflineQueue implements QueueDriver {
  /** Subdomains whose live requests must queue: events waiting for their turn, commits in flight, or paused. */
  private readonly backlogged = new Set<string>();
  /** Commits in flight, per name and reservation generation (holdKey): live requests wait for them. */
  private readonly enqueuing = new Map<string, number>();
  /** Uploads under way per name and generation, and per account: counted against quotas until they commit. */
  private readonly uploading = new Map<string, Use>();
  private readonly accountUploading = new Map<string, Use>();
  /** Uploads under way, the body bytes they have brought so far, and their spools (for /metrics). */
  private uploads = 0;
  private uploadedBytes = 0;
  private readonly spools = new Set<HeldBodySpool>();
  private readonly draining = new Set<string>();
  /** Per subdomain, the sequence from which events in line are looked for (all before are done). */
  private readonly cursors = new Map<string, number>();
  /** Per draining subdomain, its events set aside for a retry (id → when due), read from the store once. */
  private readonly aside = new Map<string, Map<string, number>>();
  /** A drain waiting for its next set-aside event, woken early by a new event or an API change. */
  private readonly naps = new Map<string, Sleeper>();
  private readonly sleepers = new Set<Sleeper>();
  private readonly retryDelays: readonly number[];
  private readonly maxEventBody: number;
  private readonly retryAfter: [string, string][];
  private readonly sourceRate: FixedWindowLimiter;
  private readonly expiryTimer: NodeJS.Timeout;
  private readonly storageLow: () => boolean;
  private readonly verifiers: ReservationVerifiers;
  private readonly onSignatureRejected: OfflineQueueOptions['signatureRejected'];
  private closed = false;

  constructor(
    private readonly store: Store,
    private readonly registry: EdgeRegistry,
    private readonly log: (line: string) => void,
    options: OfflineQueueOptions = {},
    /** Metrics and the access log: the edge's answers here are public requests like any other. */
    private readonly observer: EdgeObserver | null = null,
  ) {
    this.retryDelays = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
    this.maxEventBody = options.maxEventBody ?? DEFAULT_MAX_EVENT_BODY;
    this.retryAfter = [['retry-after', String(options.retryAfterSeconds ?? 60)]];
    this.sourceRate = new FixedWindowLimiter(options.sourceRateLimit ?? DEFAULT_SOURCE_RATE_LIMIT, SOURCE_RATE_WINDOW_MS);
    this.storageLow = options.storageLow ?? (() => false);
    this.verifiers = new ReservationVerifiers(options.secrets ?? null);
    this.onSignatureRejected = options.signatureRejected;
    // No upload is under way yet: pieces of uploads a previous run never finished are garbage (on a full
    // disk they stay until a later start).
    store.queue.dropUnfinishedUploads().catch((error: Error) => this.writeFailed(error, 'dropping unfinished uploads'));
    for (const subdomain of store.queue.subdomains()) this.refresh(subdomain);
    if (observer?.metrics) this.registerGauges(observer.metrics);
    this.expiryTimer = setInterval(() => {
      this.expire();
      this.sourceRate.sweep();
    }, options.expirySweepMs ?? 60_000);
    this.expiryTimer.unref();
  }

  // ---- public side ------------------------------------------------------------------------------------

  /**
   * Answers a public request when the offline rules apply (the hook in Edge.servePublic): true when it
   * did. With a live tunnel and nothing held this is one Set lookup.
   */
  serves(exchange: ServerExchange, path: string, head: PublicRequestHead, subdomain: string, clientAddress: string, publicFields: readonly string[] = head.headers): boolean {
    const live = this.registry.holder(subdomain) !== undefined;
    if (live && !this.backlogged.has(subdomain)) return false;
    // Backlogged as of the drain's last look: the store's counts decide now, so a live request that
    // arrives after the last held event settled (before the drain loop looks again) is not held.
    if (live) {
      this.refresh(subdomain);
      if (!this.backlogged.has(subdomain)) return false;
    }
    const reservation = this.store.getReservation(subdomain);
    if (reservation === undefined) return false;
    const mode = reservation.offline ?? 'off';
    // A pause holds live requests only in queue mode; events held before a mode change still go first.
    if (live && mode !== 'queue' && !this.store.queue.hasInLine(subdomain) && !this.enqueuing.has(holdKey(subdomain, reservation))) return false;
    if (!live) {
      if (mode === 'off') return false;
      if (mode === 'reject') {
        if (this.observer?.watching === true) this.observer.publicRefused('TUNNEL_UNAVAILABLE', 503, subdomain, exchange.head.method, path, clientAddress);
        writePublicError(exchange, 'TUNNEL_UNAVAILABLE', `No tunnel is connected on ${subdomain}; retry later.`, false, this.retryAfter);
        return true;
      }
    }
    this.accept(exchange, path, head, subdomain, reservation, clientAddress, publicFields);
    return true;
  }

  /**
   * Where a request to hold is accepted or refused, before a byte of its body is read: the rate of its
   * source on this name, then the disk's free-space floor, then the body's declared size, then the quotas
   * of the name and of the account (uploads under way count as if stored). Then its body is stored as it
   * arrives. `head.headers` are what is stored (the tunnel policy's header rules applied, src/edge/policy-gate.ts);
   * the signature is verified on `publicFields`, the headers as the sender sent them.
   */
  private accept(
    exchange: ServerExchange,
    path: string,
    head: PublicRequestHead,
    subdomain: string,
    reservation: ReservationRecord,
    clientAddress: string,
    publicFields: readonly string[],
  ): void {
    const method = exchange.head.method;
    const hasBody = head.contentLength > 0 || head.chunked;
    type Refusal = 'SIGNATURE_INVALID' | 'POLICY_UNAVAILABLE' | 'RATE_LIMITED' | 'STORAGE_FULL' | 'QUEUE_FULL' | 'PAYLOAD_TOO_LARGE';
    const refuse = (code: Refusal, message: string, headers: [string, string][]): void => {
      this.observer?.publicRefused(code, ERROR_CODES[code].status, subdomain, method, path, clientAddress);
      // A body not read is read and dropped first (bounded), then the connection closes after the answer.
      if (hasBody) exchange.discardBody(() => writePublicError(exchange, code, message, true, headers));
      else writePublicError(exchange, code, message, false, headers);
    };

    // Issue 26: only verified webhooks are held. What the head alone refuses (no signature header) costs
    // no body read, no disk and none of the source's rate: a flood of unsigned POSTs stores nothing.
    const verification = this.verificationFor(subdomain, reservation, head, publicFields, method, path);
    if (verification instanceof VerifiersUnavailable) {
      refuse('POLICY_UNAVAILABLE', `The tunnel's policy cannot be read on this edge: ${verification.reason}.`, [['retry-after', '30']]);
      return;
    }
    const receivedAt = Date.now();
    if (verification?.early?.ok === false) {
      // Kept as a capture marked "rejected: signature" (its body not read), then answered.
      const message = signatureRefusal(verification.early.reason);
      this.observer?.publicRefused('SIGNATURE_INVALID', 401, subdomain, method, path, clientAddress);
      const rejected = this.rejection(subdomain, method, path, publicFields, clientAddress, receivedAt, message, () => null, head.chunked ? -1 : Math.max(0, head.contentLength), exchange);
      const write = (): void => {
        if (!exchange.dead) writePublicError(exchange, 'SIGNATURE_INVALID', message, hasBody);
      };
      const keep = (): void => this.signatureRejected(rejected, reservation.accountId, write);
      if (hasBody) exchange.discardBody(keep);
      else keep();
      return;
    }
    const rate = this.sourceRate.hit(`${sourceKey(clientAddress)} ${subdomain}`);
    if (!rate.allowed) {
      refuse('RATE_LIMITED', `At most ${rate.limit} requests a minute from one address are held on ${subdomain}.`, rateHeaders(rate));
      return;
    }
    if (this.storageLow()) {
      // Below the free-space floor nothing new is held: the sender keeps the event and retries, as for
      // a full queue.
      refuse('STORAGE_FULL', `The edge is low on disk space and holds no new webhooks for ${subdomain}; retry later.`, this.retryAfter);
      return;
    }
    if (head.contentLength > this.maxEventBody) {
      refuse('PAYLOAD_TOO_LARGE', `A held request body may be at most ${this.maxEventBody} bytes.`, []);
      return;
    }
    const accountId = reservation.accountId;
    const limits = this.limitsOf(accountId);
    const key = holdKey(subdomain, reservation);
    // A chunked body counts as the largest allowed until its end shows its size.
    const use: Use = { events: 1, bytes: (head.chunked ? this.maxEventBody : Math.max(0, head.contentLength)) + headersSize(head.headers) };
    const full = this.fullness(subdomain, key, accountId, use, limits);
    if (full !== null) {
      refuse('QUEUE_FULL', `The offline queue of ${subdomain} is full: ${full}.`, this.retryAfter);
      return;
    }

    const arrival: Arrival = { id: newEventId(), subdomain, accountId, generation: generationOf(reservation), method, path, headers: head.headers, clientAddress };
    const started = { receivedAt, at: performance.now(), publicFields };
    this.countUpload(key, accountId, use, 1);
    let counted = true;
    let received = 0;
    const uncount = (): void => {
      if (counted) {
        this.countUpload(key, accountId, use, -1);
        this.uploadedBytes -= received;
        if (spool !== null) this.spools.delete(spool);
      }
      counted = false;
    };
    // The public socket is not read while the spool has no room: the body goes to disk as it arrives.
    const spool = hasBody
      ? this.store.queue.spool(arrival.id, head.chunked ? -1 : head.contentLength, () => {
          if (!exchange.dead) exchange.resumeBody();
        })
      : null;
    if (spool === null) {
      this.commit(exchange, arrival, null, null, verification, started, uncount);
      return;
    }
    this.spools.add(spool);
    let start: Buffer | null = null;
    let reading = true;
    const upload: ExchangeSink = {
      onRequestBody: (chunk, last) => {
        if (!reading) return;
        const bytes = chunk ?? EMPTY;
        if (spool.size + bytes.byteLength > this.maxEventBody) {
          reading = false;
          void spool.abandon().catch(() => {});
          uncount();
          this.observer?.publicRefused('PAYLOAD_TOO_LARGE', 413, subdomain, method, path, clientAddress);
          const tooLarge = (): void => writePublicError(exchange, 'PAYLOAD_TOO_LARGE', `A held request body may be at most ${this.maxEventBody} bytes.`, true);
          if (last) tooLarge();
          else exchange.discardBody(tooLarge);
          return;
        }
        if (bytes.byteLength > 0) {
          if (start === null || start.byteLength < BODY_START_BYTES) {
            const more = Buffer.copyBytesFrom(bytes, 0, Math.min(bytes.byteLength, BODY_START_BYTES - (start?.byteLength ?? 0)));
            start = start === null ? more : Buffer.concat([start, more]);
          }
          verification?.update(bytes);
          received += bytes.byteLength;
          this.uploadedBytes += bytes.byteLength;
          if (!spool.write(bytes)) exchange.pauseBody();
        }
        if (!last) return;
        // Complete: from here the upload becomes an event (or is refused) even if the sender goes away.
        reading = false;
        const body = start;
        spool.finish().then(
          () => this.commit(exchange, arrival, spool, body, verification, started, uncount),
          (error: Error) => {
            void spool.abandon().catch(() => {});
            uncount();
            this.failed(exchange, arrival, error);
          },
        );
      },
      onAborted: () => {
        if (!reading) return;
        reading = false;
        void spool.abandon().catch(() => {});
        uncount();
      },
    };
    exchange.attach(upload);
  }

  /** Makes a stored upload an event: verified (issue 26), checked for duplicates and quotas, committed, answered. */
  private commit(
    exchange: ServerExchange,
    arrival: Arrival,
    spool: HeldBodySpool | null,
    bodyStart: Buffer | null,
    verification: WebhookVerification | null,
    started: { receivedAt: number; at: number; publicFields: readonly string[] },
    uncount: () => void,
  ): void {
    const { subdomain } = arrival;
    // Issue 26: webhook signature verification runs HERE, before duplicate detection and acceptance.
    const verdict = verification?.finish() ?? null;
    if (verdict?.ok === false) {
      const message = signatureRefusal(verdict.reason);
      this.observer?.publicRefused('SIGNATURE_INVALID', 401, subdomain, arrival.method, arrival.path, arrival.clientAddress);
      // The capture reads the stored pieces before they are dropped.
      const rejected = this.rejection(subdomain, arrival.method, arrival.path, started.publicFields, arrival.clientAddress, started.receivedAt, message, (maxBytes) => this.store.queue.uploadBody(arrival.id, maxBytes), spool?.size ?? 0, exchange);
      this.signatureRejected(rejected, arrival.accountId, () => {
        if (!exchange.dead) writePublicError(exchange, 'SIGNATURE_INVALID', message);
      });
      void spool?.abandon().catch(() => {});
      uncount();
      return;
    }
    const key = holdKey(subdomain, arrival);
    this.enqueuing.set(key, (this.enqueuing.get(key) ?? 0) + 1);
    this.backlogged.add(subdomain);
    const event: NewEvent = {
      ...arrival,
      bodySize: spool?.size ?? 0,
      bodyPieces: spool?.pieces ?? 0,
      bodyDigest: spool?.digest() ?? EMPTY_SHA256,
      senderId: senderIdOf(arrival.headers, bodyStart),
    };
    const limits = this.limitsOf(arrival.accountId);
    this.store.queue
      .enqueue(event, { events: limits.queuedEvents, bytes: limits.queuedBytes, accountEvents: limits.accountQueuedEvents, accountBytes: limits.accountQueuedBytes })
      .then(
        (outcome) => {
          if ('released' in outcome) {
            this.observer?.publicRefused('TUNNEL_NOT_FOUND', 404, subdomain, arrival.method, arrival.path, arrival.clientAddress);
            if (!exchange.dead) writePublicError(exchange, 'TUNNEL_NOT_FOUND', `The reservation of ${subdomain} ended while this request arrived; nothing was stored.`);
            return;
          }
          if ('full' in outcome) {
            this.observer?.publicRefused('QUEUE_FULL', 503, subdomain, arrival.method, arrival.path, arrival.clientAddress);
            if (!exchange.dead) writePublicError(exchange, 'QUEUE_FULL', `The offline queue of ${subdomain} is full: ${outcome.full}.`, false, this.retryAfter);
            return;
          }
          if (exchange.dead) return;
          const { event: held, duplicate } = outcome;
          const body = JSON.stringify({ event_id: held.id, state: held.state, duplicate });
          this.observed(arrival, event.bodySize, started, held.id, Buffer.byteLength(body));
          writeOwn(exchange, 202, ['burrow-event-id', held.id, 'content-type', 'application/json'], body);
        },
        (error: Error) => {
          void this.store.queue.dropUpload(arrival.id).catch(() => {});
          this.failed(exchange, arrival, error);
        },
      )
      .finally(() => {
        uncount();
        const left = (this.enqueuing.get(key) ?? 1) - 1;
        if (left === 0) this.enqueuing.delete(key);
        else this.enqueuing.set(key, left);
        // New events sort after every other: the delivery cursor stays where it is.
        this.poke(subdomain);
      });
  }

  /**
   * Storing a held request failed: a piece of its body or its commit. A failed write (a full disk) is
   * counted and logged once a minute and the sender told to retry (503 STORAGE_FULL); anything else is a
   * bug, logged with its stack (500).
   */
  private failed(exchange: ServerExchange, arrival: Arrival, error: Error): void {
    const full = isWriteFailure(error);
    if (full) this.store.failures.report('queue', error);
    else this.log(`offline queue: holding a request on ${arrival.subdomain} failed: ${error.stack ?? error.message}`);
    this.observer?.publicRefused(full ? 'STORAGE_FULL' : 'INTERNAL_ERROR', full ? 503 : 500, arrival.subdomain, arrival.method, arrival.path, arrival.clientAddress);
    if (exchange.dead) return;
    if (full) writePublicError(exchange, 'STORAGE_FULL', storageFullError('the webhook').message, false, this.retryAfter);
    else writePublicError(exchange, 'INTERNAL_ERROR');
  }

  /** Upkeep that failed: a failed write is counted and logged once a minute, anything else said at once. */
  private writeFailed(error: Error, what: string): void {
    if (isWriteFailure(error)) this.store.failures.report('queue', error);
    else if (!this.closed) this.log(`offline queue: ${what} failed: ${error.stack ?? error.message}`);
  }

  /**
   * The checks of the reservation's stored `verify_webhook` entries over this request (issue 26), begun
   * from its head; null when its policy verifies nothing. Twilio signs the URL it called: the scheme is
   * the one the edge wrote into X-Forwarded-Proto (its own, a trusted proxy's, or --public-url's).
   */
  private verificationFor(
    subdomain: string,
    reservation: ReservationRecord,
    head: PublicRequestHead,
    fields: readonly string[],
    method: string,
    path: string,
  ): WebhookVerification | VerifiersUnavailable | null {
    const verifiers = this.verifiers.of(subdomain, reservation.policy);
    if (verifiers === null || verifiers instanceof VerifiersUnavailable) return verifiers;
    const scheme = fieldValue(fields, 'x-forwarded-proto') ?? 'http';
    return beginWebhookChecks(verifiers, { method, target: path, fields, publicUrl: `${scheme}://${head.host}${path}`, now: Date.now() });
  }

  /** A request refused for its signature, as the edge's capture of it needs it. */
  private rejection(
    subdomain: string,
    method: string,
    path: string,
    fields: readonly string[],
    clientAddress: string,
    receivedAt: number,
    message: string,
    body: (maxBytes: number) => Buffer | null,
    bodySize: number,
    exchange: ServerExchange,
  ): RejectedRequest {
    return { subdomain, method, path, headers: fields, clientAddress, receivedAt, body, bodySize, message, accept: fieldValue(exchange.head.fields, 'accept') ?? '' };
  }

  /** Keeps a refused request as a capture through the edge's hook, else answers at once. */
  private signatureRejected(rejected: RejectedRequest, accountId: string, answer: () => void): void {
    if (this.onSignatureRejected === undefined) answer();
    else this.onSignatureRejected(rejected, accountId, answer);
  }

  private limitsOf(accountId: string): PlanLimits {
    return this.store.planLimits(this.store.getAccount(accountId)?.plan ?? 'FREE');
  }

  /**
   * Why one more event of `use` does not fit, or null. Delivered events make room when needed, so they
   * do not count; uploads under way do.
   */
  private fullness(subdomain: string, key: string, accountId: string, use: Use, limits: PlanLimits): string | null {
    const meta = this.store.queue.metaOf(subdomain);
    const uploads = this.uploading.get(key) ?? NOTHING;
    if (meta.events - meta.delivered + uploads.events + use.events > limits.queuedEvents) return `it holds its limit of ${limits.queuedEvents} events`;
    if (meta.bytes - meta.deliveredBytes + uploads.bytes + use.bytes > limits.queuedBytes) return `it holds ${meta.bytes + uploads.bytes} of its ${limits.queuedBytes} bytes`;
    const account = this.store.queue.accountUse(accountId);
    const accountUploads = this.accountUploading.get(accountId) ?? NOTHING;
    if (account.events - account.delivered + accountUploads.events + use.events > limits.accountQueuedEvents) {
      return `the account's queues hold their limit of ${limits.accountQueuedEvents} events`;
    }
    if (account.bytes - account.deliveredBytes + accountUploads.bytes + use.bytes > limits.accountQueuedBytes) {
      return `the account's queues hold ${account.bytes + accountUploads.bytes} of their ${limits.accountQueuedBytes} bytes`;
    }
    return null;
  }

  private countUpload(key: string, accountId: string, use: Use, sign: 1 | -1): void {
    this.uploads += sign;
    for (const [map, id] of [[this.uploading, key], [this.accountUploading, accountId]] as const) {
      const total = map.get(id) ?? { events: 0, bytes: 0 };
      total.events += sign * use.events;
      total.bytes += sign * use.bytes;
      if (total.events <= 0) map.delete(id);
      else map.set(id, total);
    }
  }

  /** Held requests on `subdomain` still arriving (accepted, not yet committed or refused). */
  receiving(subdomain: string): number {
    let count = 0;
    for (const [key, use] of this.uploading) if (key.startsWith(`${subdomain} `)) count += use.events;
    return count;
  }

  private registerGauges(metrics: EdgeMetrics): void {
    metrics.gauge('burrow_queue_uploads_receiving', 'Requests to hold (offline mode queue) whose body is still arriving.', () => this.uploads);
    metrics.gauge('burrow_queue_upload_bytes_received', 'Body bytes those requests brought so far (written to storage as they come).', () => this.uploadedBytes);
    metrics.gauge('burrow_queue_upload_bytes_buffered', 'Memory those requests hold: body pieces being filled or written (at most two 16 KiB pieces each once stalled).', () => {
      let bytes = 0;
      for (const spool of this.spools) bytes += spool.heldBytes;
      return bytes;
    });
  }

  /** A held request answered 202: counted and access-logged, its event id as the request id. */
  private observed(arrival: Arrival, bytesIn: number, started: { receivedAt: number; at: number }, eventId: string, bytesOut: number): void {
    const observer = this.observer;
    if (observer === null || !observer.watching) return;
    observer.metrics?.request(202, bytesIn, bytesOut);
    observer.accessLog?.write({
      receivedAt: started.receivedAt,
      subdomain: arrival.subdomain,
      method: arrival.method,
      path: arrival.path,
      status: 202,
      bytesIn,
      bytesOut,
      durationMs: performance.now() - started.at,
      clientAddress: arrival.clientAddress,
      requestId: eventId,
      error: null,
    });
  }

  // ---- delivery -----------------------------------------------------------------------------------------

  /** The hook on the tunnel-connect path: a session opened, deliver what it holds. */
  tunnelConnected(session: TunnelSession): void {
    if (this.backlogged.has(session.subdomain) || this.store.queue.hasPending(session.subdomain)) this.drain(session.subdomain);
  }

  /** Something changed for `subdomain` through the API (redelivered, discarded, paused, resumed, mode, released). */
  changed(subdomain: string): void {
    // A redelivered event may sort before the cursor, a set-aside one may be back in line: look again.
    this.cursors.delete(subdomain);
    this.aside.delete(subdomain);
    this.poke(subdomain);
  }

  private poke(subdomain: string): void {
    if (this.closed) return;
    this.refresh(subdomain);
    this.naps.get(subdomain)?.wake();
    if (this.backlogged.has(subdomain) || this.store.queue.hasPending(subdomain)) this.drain(subdomain);
  }

  private refresh(subdomain: string): void {
    const meta = this.store.queue.metaOf(subdomain);
    const reservation = this.store.getReservation(subdomain);
    const committing = reservation !== undefined && this.enqueuing.has(holdKey(subdomain, reservation));
    if (committing || meta.paused || meta.pending - meta.aside > 0) this.backlogged.add(subdomain);
    else this.backlogged.delete(subdomain);
  }

  private drain(subdomain: string): void {
    if (this.draining.has(subdomain) || this.closed) return;
    this.draining.add(subdomain);
    let retry = false;
    this.drainLoop(subdomain)
      .catch((error: Error) => {
        // A delivery state that failed to store (a full disk): delivery goes on after a wait, so the name
        // is never left holding its live requests behind an event nobody delivers.
        retry = isWriteFailure(error);
        this.writeFailed(error, `delivery on ${subdomain}`);
      })
      .finally(() => {
        this.draining.delete(subdomain);
        this.aside.delete(subdomain);
        if (retry && !this.closed) void this.sleep(STORAGE_RETRY_MS).then(() => this.changed(subdomain));
      });
  }

  private async drainLoop(subdomain: string): Promise<void> {
    for (;;) {
      if (this.closed) return;
      const session = this.registry.session(subdomain);
      if (session === undefined || this.store.queue.metaOf(subdomain).paused) return;
      const next = this.nextEvent(subdomain);
      if (next === null) {
        this.cursors.delete(subdomain);
        this.refresh(subdomain);
        return;
      }
      if (typeof next === 'number') {
        // Only events set aside remain: live requests go through meanwhile.
        this.refresh(subdomain);
        await this.sleep(next, subdomain);
        continue;
      }
      const reservation = this.store.getReservation(subdomain);
      if (reservation === undefined || next.accountId !== reservation.accountId || generationOf(next) !== generationOf(reservation)) {
        // Accepted for an earlier reservation of the name: never delivered to its next owner.
        await this.store.queue.remove(next.id);
        this.aside.get(subdomain)?.delete(next.id);
        this.log(`offline queue: ${next.id} on ${subdomain} belonged to an earlier reservation of the name; dropped`);
        continue;
      }
      if (next.accountId !== session.accountId) return;
      if ((await this.attempt(next, session)) === 'interrupted') return;
    }
  }

  /**
   * What to deliver next on `subdomain`: a set-aside event whose retry is due, else the oldest event in
   * line; a number is how long until the first set-aside event is due; null when nothing is left.
   */
  private nextEvent(subdomain: string): QueuedEvent | number | null {
    let aside = this.aside.get(subdomain);
    if (aside === undefined) {
      aside = this.store.queue.setAside(subdomain);
      this.aside.set(subdomain, aside);
    }
    for (;;) {
      let dueId: string | null = null;
      let dueAt = Infinity;
      for (const [id, at] of aside) {
        if (at < dueAt) {
          dueAt = at;
          dueId = id;
        }
      }
      const now = Date.now();
      if (dueId !== null && dueAt <= now) {
        const event = this.store.queue.get(dueId);
        if (event !== undefined && event.retryAt != null && (event.state === 'queued' || event.state === 'delivering')) return event;
        aside.delete(dueId);
        continue;
      }
      const inLine = this.store.queue.nextInLine(subdomain, this.cursors.get(subdomain) ?? 0);
      if (inLine !== undefined) {
        this.cursors.set(subdomain, inLine.seq);
        return inLine;
      }
      return dueId === null ? null : Math.max(1, dueAt - now);
    }
  }

  /** One delivery attempt of an event: 'interrupted' when the tunnel went away or the queue paused. */
  private async attempt(queued: QueuedEvent, session: TunnelSession): Promise<'done' | 'interrupted'> {
    const queue = this.store.queue;
    const { id, subdomain } = queued;
    if (this.interrupted(session)) {
      if (!this.closed && queued.state === 'delivering') await queue.update(id, { state: 'queued' });
      return 'interrupted';
    }
    const attempt = queued.attempts + 1;
    const round = (queued.roundAttempts ?? 0) + 1;
    const event = await queue.update(id, { state: 'delivering', attempts: attempt, roundAttempts: round });
    if (event === undefined) {
      this.aside.get(subdomain)?.delete(id);
      return 'done';
    }
    let capture: CaptureRecord;
    try {
      capture = await session.replay(eventAsCapture(event, queue.body(id)), {
        headers: { 'burrow-delivery': String(attempt), 'burrow-received-at': nowIso(event.receivedAt) },
      });
    } catch (error) {
      // No room in the tunnel (TUNNEL_BUSY): not an attempt of the local server, wait and go again.
      await queue.update(id, { state: 'queued', attempts: attempt - 1, roundAttempts: round - 1 });
      if (!(error instanceof BurrowError) || error.code !== 'TUNNEL_BUSY') throw error;
      await this.sleep(100);
      return 'done';
    }
    if (this.closed) return 'interrupted';
    const change = { lastStatus: capture.status, lastError: capture.error, lastCaptureId: capture.id };
    const status = capture.error === null ? capture.status : null;
    const aside = this.aside.get(subdomain);
    if (status !== null && status >= 200 && status < 300) {
      await queue.update(id, { ...change, state: 'delivered', retryAt: null });
      aside?.delete(id);
      return 'done';
    }
    if (capture.error === 'TUNNEL_CLOSED' || capture.error === 'CLIENT_CLOSED' || !this.registry.serving(session)) {
      await queue.update(id, { ...change, state: 'queued' });
      return 'interrupted';
    }
    const final = status !== null && status >= 300 && status < 500 && status !== 408 && status !== 429;
    if (final || round > this.retryDelays.length) {
      await queue.update(id, { ...change, state: 'failed', retryAt: null });
      aside?.delete(id);
      const why = final ? `the local server answered ${status}, which a retry would not change` : `${round} attempts (last: ${capture.error ?? capture.status})`;
      this.log(`offline queue: ${id} on ${subdomain} parked as failed after ${why}`);
      return 'done';
    }
    const delay = this.retryDelays[round - 1]!;
    if (capture.error === 'LOCAL_UNREACHABLE') {
      // No local server: every event would fail alike, so the name waits and this event keeps its place.
      const retryAt = event.retryAt == null ? null : Date.now() + delay;
      await queue.update(id, { ...change, state: 'queued', retryAt });
      if (retryAt !== null) aside?.set(id, retryAt);
      await this.sleep(delay);
      return 'done';
    }
    // The local server is there and failed this event: it is retried later, the rest go on meanwhile.
    const retryAt = Date.now() + delay;
    const updated = await queue.update(id, { ...change, state: 'queued', retryAt });
    if (updated !== undefined) aside?.set(id, retryAt);
    return 'done';
  }

  private interrupted(session: TunnelSession): boolean {
    return this.closed || !this.registry.serving(session) || this.store.queue.metaOf(session.subdomain).paused;
  }

  /** Waits `ms`; a wait for `subdomain`'s set-aside events ends early when something changes on it. */
  private sleep(ms: number, subdomain?: string): Promise<void> {
    return new Promise((resolve) => {
      const sleeper: Sleeper = {
        timer: setTimeout(() => sleeper.wake(), ms),
        wake: () => {
          clearTimeout(sleeper.timer);
          this.sleepers.delete(sleeper);
          if (subdomain !== undefined && this.naps.get(subdomain) === sleeper) this.naps.delete(subdomain);
          resolve();
        },
      };
      this.sleepers.add(sleeper);
      if (subdomain !== undefined) this.naps.set(subdomain, sleeper);
    });
  }

  // ---- upkeep ---------------------------------------------------------------------------------------------

  private expire(): void {
    this.store.queue
      .expire((accountId) => {
        const account = this.store.getAccount(accountId);
        return account === undefined ? undefined : this.store.planLimits(account.plan).queueMaxAgeMs;
      })
      .then((dropped) => {
        for (const event of dropped) {
          if (event.state !== 'delivered') this.log(`offline queue: ${event.id} on ${event.subdomain} (${event.state}, received ${nowIso(event.receivedAt)}) expired and was dropped`);
          // Closed: the edge is shutting down and its store may be closing; nothing is served from here.
          if (!this.closed) this.refresh(event.subdomain);
        }
      })
      .catch((error: Error) => this.writeFailed(error, 'expiry'));
  }

  /** Stops delivery (the edge is closing); events being delivered stay pending for the next start. */
  close(): void {
    this.closed = true;
    clearInterval(this.expiryTimer);
    for (const sleeper of [...this.sleepers]) sleeper.wake();
  }
}

const NOTHING: Use = { events: 0, bytes: 0 };
const EMPTY = Buffer.alloc(0);
/** How long delivery waits after its state failed to store before it goes on. */
const STORAGE_RETRY_MS = 5_000;

/** In-flight work of a name is counted per reservation: an earlier owner's uploads never hold the next one's. */
function holdKey(subdomain: string, reservation: { generation?: string }): string {
  return `${subdomain} ${generationOf(reservation)}`;
}

function rateHeaders(rate: RateDecision): [string, string][] {
  return [
    ['retry-after', String(rate.resetSeconds)],
    ['ratelimit-limit', String(rate.limit)],
    ['ratelimit-remaining', String(rate.remaining)],
    ['ratelimit-reset', String(rate.resetSeconds)],
  ];
}

/**
 * Whom a per-source limit counts: an IPv4 address, or the /64 of an IPv6 address (one host usually
 * holds a whole /64, so counting single IPv6 addresses would limit nothing).
 */
export function sourceKey(address: string): string {
  if (address.indexOf(':') === -1) return address;
  const plain = address.toLowerCase().replace(/%.*$/, '');
  const halves = plain.split('::');
  if (halves.length > 2) return plain;
  const head = halves[0] === '' ? [] : halves[0]!.split(':');
  const tail = halves.length === 1 || halves[1] === '' ? [] : halves[1]!.split(':');
  const groups = halves.length === 1 ? head : [...head, ...new Array<string>(Math.max(0, 8 - head.length - tail.length)).fill('0'), ...tail];
  return `${groups.slice(0, 4).map((group) => group.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/**
 * The sender's own id of a delivery, when it sends one: a retry of a held event carries the same.
 * GitHub's X-GitHub-Delivery, Standard Webhooks' (Svix) webhook-id, an Idempotency-Key, and Stripe's
 * event id, read from the start of the body: Stripe writes `{"id": "evt_…", "object": "event", …`.
 * The id alone never makes a duplicate (anyone can send any id): the store pairs it with the body's
 * SHA-256 (docs/offline.md, "Duplicates").
 */
export function senderIdOf(headers: readonly string[], bodyStart: Uint8Array | null): string | null {
  for (let i = 0; i < headers.length; i += 2) {
    const value = headers[i + 1]!;
    // Names keep the sender's case (protocol 2): compared as HTTP does.
    switch (headers[i]!.toLowerCase()) {
      case 'x-github-delivery':
        if (value !== '') return `github:${value}`;
        break;
      case 'webhook-id':
      case 'svix-id':
        if (value !== '') return `webhook-id:${value}`;
        break;
      case 'idempotency-key':
        if (value !== '') return `idempotency-key:${value}`;
        break;
    }
  }
  if (bodyStart === null || bodyStart.byteLength === 0) return null;
  const text = Buffer.from(bodyStart.buffer, bodyStart.byteOffset, bodyStart.byteLength).toString('utf8');
  const stripe = STRIPE_EVENT_START.exec(text);
  return stripe === null ? null : `stripe:${stripe[1]}`;
}

const STRIPE_EVENT_START = /^\s*\{\s*"id"\s*:\s*"([A-Za-z0-9_]{1,200})"\s*,\s*"object"\s*:\s*"event"/;

/**
 * A held event in the shape the replay machinery sends; the capture of each attempt names the event.
 * Also the cluster's queue's (src/edge/cluster/offline-stream.ts).
 */
export function eventAsCapture(
  event: Pick<QueuedEvent, 'id' | 'subdomain' | 'accountId' | 'clientAddress' | 'method' | 'path' | 'receivedAt' | 'headers' | 'bodySize'>,
  body: Buffer | null,
): CaptureRecord {
  return {
    id: event.id,
    seq: 0,
    subdomain: event.subdomain,
    accountId: event.accountId,
    tokenId: '',
    clientAddress: event.clientAddress,
    method: event.method,
    path: event.path,
    status: 0,
    receivedAt: event.receivedAt,
    durationMs: 0,
    error: null,
    replayOf: null,
    requestBodySize: event.bodySize,
    requestTruncated: false,
    responseBodySize: 0,
    responseTruncated: false,
    requestHeaders: event.headers,
    requestBody: body,
    responseHeaders: [],
    responseBody: null,
  };
}
