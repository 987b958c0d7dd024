/**
 * The offline queue in cluster mode (docs/offline.md, "In cluster mode"; issue 28, item 4), on the
 * cluster's Redis (src/store/redis-offline-queue.ts) instead of each edge's LMDB.
 *
 * Public side: a request for a reserved name that no edge holds (the hop's owner lookup found none) is
 * answered by the name's offline mode: `reject` 503 TUNNEL_UNAVAILABLE, `queue` held (the source's rate
 * on this edge, the body's size, the stored policy's webhook signatures, then the name's and the
 * account's bounds and duplicates, checked and appended in one script), answered 202 with
 * `Burrow-Event-Id` only once Redis (and with replicas, a replica: WAIT) has the event.
 *
 * Delivery: an edge serving the name's tunnel takes the name's delivery lock in Redis (one edge at a time,
 * also when the client is attached to several), and delivers the oldest event through its session, one
 * at a time, in arrival order; an event is removed from the stream (acked) by the lock holder only after
 * the local server's answer, so an edge killed mid-delivery leaves it for the next holder of the lock
 * (its lock lapses after `lockTtlMs`). A 5xx, 408, 429 or timeout is retried with backoff (the events
 * behind it wait: order is kept); an answer a retry would not change (3xx, other 4xx), or the last
 * attempt, parks the event as failed.
 */
import type { Readable } from 'node:stream';
import { BurrowError, ERROR_CODES, type ErrorCode } from '../../errors.js';
import { nowIso } from '../../ids.js';
import type { ServerExchange } from '../../http1/server.js';
import type { AccountStore, ReservationRecord } from '../../store/account-store.js';
import type { CaptureRecord } from '../../store/captures.js';
import { generationOf, newEventId } from '../../store/offline-queue.js';
import { FixedWindowLimiter } from '../../store/rate-limit.js';
import type { HeldEvent, RedisOfflineQueue } from '../../store/redis-offline-queue.js';
import type { SecretBox } from '../../store/secret-box.js';
import { DEFAULT_MAX_EVENT_BODY, DEFAULT_RETRY_DELAYS_MS, DEFAULT_SOURCE_RATE_LIMIT, eventAsCapture, senderIdOf, sourceKey } from '../offline-queue.js';
import { beginWebhookChecks, fieldValue, signatureRefusal } from '../policy/webhooks.js';
import { ReservationVerifiers, VerifiersUnavailable } from '../policy/reservation-verifiers.js';
import { writeOwn, writePublicError } from '../responses.js';
import type { TunnelSession } from '../session.js';
import { PublicUpload, type ForwardedRequest } from './hop-http.js';
import type { ClusterRegistry } from './registry.js';
import { createHash } from 'node:crypto';

export interface ClusterOfflineOptions {
  retryDelaysMs?: readonly number[];
  maxEventBody?: number;
  retryAfterSeconds?: number;
  sourceRateLimit?: number;
  secrets?: SecretBox;
  /** How long a delivering edge's lock lives without renewal: an edge killed mid-delivery holds the name this long. */
  lockTtlMs?: number;
  /** How often names with held events and a tunnel here are looked at (a lapsed lock of a dead edge, a lost message). */
  sweepMs?: number;
}

/** What the hop knows of a request for a name no edge holds. */
export type OfflineRequest = Pick<ForwardedRequest, 'subdomain' | 'method' | 'path' | 'headers' | 'contentLength' | 'chunked' | 'expectContinue' | 'clientAddress' | 'proto'>;

export const DEFAULT_LOCK_TTL_MS = 5_000;
/** GET /api/v1/queue lists at most this many held events of a name (a PRO name holds up to 10,000). */
const LISTED_AT_MOST = 1_000;
const LIST_PAGE = 10;
const SOURCE_RATE_WINDOW_MS = 60_000;

