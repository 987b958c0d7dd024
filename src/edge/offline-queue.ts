/**
 * Webhooks held while a reserved subdomain's tunnel is offline, delivered in order when it comes back
 * (issue 18, docs/offline.md).
 *
 * Public side: a reserved subdomain in `reject` mode answers 503 TUNNEL_UNAVAILABLE with Retry-After
 * while offline; in `queue` mode the whole request is committed to LMDB (src/store/offline-queue.ts)
 * before the 202 with `Burrow-Event-Id` leaves. While a subdomain holds undelivered events (or its queue
 * is paused), live requests are queued behind them too, so arrival order is delivery order.
 *
 * Delivery side: when the owner's tunnel connects, events go through it one at a time, oldest first, by
 * the replay machinery (a ReplayHttpStream with memory as the sink, so every attempt is a capture whose
 * `replay_of` is the event id). A non-2xx answer, a timeout or an unreachable local server is retried
 * with backoff a bounded number of times; then the event is parked as failed and the next one goes.
 */
import { BurrowError } from '../errors.js';
import { nowIso } from '../ids.js';
import type { QueueDriver } from '../api/types.js';
import type { CaptureRecord } from '../store/captures.js';
import type { QueuedEvent } from '../store/offline-queue.js';
import type { Store } from '../store/store.js';
import type { HttpRequest, HttpResponse } from '../uws.js';
import type { PublicRequestHead } from './headers.js';
import type { EdgeObserver } from './observer.js';
import type { EdgeRegistry } from './registry.js';
import { gatherBody } from './request-framing.js';
import { endHeadResponse, statusLine, writePublicError } from './responses.js';
import type { TunnelSession } from './session.js';

export interface OfflineQueueOptions {
  /** Waits between the attempts of one event: n delays make n + 1 attempts. */
  retryDelaysMs?: readonly number[];
  /** Largest request body held (413 beyond). */
  maxEventBody?: number;
  /** Retry-After of `reject` mode and of a full queue, in seconds. */
  retryAfterSeconds?: number;
  /** How often events past their plan's age limit are dropped. */
  expirySweepMs?: number;
}

export const DEFAULT_RETRY_DELAYS_MS: readonly number[] = [1_000, 2_000, 4_000, 8_000];
export const DEFAULT_MAX_EVENT_BODY = 1024 * 1024;

type Outcome = 'done' | 'interrupted';

