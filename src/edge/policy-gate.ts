/**
 * Where the public listener applies a tunnel's policy (docs/policies.md, "Where each rule runs"): after
 * the request's head is read and its framing checked, before anything else touches it: before the
 * offline queue, the hop to another edge of a cluster, a stream to the tunnel, a capture. The edge calls
 * `run` only for a tunnel that has a policy; without one the request goes its way after a single check.
 *
 * What each decision does here:
 * - allow: the request goes on with the policy's header list (`route`).
 * - refuse: the edge's error (JSON, or the HTML page for a browser: src/edge/public-error.ts) with the
 *   rule's headers (WWW-Authenticate, Retry-After, RateLimit-*). A refusal of a webhook signature is
 *   kept as a capture marked "rejected: signature" (`error` SIGNATURE_INVALID), committed before the
 *   401 leaves, at most REJECTED_CAPTURES a minute per name so a flood of forgeries cannot push real
 *   requests out of the capture ring; no other refusal is captured.
 * - need-body: a request headed to the offline queue goes there (the queue verifies as it stores the
 *   body: never twice); any other is read whole, bounded (413 beyond), verified, and then handed on with
 *   its body (`ServerExchange.restoreBody`). With `Expect: 100-continue` the edge answers the 100 itself
 *   and the local server does not see the Expect (the body is already here). An upgrade has no body: it
 *   is verified against an empty one.
 * - respond: the edge answers itself (an OIDC redirect, the callback, sign-out).
 */
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import { fieldValue } from '../http1/head.js';
import type { ServerExchange } from '../http1/server.js';
import type { RingHandle, StoredCapture } from '../store/captures.js';
import { FixedWindowLimiter } from '../store/rate-limit.js';
import { CaptureBuffer } from '../capture-buffer.js';
import type { PublicRequestHead } from './headers.js';
import type { EdgeObserver } from './observer.js';
import type { OfflineQueue } from './offline-queue.js';
import type { PolicyDecision, PolicyRequest, TunnelPolicy } from './policy/decide.js';
import type { PolicyResponse } from './policy/oidc.js';
import { publicErrorAnswer } from './public-error.js';
import { gatherBody } from './request-framing.js';
import { writeOwn, writePublicError } from './responses.js';
import type { Captured, Turn } from './turn.js';

/** Rejected requests captured per name per minute on one edge; past it they are counted and logged only. */
export const REJECTED_CAPTURES = 60;
const EMPTY = Buffer.alloc(0);

/** A public request on its way through the policy. */
export interface GatedRequest {
  subdomain: string;
  target: string;
  head: PublicRequestHead;
  clientAddress: string;
  proto: string;
  /** The host the public client addressed (a trusted proxy's X-Forwarded-Host, else Host): OIDC's callback and cookies. */
  host: string;
  /** When the head arrived (epoch ms). */
  receivedAt: number;
}

/** A request the edge refused for its webhook signature, as a capture keeps it. */
export interface RejectedRequest {
  subdomain: string;
  method: string;
  path: string;
  /** The request's headers as the public client sent them (credentials redacted by the caller). */
  headers: readonly string[];
  clientAddress: string;
  receivedAt: number;
  /** The body (its first bytes, up to `maxBytes`; called at once, synchronously), or null when it was not read. */
  body(maxBytes: number): Buffer | null;
  /** The body's size (its declared length when it was not read; -1: not read, length unknown). */
  bodySize: number;
  /** The refusal's message. */
  message: string;
  /** The request's Accept: the answer is JSON or the HTML page, and the capture keeps what was sent. */
  accept: string;
}

/** Where a rejected request of a name is captured: its live session's ring, else its account's on this edge. */
export type RejectionRing = { ring: RingHandle; tokenId: string } | null;