export class ClusterOfflineQueue {
  private readonly retryDelays: readonly number[];
  private readonly maxEventBody: number;
  private readonly retryAfter: [string, string][];
  private readonly sourceRate: FixedWindowLimiter;
  private readonly verifiers: ReservationVerifiers;
  private readonly lockTtlMs: number;
  private readonly token: string;
  /**
   * Names with events held, as far as this edge heard ('queued' and 'drained' messages, what a drain
   * found): their live requests are held too while this edge serves the tunnel, behind the queue.
   */
  private readonly known = new Set<string>();
  private readonly draining = new Set<string>();
  private readonly sweepTimer: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly queue: RedisOfflineQueue,
    private readonly accounts: AccountStore,
    private readonly registry: ClusterRegistry,
    private readonly log: (line: string) => void,
    options: ClusterOfflineOptions = {},
  ) {
    this.retryDelays = options.retryDelaysMs ?? DEFAULT_RETRY_DELAYS_MS;
    this.maxEventBody = options.maxEventBody ?? DEFAULT_MAX_EVENT_BODY;
    this.retryAfter = [['retry-after', String(options.retryAfterSeconds ?? 60)]];
    this.sourceRate = new FixedWindowLimiter(options.sourceRateLimit ?? DEFAULT_SOURCE_RATE_LIMIT, SOURCE_RATE_WINDOW_MS);
    this.verifiers = new ReservationVerifiers(options.secrets ?? null);
    this.lockTtlMs = options.lockTtlMs ?? DEFAULT_LOCK_TTL_MS;
    const self = registry.self;
    this.token = `${self.nodeId} ${self.boot}`;
    registry.on('queued', (subdomain) => {
      this.known.add(subdomain);
      if (registry.session(subdomain) !== undefined) this.drain(subdomain);
    });
    registry.on('drained', (subdomain) => this.known.delete(subdomain));
    this.sweepTimer = setInterval(() => {
      this.sourceRate.sweep();
      for (const subdomain of this.known) if (registry.session(subdomain) !== undefined) this.drain(subdomain);
    }, options.sweepMs ?? 1_000);
    this.sweepTimer.unref();
  }

  // ---- public side ------------------------------------------------------------------------------------

  /**
   * A request for `subdomain`, which no edge holds: answered here when its reservation's offline mode is
   * `reject` or `queue` (true), else left to the caller's 404 (false). Resolves once that is decided;
   * holding the body and the answer go on after.
   */
  async takes(exchange: ServerExchange, request: OfflineRequest, body: Readable | null): Promise<boolean> {
    const reservation = await this.accounts.getReservation(request.subdomain);
    const mode = reservation?.offline ?? 'off';
    if (reservation === undefined || mode === 'off' || exchange.dead) return false;
    if (mode === 'reject') {
      writePublicError(exchange, 'TUNNEL_UNAVAILABLE', `No tunnel is connected on ${request.subdomain}; retry later.`, body !== null, this.retryAfter);
      return true;
    }
    this.holdAnswered(exchange, request, body, reservation);
    return true;
  }

  /** Whether events are held for `subdomain`, as far as this edge heard. */
  backlogged(subdomain: string): boolean {
    return this.known.size !== 0 && this.known.has(subdomain);
  }

  /**
   * A live request on a name this edge serves while events are held for it (the Set lookup is all it
   * costs otherwise): held behind them, whatever the name's mode now, so the local server sees requests
   * in arrival order (docs/offline.md). True when it took the request.
   */
  holdsLive(exchange: ServerExchange, request: OfflineRequest): boolean {
    if (!this.backlogged(request.subdomain)) return false;
    let body: PublicUpload | null = null;
    if (request.contentLength > 0 || request.chunked) {
      const upload = new PublicUpload(exchange);
      upload.on('error', () => undefined);
      exchange.attach({ onRequestBody: (chunk, last) => upload.feed(chunk, last), onAborted: () => upload.destroy() });
      if (request.expectContinue) exchange.writeInterim(100, 'Continue', []);
      body = upload;
    }
    void Promise.resolve(this.accounts.getReservation(request.subdomain)).then(
      (reservation) => {
        if (reservation !== undefined) this.holdAnswered(exchange, request, body, reservation);
        else if (!exchange.dead) writePublicError(exchange, 'TUNNEL_NOT_FOUND', `The reservation of ${request.subdomain} ended; nothing was stored.`, body !== null);
      },
      () => {
        if (!exchange.dead) writePublicError(exchange, 'STORE_UNAVAILABLE', undefined, body !== null, [['retry-after', '1']]);
      },
    );
    return true;
  }

  /** Holds the request and answers it, whatever happens. */
  private holdAnswered(exchange: ServerExchange, request: OfflineRequest, body: Readable | null, reservation: ReservationRecord): void {
    void this.hold(exchange, request, body, reservation).catch((error: Error) => {
      const code: ErrorCode = error instanceof BurrowError ? error.code : 'INTERNAL_ERROR';
      if (!(error instanceof BurrowError)) this.log(`offline queue: holding a request on ${request.subdomain} failed: ${error.stack ?? error.message}`);
      if (!exchange.dead) writePublicError(exchange, code, error instanceof BurrowError ? error.message : ERROR_CODES.INTERNAL_ERROR.message, body !== null, error instanceof BurrowError ? Object.entries(error.headers) : []);
    });
  }

  private async hold(exchange: ServerExchange, request: OfflineRequest, body: Readable | null, reservation: ReservationRecord): Promise<void> {
    const { subdomain, method, path, headers } = request;
    const refuse = (code: ErrorCode, message: string, extra: [string, string][] = []): void => {
      body?.destroy();
      if (!exchange.dead) writePublicError(exchange, code, message, body !== null, extra);
    };
    const verifiers = this.verifiers.of(subdomain, reservation.policy);
    if (verifiers instanceof VerifiersUnavailable) return refuse('POLICY_UNAVAILABLE', `The tunnel's policy cannot be read on this edge: ${verifiers.reason}.`, [['retry-after', '30']]);
    const host = fieldValue(headers, 'host') ?? subdomain;
    const checks = verifiers === null ? null : beginWebhookChecks(verifiers, { method, target: path, fields: headers, publicUrl: `${request.proto}://${host}${path}`, now: Date.now() });
    if (checks?.early?.ok === false) return refuse('SIGNATURE_INVALID', signatureRefusal(checks.early.reason));
    const rate = this.sourceRate.hit(`${sourceKey(request.clientAddress)} ${subdomain}`);
    if (!rate.allowed) return refuse('RATE_LIMITED', `At most ${rate.limit} requests a minute from one address are held on ${subdomain}.`, [['retry-after', String(rate.resetSeconds)]]);
    if (request.contentLength > this.maxEventBody) return refuse('PAYLOAD_TOO_LARGE', `A held request body may be at most ${this.maxEventBody} bytes.`);
    const receivedAt = Date.now();
    // Redis takes the event whole: the body is gathered (at most maxEventBody) before it is sent.
    const chunks: Buffer[] = [];
    let size = 0;
    if (body !== null) {
      for await (const chunk of body as AsyncIterable<Buffer>) {
        size += chunk.byteLength;
        if (size > this.maxEventBody) return refuse('PAYLOAD_TOO_LARGE', `A held request body may be at most ${this.maxEventBody} bytes.`);
        chunks.push(chunk);
        checks?.update(chunk);
      }
    }
    const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
    const verdict = checks?.finish() ?? null;
    if (verdict?.ok === false) {
      if (!exchange.dead) writePublicError(exchange, 'SIGNATURE_INVALID', signatureRefusal(verdict.reason));
      return;
    }
    const account = await this.accounts.getAccount(reservation.accountId);
    const limits = this.accounts.planLimits(account?.plan ?? 'FREE');
    const senderId = senderIdOf(headers, bytes.subarray(0, 256));
    // A sender's id alone never makes a duplicate (anyone can send any id): paired with the body's digest.
    const duplicateKey = senderId === null ? null : `${senderId} ${createHash('sha256').update(bytes).digest('hex')}`;
    const outcome = await this.queue.hold(
      subdomain,
      { id: newEventId(), accountId: reservation.accountId, generation: generationOf(reservation), method, path, headers, clientAddress: request.clientAddress, receivedAt, body: bytes },
      { events: limits.queuedEvents, bytes: limits.queuedBytes, accountEvents: limits.accountQueuedEvents, accountBytes: limits.accountQueuedBytes },
      duplicateKey,
    );
    if ('full' in outcome) {
      if (!exchange.dead) writePublicError(exchange, 'QUEUE_FULL', `The offline queue of ${subdomain} is full: ${outcome.full}.`, false, this.retryAfter);
      return;
    }
    if (exchange.dead) return;
    const answer = JSON.stringify({ event_id: outcome.held, state: 'queued', duplicate: outcome.duplicate });
    writeOwn(exchange, 202, ['burrow-event-id', outcome.held, 'content-type', 'application/json'], answer);
  }

  /** GET /api/v1/queue in cluster mode (ClusterQueueView): the events held for this reservation, oldest first. */
  async list(subdomain: string, accountId: string, generation: string): Promise<{ events: number; bytes: number; queue: Record<string, unknown>[] }> {
    const use = await this.queue.use(subdomain);
    const queue: Record<string, unknown>[] = [];
    // Read a few at a time: entries carry their bodies (up to 1 MiB each), and only their heads are listed.
    let after: string | undefined;
    while (queue.length < LISTED_AT_MOST) {
      const page = await this.queue.oldest(subdomain, LIST_PAGE, after);
      for (const event of page) if (event.accountId === accountId && event.generation === generation) queue.push(listed(event, subdomain));
      if (page.length < LIST_PAGE) break;
      after = page[page.length - 1]!.streamId;
    }
    return { ...use, queue: queue.slice(0, LISTED_AT_MOST) };
  }

  /**
   * Something changed for `subdomain` through the API (the QueueDriver hook)
: a released reservation
   * drops what its name held, so the account's bounds are not kept taken by events nobody will deliver.
   */
  changed(subdomain: string): void {
    void (async () => {
      const [event] = await this.queue.oldest(subdomain, 1);
      if (event === undefined) return;
      const reservation = await this.accounts.getReservation(subdomain);
      if (reservation !== undefined && reservation.accountId === event.accountId && generationOf(reservation) === event.generation) return;
      const dropped = await this.queue.drop(subdomain, event.accountId);
      this.known.delete(subdomain);
      this.log(`offline queue: ${dropped} event(s) held for ${subdomain} dropped: its reservation was released`);
    })().catch(() => undefined);
  }

  // ---- delivery -----------------------------------------------------------------------------------------

  /** A session opened here: deliver what its name holds. */
  tunnelConnected(session: TunnelSession): void {
    this.drain(session.subdomain);
  }

  private drain(subdomain: string): void {
    if (this.draining.has(subdomain) || this.closed) return;
    this.draining.add(subdomain);
    this.drainLoop(subdomain)
      .catch((error: Error) => {
        if (!(error instanceof BurrowError)) this.log(`offline queue: delivery on ${subdomain} failed: ${error.stack ?? error.message}`);
      })
      .finally(() => this.draining.delete(subdomain));
  }

  private async drainLoop(subdomain: string): Promise<void> {
    let locked = false;
    let lost = false;
    // The lock is renewed while this edge delivers (a retry's backoff included).
    const renew = setInterval(() => {
      void this.queue.lock(subdomain, this.token, this.lockTtlMs).then(
        (ok) => (lost ||= !ok),
        () => undefined,
      );
    }, Math.max(100, Math.floor(this.lockTtlMs / 3)));
    try {
      for (;;) {
        if (this.closed || lost) return;
        const session = this.registry.session(subdomain);
        if (session === undefined) return;
        if (!(await this.queue.lock(subdomain, this.token, this.lockTtlMs))) return;
        locked = true;
        const [event] = await this.queue.oldest(subdomain, 1);
        if (event === undefined) {
          this.known.delete(subdomain);
          return;
        }
        this.known.add(subdomain);
        const reservation = await this.accounts.getReservation(subdomain);
        if (reservation === undefined || reservation.accountId !== event.accountId || generationOf(reservation) !== event.generation) {
          // Accepted for an earlier reservation of the name: never delivered to its next owner.
          await this.queue.ack(subdomain, event, this.token, 'it was held for an earlier reservation of the name');
          continue;
        }
        if (event.accountId !== session.accountId) return;
        const account = await this.accounts.getAccount(event.accountId);
        const maxAgeMs = this.accounts.planLimits(account?.plan ?? 'FREE').queueMaxAgeMs;
        if (Date.now() - event.receivedAt > maxAgeMs) {
          // Past the plan's age limit: dropped (kept among the failed ones), never delivered.
          this.log(`offline queue: ${event.id} on ${subdomain} (received ${nowIso(event.receivedAt)}) expired and was dropped`);
          await this.queue.ack(subdomain, event, this.token, `expired: held longer than ${maxAgeMs} ms`);
          continue;
        }
        const outcome = await this.deliver(event, session, () => lost);
        if (outcome === 'interrupted') return;
      }
    } finally {
      clearInterval(renew);
      if (locked && !this.closed) await this.queue.unlock(subdomain, this.token).catch(() => undefined);
    }
  }

  /** Every attempt of one event, in turn: 'done' when it was acked (delivered or parked as failed). */
  private async deliver(event: HeldEvent, session: TunnelSession, lost: () => boolean): Promise<'done' | 'interrupted'> {
    const subdomain = session.subdomain;
    for (let round = 1; ; round++) {
      if (this.closed || lost() || this.registry.session(subdomain) !== session) return 'interrupted';
      let capture: CaptureRecord;
      try {
        capture = await session.replay(eventAsCapture({ ...event, subdomain, bodySize: event.body.byteLength }, event.body), {
          headers: { 'burrow-delivery': String(round), 'burrow-received-at': nowIso(event.receivedAt), 'burrow-event-id': event.id },
        });
      } catch (error) {
        if (!(error instanceof BurrowError) || error.code !== 'TUNNEL_BUSY') throw error;
        round--;
        await sleep(100);
        continue;
      }
      if (capture.error === 'TUNNEL_CLOSED' || capture.error === 'CLIENT_CLOSED' || this.registry.session(subdomain) !== session) return 'interrupted';
      const status = capture.error === null ? capture.status : null;
      if (status !== null && status >= 200 && status < 300) {
        const acked = await this.queue.ack(subdomain, event, this.token, null);
        return acked === 'lost' ? 'interrupted' : 'done';
      }
      const final = status !== null && status >= 300 && status < 500 && status !== 408 && status !== 429;
      if (final || round > this.retryDelays.length) {
        const why = final ? `the local server answered ${status}, which a retry would not change` : `${round} attempts (last: ${capture.error ?? capture.status})`;
        this.log(`offline queue: ${event.id} on ${subdomain} parked as failed after ${why}`);
        const acked = await this.queue.ack(subdomain, event, this.token, why);
        return acked === 'lost' ? 'interrupted' : 'done';
      }
      await sleep(this.retryDelays[round - 1]!);
    }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.sweepTimer);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A held event as GET /api/v1/queue shows it (src/api/queue-routes.ts's eventJson, what Redis keeps of it). */
function listed(event: HeldEvent, subdomain: string): Record<string, unknown> {
  return {
    id: event.id,
    subdomain,
    state: 'queued',
    attempts: 0,
    received_at: nowIso(event.receivedAt),
    method: event.method,
    path: event.path,
    size: event.body.byteLength,
    last_status: null,
    last_error: null,
    last_request_id: null,
    sender_id: null,
    next_attempt_at: null,
  };
}