export class OfflineQueue implements QueueDriver {
  /** Subdomains whose live requests must queue: undelivered events, enqueues in flight, or paused. */
  private readonly backlogged = new Set<string>();
  private readonly enqueuing = new Map<string, number>();
  private readonly draining = new Set<string>();
  /** Per subdomain, the sequence from which undelivered events are looked for (all before are done). */
  private readonly cursors = new Map<string, number>();
  private readonly sleepers = new Set<{ timer: NodeJS.Timeout; wake: () => void }>();
  private readonly retryDelays: readonly number[];
  private readonly maxEventBody: number;
  private readonly retryAfter: [string, string][];
  private readonly expiryTimer: NodeJS.Timeout;
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
    for (const subdomain of store.queue.subdomains()) this.refresh(subdomain);
    this.expiryTimer = setInterval(() => this.expire(), options.expirySweepMs ?? 60_000);
    this.expiryTimer.unref();
  }

  // ---- public side ------------------------------------------------------------------------------------

  /**
   * Answers a public request when the offline rules apply (the hook in Edge.servePublic): true when it
   * did. With a live tunnel and nothing held this is one Set lookup.
   */
  serves(res: HttpResponse, req: HttpRequest, head: PublicRequestHead, subdomain: string, clientAddress: string): boolean {
    const live = this.registry.session(subdomain) !== undefined;
    if (live && !this.backlogged.has(subdomain)) return false;
    const reservation = this.store.getReservation(subdomain);
    if (reservation === undefined) return false;
    const mode = reservation.offline ?? 'off';
    // A pause holds live requests only in queue mode; events held before a mode change still go first.
    if (live && mode !== 'queue' && !this.store.queue.hasPending(subdomain) && !this.enqueuing.has(subdomain)) return false;
    if (!live) {
      if (mode === 'off') return false;
      if (mode === 'reject') {
        if (this.observer?.watching === true) {
          const query = req.getQuery();
          this.observer.publicRefused('TUNNEL_UNAVAILABLE', 503, subdomain, req.getCaseSensitiveMethod(), query ? `${req.getUrl()}?${query}` : req.getUrl(), clientAddress);
        }
        writePublicError(res, 'TUNNEL_UNAVAILABLE', `No tunnel is connected on ${subdomain}; retry later.`, false, this.retryAfter, req.getHeader('accept'));
        return true;
      }
    }
    this.accept(res, req, head, subdomain, reservation.accountId, clientAddress);
    return true;
  }

  private accept(res: HttpResponse, req: HttpRequest, head: PublicRequestHead, subdomain: string, accountId: string, clientAddress: string): void {
    const method = req.getCaseSensitiveMethod();
    const url = req.getUrl();
    const query = req.getQuery();
    const path = query ? `${url}?${query}` : url;
    const exchange = { aborted: false };
    res.onAborted(() => {
      exchange.aborted = true;
    });
    const limit = this.maxEventBody;
    const tooLarge = (): void => {
      this.observer?.publicRefused('PAYLOAD_TOO_LARGE', 413, subdomain, method, path, clientAddress);
      writePublicError(res, 'PAYLOAD_TOO_LARGE', `A held request body may be at most ${limit} bytes.`, true);
    };
    gatherBody(res, head, limit, () => exchange.aborted, tooLarge, (body) => {
      this.enqueue(res, exchange, { subdomain, accountId, method, path, headers: head.headers, body: body === null || body.byteLength === 0 ? null : body, clientAddress });
    });
  }

  private enqueue(
    res: HttpResponse,
    exchange: { aborted: boolean },
    input: { subdomain: string; accountId: string; method: string; path: string; headers: string[]; body: Uint8Array | null; clientAddress: string },
  ): void {
    const { subdomain } = input;
    const account = this.store.getAccount(input.accountId);
    const limits = this.store.planLimits(account?.plan ?? 'FREE');
    this.enqueuing.set(subdomain, (this.enqueuing.get(subdomain) ?? 0) + 1);
    this.backlogged.add(subdomain);
    const dedupeKey = duplicateKeyOf(input.headers, input.body);
    const receivedAt = Date.now();
    const startedAt = performance.now();
    this.store.queue
      .enqueue({ ...input, dedupeKey }, { events: limits.queuedEvents, bytes: limits.queuedBytes })
      .then(
        (outcome) => {
          if (exchange.aborted) return;
          if ('full' in outcome) {
            this.observer?.publicRefused('QUEUE_FULL', 503, subdomain, input.method, input.path, input.clientAddress);
            res.cork(() => writePublicError(res, 'QUEUE_FULL', `The offline queue of ${subdomain} is full: ${outcome.full}.`, false, this.retryAfter));
            return;
          }
          const { event, duplicate } = outcome;
          const body = JSON.stringify({ event_id: event.id, state: event.state, duplicate });
          this.observed(input, receivedAt, startedAt, event.id, Buffer.byteLength(body));
          res.cork(() => {
            res.writeStatus(statusLine(202)).writeHeader('burrow-event-id', event.id).writeHeader('content-type', 'application/json');
            if (input.method === 'HEAD') endHeadResponse(res, Buffer.byteLength(body));
            else res.end(body);
          });
        },
        (error: Error) => {
          this.log(`offline queue: enqueue on ${subdomain} failed: ${error.stack ?? error.message}`);
          this.observer?.publicRefused('INTERNAL_ERROR', 500, subdomain, input.method, input.path, input.clientAddress);
          if (!exchange.aborted) res.cork(() => writePublicError(res, 'INTERNAL_ERROR'));
        },
      )
      .finally(() => {
        const left = (this.enqueuing.get(subdomain) ?? 1) - 1;
        if (left === 0) this.enqueuing.delete(subdomain);
        else this.enqueuing.set(subdomain, left);
        // New events sort after every other: the delivery cursor stays where it is.
        this.poke(subdomain);
      });
  }

  /** A held request answered 202: counted and access-logged, its event id as the request id. */
  private observed(
    input: { subdomain: string; method: string; path: string; body: Uint8Array | null; clientAddress: string },
    receivedAt: number,
    startedAt: number,
    eventId: string,
    bytesOut: number,
  ): void {
    const observer = this.observer;
    if (observer === null || !observer.watching) return;
    const bytesIn = input.body === null ? 0 : input.body.byteLength;
    observer.metrics?.request(202, bytesIn, bytesOut);
    observer.accessLog?.write({
      receivedAt,
      subdomain: input.subdomain,
      method: input.method,
      path: input.path,
      status: 202,
      bytesIn,
      bytesOut,
      durationMs: performance.now() - startedAt,
      clientAddress: input.clientAddress,
      requestId: eventId,
      error: null,
    });
  }

  // ---- delivery -----------------------------------------------------------------------------------------

  /** The hook on the tunnel-connect path: a session opened, deliver what it holds. */
  tunnelConnected(session: TunnelSession): void {
    if (this.backlogged.has(session.subdomain)) this.drain(session.subdomain);
  }

  /** Something changed for `subdomain` through the API (redelivered, discarded, paused, resumed, mode). */
  changed(subdomain: string): void {
    // A redelivered event may sort before the cursor: look from the start again.
    this.cursors.delete(subdomain);
    this.poke(subdomain);
  }

  private poke(subdomain: string): void {
    if (this.closed) return;
    this.refresh(subdomain);
    if (this.backlogged.has(subdomain)) this.drain(subdomain);
  }

  private refresh(subdomain: string): void {
    const held = (this.enqueuing.get(subdomain) ?? 0) > 0 || this.store.queue.metaOf(subdomain).paused || this.store.queue.hasPending(subdomain);
    if (held) this.backlogged.add(subdomain);
    else this.backlogged.delete(subdomain);
  }

  private drain(subdomain: string): void {
    if (this.draining.has(subdomain) || this.closed) return;
    this.draining.add(subdomain);
    this.drainLoop(subdomain)
      .catch((error: Error) => {
        if (!this.closed) this.log(`offline queue: delivery on ${subdomain} stopped: ${error.stack ?? error.message}`);
      })
      .finally(() => {
        this.draining.delete(subdomain);
      });
  }

  private async drainLoop(subdomain: string): Promise<void> {
    for (;;) {
      if (this.closed) return;
      const session = this.registry.session(subdomain);
      if (session === undefined || this.store.queue.metaOf(subdomain).paused) return;
      const event = this.store.queue.nextPending(subdomain, this.cursors.get(subdomain) ?? 0);
      if (event === undefined) {
        this.cursors.delete(subdomain);
        this.refresh(subdomain);
        return;
      }
      if (event.accountId !== session.accountId) return;
      this.cursors.set(subdomain, event.seq);
      if ((await this.deliver(event, session)) === 'interrupted') return;
    }
  }

  /** Delivers one event with its retries: 'interrupted' when the tunnel went away or the queue paused. */
  private async deliver(queued: QueuedEvent, session: TunnelSession): Promise<Outcome> {
    let event = queued;
    const queue = this.store.queue;
    const body = queue.body(event.id);
    for (let retry = 0; ; retry++) {
      if (this.interrupted(session)) return this.requeue(event);
      const attempt = event.attempts + 1;
      const delivering = await queue.update(event.id, { state: 'delivering', attempts: attempt });
      if (delivering === undefined) return 'done';
      event = delivering;
      let capture: CaptureRecord;
      try {
        capture = await session.replay(eventAsCapture(event, body), {
          headers: { 'burrow-delivery': String(attempt), 'burrow-received-at': nowIso(event.receivedAt) },
        });
      } catch (error) {
        // No room in the tunnel (TUNNEL_BUSY): not an attempt of the local server, wait and go again.
        await queue.update(event.id, { attempts: attempt - 1 });
        event = { ...event, attempts: attempt - 1 };
        if (!(error instanceof BurrowError) || error.code !== 'TUNNEL_BUSY') throw error;
        retry--;
        await this.sleep(100);
        continue;
      }
      if (this.closed) return 'interrupted';
      const status = capture.error === null ? capture.status : null;
      const change = { lastStatus: capture.status, lastError: capture.error, lastCaptureId: capture.id };
      if (status !== null && status >= 200 && status < 300) {
        await queue.update(event.id, { ...change, state: 'delivered' });
        return 'done';
      }
      if (capture.error === 'TUNNEL_CLOSED' || capture.error === 'CLIENT_CLOSED' || this.registry.session(session.subdomain) !== session) {
        await queue.update(event.id, { ...change, state: 'queued' });
        return 'interrupted';
      }
      if (retry >= this.retryDelays.length) {
        await queue.update(event.id, { ...change, state: 'failed' });
        this.log(`offline queue: ${event.id} on ${event.subdomain} failed after ${retry + 1} attempts (last: ${capture.error ?? capture.status}); parked as failed`);
        return 'done';
      }
      const updated = await queue.update(event.id, change);
      if (updated === undefined) return 'done';
      event = updated;
      await this.sleep(this.retryDelays[retry]!);
    }
  }

  private interrupted(session: TunnelSession): boolean {
    return this.closed || this.registry.session(session.subdomain) !== session || this.store.queue.metaOf(session.subdomain).paused;
  }

  private async requeue(event: QueuedEvent): Promise<Outcome> {
    if (!this.closed && event.state === 'delivering') await this.store.queue.update(event.id, { state: 'queued' });
    return 'interrupted';
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const sleeper = {
        timer: setTimeout(() => {
          this.sleepers.delete(sleeper);
          resolve();
        }, ms),
        wake: resolve,
      };
      this.sleepers.add(sleeper);
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
          this.refresh(event.subdomain);
        }
      })
      .catch((error: Error) => {
        if (!this.closed) this.log(`offline queue: expiry failed: ${error.message}`);
      });
  }

  /** Stops delivery (the edge is closing); events being delivered stay pending for the next start. */
  close(): void {
    this.closed = true;
    clearInterval(this.expiryTimer);
    for (const sleeper of this.sleepers) {
      clearTimeout(sleeper.timer);
      sleeper.wake();
    }
    this.sleepers.clear();
  }
}