export interface PolicyGateDeps {
  offline: OfflineQueue;
  observer: EdgeObserver;
  turn: Turn;
  /** Body bytes a capture keeps; 0 when capture is off. */
  captureLimit: number;
  rejectionRing(subdomain: string, accountId: string | null): RejectionRing | Promise<RejectionRing>;
  /** The request goes on (the offline queue, the hop, the tunnel); `publicFields`: its header list as sent, for the queue's own verification. */
  route(exchange: ServerExchange, request: GatedRequest, publicFields: readonly string[]): void;
  log(line: string): void;
}

export class PolicyGate {
  private readonly rejections = new FixedWindowLimiter(REJECTED_CAPTURES, 60_000);

  constructor(private readonly deps: PolicyGateDeps) {}

  /** Applies `policy` (a Promise while a forwarding edge reads it) to the request, then routes or answers. */
  run(exchange: ServerExchange, request: GatedRequest, policy: TunnelPolicy | Promise<TunnelPolicy | null>): void {
    if (!(policy instanceof Promise)) {
      this.decide(exchange, request, policy);
      return;
    }
    exchange.pauseBody();
    policy.then(
      (resolved) => {
        exchange.resumeBody();
        if (exchange.dead) return;
        if (resolved === null) this.deps.route(exchange, request, request.head.headers);
        else this.decide(exchange, request, resolved);
      },
      () => {
        exchange.resumeBody();
        // The policy could not be read (the cluster's store away): nothing is let through unchecked.
        this.answer(exchange, request, 'STORE_UNAVAILABLE', `The policy of ${request.subdomain} cannot be read now; retry.`, [['retry-after', '1']]);
      },
    );
  }

  private decide(exchange: ServerExchange, request: GatedRequest, policy: TunnelPolicy): void {
    const head = request.head;
    const policyRequest: PolicyRequest = {
      method: exchange.head.method,
      target: request.target,
      fields: head.headers,
      clientAddress: request.clientAddress,
      scheme: request.proto === 'https' ? 'https' : 'http',
      host: request.host,
    };
    const decision = policy.decide(policyRequest);
    if (!(decision instanceof Promise)) {
      this.decided(exchange, request, policy, decision);
      return;
    }
    // A basic-auth value not seen yet: scrypt runs on the thread pool meanwhile.
    exchange.pauseBody();
    decision.then(
      (settled) => {
        exchange.resumeBody();
        if (!exchange.dead) this.decided(exchange, request, policy, settled);
      },
      (error: Error) => {
        exchange.resumeBody();
        this.deps.log(`policy of ${request.subdomain}: ${error.stack ?? error.message}`);
        this.answer(exchange, request, 'INTERNAL_ERROR');
      },
    );
  }

  private decided(exchange: ServerExchange, request: GatedRequest, policy: TunnelPolicy, decision: PolicyDecision): void {
    switch (decision.kind) {
      case 'allow': {
        const publicFields = request.head.headers;
        request.head.headers = decision.fields as string[];
        this.deps.route(exchange, request, publicFields);
        return;
      }
      case 'refuse':
        this.refuse(exchange, request, policy, decision, null);
        return;
      case 'respond':
        this.respond(exchange, request, decision.response);
        return;
      case 'need-body':
        this.verify(exchange, request, policy, decision);
        return;
    }
  }

  private verify(exchange: ServerExchange, request: GatedRequest, policy: TunnelPolicy, decision: PolicyDecision & { kind: 'need-body' }): void {
    const head = request.head;
    const publicFields = head.headers;
    head.headers = decision.fields as string[];
    if (exchange.upgrade) {
      const verdict = decision.verify(EMPTY);
      if (verdict.kind === 'allow') this.deps.route(exchange, request, publicFields);
      else this.refuse(exchange, request, policy, verdict, null, publicFields);
      return;
    }
    // Headed to the offline queue: it verifies the body as it stores it.
    if (this.deps.offline.serves(exchange, request.target, head, request.subdomain, request.clientAddress, publicFields)) return;
    if (head.expectContinue) {
      if (head.contentLength > decision.maxBytes) {
        // The client waits for a 100 that will not come: the answer goes at once.
        this.refuse(exchange, request, policy, policy.tooLarge(), null, publicFields);
        return;
      }
      exchange.writeInterim(100, 'Continue', []);
      head.expectContinue = false;
      removeField(head.headers, 'expect');
    }
    gatherBody(exchange, head, decision.maxBytes, () => this.refuse(exchange, request, policy, policy.tooLarge(), null, publicFields), (body, trailers) => {
      if (exchange.dead) return;
      const verdict = decision.verify(body ?? EMPTY);
      if (verdict.kind !== 'allow') {
        this.refuse(exchange, request, policy, verdict, body ?? EMPTY, publicFields);
        return;
      }
      exchange.restoreBody(body, trailers);
      this.deps.route(exchange, request, publicFields);
    });
  }

  /**
   * Answers a refusal; one marked for capture is captured first. `body`: the body read (null when it was
   * not); `publicFields`: the head as sent, when `request.head.headers` was edited already.
   */
  private refuse(
    exchange: ServerExchange,
    request: GatedRequest,
    policy: TunnelPolicy,
    decision: PolicyDecision,
    body: Buffer | null,
    publicFields: readonly string[] = request.head.headers,
  ): void {
    if (decision.kind !== 'refuse') return;
    const extra: [string, string][] = [];
    for (let i = 2; i < decision.fields.length; i += 2) extra.push([decision.fields[i]!, decision.fields[i + 1]!]);
    const write = (): void => this.answer(exchange, request, decision.code, decision.reason, extra);
    if (decision.capture === null) {
      this.afterBody(exchange, write);
      return;
    }
    const rejected: RejectedRequest = {
      subdomain: request.subdomain,
      method: exchange.head.method,
      path: request.target,
      headers: policy.captureFields(publicFields),
      clientAddress: request.clientAddress,
      receivedAt: request.receivedAt,
      body: (maxBytes) => (body === null ? null : body.subarray(0, maxBytes)),
      bodySize: body !== null ? body.byteLength : request.head.chunked ? -1 : Math.max(0, request.head.contentLength),
      message: decision.reason,
      accept: fieldValue(exchange.head.fields, 'accept') ?? '',
    };
    this.afterBody(exchange, () => this.captureRejected(rejected, null, () => (exchange.dead ? undefined : write())));
  }

  /** Runs `then` once the request's body is read and dropped (bounded), at once when there is none left. */
  private afterBody(exchange: ServerExchange, then: () => void): void {
    if (exchange.hasBody && !exchange.requestEnded && exchange.sink === null) exchange.discardBody(then);
    else then();
  }

  /** The edge's own error answer on the tunnel host, counted and access-logged. */
  private answer(exchange: ServerExchange, request: GatedRequest, code: ErrorCode, message?: string, extra?: readonly [string, string][]): void {
    this.deps.observer.publicRefused(code, ERROR_CODES[code].status, request.subdomain, exchange.head.method, request.target, request.clientAddress);
    if (exchange.dead) return;
    // A body still arriving cannot be read to its end: the connection closes after the answer.
    writePublicError(exchange, code, message, !exchange.requestEnded && exchange.hasBody, extra);
  }

  /** An answer the policy makes itself (OIDC): the edge's page or redirect. */
  private respond(exchange: ServerExchange, request: GatedRequest, response: Promise<PolicyResponse>): void {
    exchange.pauseBody();
    response.then(
      (answer) => {
        exchange.resumeBody();
        if (exchange.dead) return;
        const fields = [...answer.fields];
        if (answer.code !== undefined) {
          fields.push('burrow-error', answer.code);
          this.deps.observer.publicRefused(answer.code, answer.status, request.subdomain, exchange.head.method, request.target, request.clientAddress);
        }
        this.afterBody(exchange, () => {
          if (!exchange.dead) writeOwn(exchange, answer.status, fields, answer.body === '' ? null : answer.body, !exchange.requestEnded);
        });
      },
      (error: Error) => {
        exchange.resumeBody();
        this.deps.log(`sign-in on ${request.subdomain}: ${error.stack ?? error.message}`);
        this.answer(exchange, request, 'SIGN_IN_FAILED');
      },
    );
  }