/**
 * The provider's own id of a delivery, when it sends one: a retry of a held event carries the same.
 * GitHub's X-GitHub-Delivery, Standard Webhooks' (Svix) webhook-id, an Idempotency-Key, and Stripe's
 * event id (the body's "id" when its "object" is "event").
 */
export function duplicateKeyOf(headers: readonly string[], body: Uint8Array | null): string | null {
  let stripe = false;
  for (let i = 0; i < headers.length; i += 2) {
    const value = headers[i + 1]!;
    switch (headers[i]) {
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
      case 'stripe-signature':
        stripe = true;
        break;
    }
  }
  if (body === null || body.byteLength === 0) return null;
  // A JSON body is parsed only when it can be a Stripe event: a Stripe-Signature, or an object "event".
  const text = Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8');
  if (!stripe && !/"object"\s*:\s*"event"/.test(text)) return null;
  try {
    const parsed = JSON.parse(text) as { id?: unknown; object?: unknown };
    if (parsed !== null && typeof parsed === 'object' && parsed.object === 'event' && typeof parsed.id === 'string' && parsed.id !== '') {
      return `stripe:${parsed.id}`;
    }
  } catch {
    // Not JSON: no id to find.
  }
  return null;
}

/** A held event in the shape the replay machinery sends; the capture of each attempt names the event. */
function eventAsCapture(event: QueuedEvent, body: Buffer | null): CaptureRecord {
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