  /**
   * Keeps a request refused for its webhook signature as a capture marked "rejected: signature"
   * (status 401, error SIGNATURE_INVALID), then `answer`s (after the commit, as every capture). Past
   * REJECTED_CAPTURES a minute for the name, or with capture off, it answers without a capture.
   * `accountId`: the name's account when the caller knows it (the offline queue), else looked up.
   */
  captureRejected(rejected: RejectedRequest, accountId: string | null, answer: () => void): void {
    const limit = this.deps.captureLimit;
    if (limit === 0 || !this.rejections.hit(rejected.subdomain).allowed) {
      answer();
      return;
    }
    // Read now: the caller may drop the body's bytes as soon as this returns.
    const kept = new CaptureBuffer(limit);
    const body = rejected.body(limit);
    if (body !== null) kept.addOwned(body);
    const size = rejected.bodySize < 0 ? -1 : Math.max(rejected.bodySize, kept.size);
    const write = (where: RejectionRing): void => {
      if (where === null) answer();
      else this.deps.turn.capture(new RejectedCapture(where, rejected, kept, size, answer));
    };
    const where = this.deps.rejectionRing(rejected.subdomain, accountId);
    if (where instanceof Promise) where.then(write, () => answer());
    else write(where);
  }

  sweep(): void {
    this.rejections.sweep();
  }
}

/** A rejected request on its way to the capture ring: committed with the turn's other captures, then answered. */
class RejectedCapture implements Captured {
  readonly ring: RingHandle;
  readonly seq: number;
  private readonly id: string;
  private readonly tokenId: string;

  constructor(
    where: NonNullable<RejectionRing>,
    private readonly rejected: RejectedRequest,
    private readonly body: CaptureBuffer,
    private readonly bodySize: number,
    private readonly answer: () => void,
  ) {
    this.ring = where.ring;
    this.tokenId = where.tokenId;
    const next = where.ring.next();
    this.seq = next.seq;
    this.id = next.id;
  }

  storedCapture(): StoredCapture {
    const rejected = this.rejected;
    const code: ErrorCode = 'SIGNATURE_INVALID';
    const answer = publicErrorAnswer(code, rejected.message, rejected.accept);
    const responseHeaders: string[] = [];
    for (const [name, value] of answer.headers) responseHeaders.push(name, value);
    const responseBody = Buffer.from(answer.body);
    return {
      id: this.id,
      seq: this.seq,
      subdomain: rejected.subdomain,
      accountId: this.ring.accountId,
      tokenId: this.tokenId,
      clientAddress: rejected.clientAddress,
      method: rejected.method,
      path: rejected.path,
      status: answer.status,
      receivedAt: rejected.receivedAt,
      durationMs: Math.max(0, Date.now() - rejected.receivedAt),
      error: code,
      replayOf: null,
      requestBodySize: Math.max(this.bodySize, this.body.size),
      // A body of unknown length that was not read (refused from the head alone) is not shown as empty.
      requestTruncated: this.bodySize < 0 || this.body.size < this.bodySize,
      responseBodySize: responseBody.byteLength,
      responseTruncated: false,
      open: null,
      requestHeaders: rejected.headers as string[],
      requestBody: this.body.size === 0 ? null : this.body.bytes(),
      response: null,
      responseHeaders,
      responseBody,
    };
  }

  afterCapture(): void {
    this.answer();
  }
}

/** Removes every field named `lowerName` from a flat [name, value, ...] list, in place. */
function removeField(fields: string[], lowerName: string): void {
  for (let i = fields.length - 2; i >= 0; i -= 2) {
    if (fields[i]!.length === lowerName.length && fields[i]!.toLowerCase() === lowerName) fields.splice(i, 2);
  }
}
