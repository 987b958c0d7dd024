/**
 * A public HTTP request forwarded to the edge that holds its tunnel (docs/cluster.md, "The internal
 * hop"). The request's head is the one this edge read (readPublicRequestHead: X-Forwarded-* already
 * the edge's), sent with the cluster secret and the client's address and scheme; the owner takes it as
 * a public request and captures it. Bodies stream both ways under backpressure: a full hop pauses the
 * public upload (the exchange's pauseBody), a slow public reader pauses the owner's response (undici's
 * controller), so memory stays bounded by the socket buffers.
 *
 * Nothing of the owner's answer is changed but its framing: status line (with its reason phrase),
 * fields in their case, trailers, so a client sees the same answer through any edge. The hop is undici
 * (measured against src/http1 on raw sockets in issue 24: see docs/cluster.md); what it cannot carry is
 * listed there: 1xx other than the 100 this edge answers itself for `Expect: 100-continue` (undici
 * refuses to send Expect), and request trailers.
 */
import { Readable } from 'node:stream';
import type { Agent, Dispatcher } from 'undici';
import type { ErrorCode } from '../../errors.js';
import { standardReason } from '../../http1/head.js';
import type { ExchangeSink, ServerExchange } from '../../http1/server.js';
import { writePublicError } from '../responses.js';
import { CLIENT_HEADER, CLUSTER_HEADER_PREFIX, NOT_OWNER_HEADER, ORDER_HEADER, PROTO_HEADER, SECRET_HEADER } from './secret.js';
import { headerOrder } from './forwarded-head.js';
import { connectionRefused } from './peer-link.js';
import type { ClusterDirectory } from './types.js';

export interface ForwardedRequest {
  subdomain: string;
  method: string;
  /** The request target as sent to the local server (origin-form). */
  path: string;
  /** readPublicRequestHead's headers: [name, value, ...], hop-by-hop ones already dropped. */
  headers: string[];
  contentLength: number;
  chunked: boolean;
  expectContinue: boolean;
  clientAddress: string;
  proto: string;
  /** The 404's message when no edge holds the tunnel: the one the edge gives for a local miss. */
  notFound: string;
}

/**
 * The cluster's offline queue (src/edge/cluster/offline-stream.ts): a request for a name no edge holds
 * is its to answer when it resolves true (the name's offline mode is reject or queue); the body, if any,
 * arrives on `body`.
 */
export type OfflineHold = (exchange: ServerExchange, request: ForwardedRequest, body: Readable | null) => Promise<boolean>;

export interface ForwardLimits {
  maxRequestBody: number;
  /** The edge's 504 timer; the owner's own fires first, this one covers an owner that never answers. */
  requestTimeoutMs: number;
}

/** Response fields that are this edge's writer's to write (framing) or the hop's own. */
const OWN_RESPONSE_HEADERS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive']);
/** Request fields undici refuses to carry (it frames the hop itself; it cannot send Expect). */
const UNSENDABLE = new Set(['expect', 'host', 'content-length']);
const RETRY_SOON: [string, string][] = [['retry-after', '1']];
/**
 * How many edges a request is sent to when the first ones refuse the connection (a tunnel attached to
 * several edges, one of them just died): the request never reached them, so another may take it.
 */
export const HOP_CONNECT_TRIES = 3;

/** The public upload as a stream (the hop's request body, a held event's): pushes pause the public socket when it is full. */
export class PublicUpload extends Readable {
  constructor(private readonly exchange: ServerExchange) {
    super({ highWaterMark: 64 * 1024 });
  }

  paused = false;
  /** undici began reading the body: it went (in part) to an edge, so the request cannot go to another. */
  started = false;

  override _read(): void {
    this.started = true;
    if (this.paused) {
      this.paused = false;
      this.exchange.resumeBody();
    }
  }

  feed(chunk: Buffer | null, last: boolean): void {
    const more = chunk === null || chunk.byteLength === 0 ? true : this.push(chunk);
    if (last) this.push(null);
    else if (!more && !this.paused) {
      this.paused = true;
      this.exchange.pauseBody();
    }
  }
}

const enum Phase {
  /** Asking the directory, or waiting for the owner's head. */
  WAITING,
  /** The head is written: the body streams. */
  STREAMING,
  DONE,
}

export class ForwardedExchange implements Dispatcher.DispatchHandler, ExchangeSink {
  private phase = Phase.WAITING;
  private aborted = false;
  private upload: PublicUpload | null = null;
  private uploadDone = true;
  private received = 0;
  private controller: Dispatcher.DispatchController | null = null;
  /** The edge asked now, and how many were asked. */
  private ownerNode = '';
  private tries = 0;
  /** A dispatch given up because its edge answered "not mine" (the request goes to another edge): its end is not this request's. */
  private abandoned: Dispatcher.DispatchController | null = null;

  constructor(
    private readonly exchange: ServerExchange,
    private readonly request: ForwardedRequest,
    private readonly directory: ClusterDirectory,
    private readonly agent: Agent,
    private readonly secret: string,
    private readonly limits: ForwardLimits,
    private readonly refused: (code: ErrorCode) => void,
    private readonly offline: OfflineHold | null = null,
  ) {}

  /** When the request arrives: takes the body as it comes, then asks who holds the tunnel. */
  start(): void {
    const exchange = this.exchange;
    const request = this.request;
    if (request.contentLength > this.limits.maxRequestBody) {
      this.refused('PAYLOAD_TOO_LARGE');
      this.phase = Phase.DONE;
      exchange.discardBody(() => writePublicError(exchange, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${this.limits.maxRequestBody} bytes.`, true));
      return;
    }
    if (request.contentLength > 0 || request.chunked) {
      const upload = new PublicUpload(exchange);
      this.upload = upload;
      this.uploadDone = false;
      upload.on('error', () => undefined);
      // undici cannot send Expect, so the owner never sees it: the 100 is this edge's.
      if (request.expectContinue) exchange.writeInterim(100, 'Continue', []);
    }
    // Attached once the upload exists: body bytes that came before (a request that waited for its
    // tunnel's policy, or whose body was read whole for a webhook signature) go into it now.
    exchange.attach(this);
    this.route();
  }

  /** Asks who holds the tunnel and sends the request there. */
  private route(): void {
    const request = this.request;
    this.directory.ownerOf(request.subdomain).then(
      (owner) => {
        if (this.aborted || this.phase === Phase.DONE) return;
        if (owner === null && this.offline !== null) {
          this.holdOffline(this.offline);
          return;
        }
        if (owner === null || owner.nodeId === this.directory.self.nodeId) {
          this.fail('TUNNEL_NOT_FOUND', request.notFound);
          return;
        }
        this.ownerNode = owner.nodeId;
        this.tries++;
        this.dispatch(owner.advertise);
      },
      () => this.fail('STORE_UNAVAILABLE', undefined, RETRY_SOON),
    );
  }

  /** No edge holds the tunnel: the name's offline mode answers, else 404. */
  private holdOffline(offline: OfflineHold): void {
    offline(this.exchange, this.request, this.upload).then(
      (taken) => {
        if (taken) this.phase = Phase.DONE;
        else this.fail('TUNNEL_NOT_FOUND', this.request.notFound);
      },
      () => this.fail('STORE_UNAVAILABLE', undefined, RETRY_SOON),
    );
  }

  // ---- the public request (ExchangeSink) -----------------------------------------------------------

  onRequestBody(chunk: Buffer | null, last: boolean): void {
    const upload = this.upload;
    if (upload === null || (this.phase === Phase.DONE && this.uploadDone)) return;
    if (chunk !== null) {
      this.received += chunk.byteLength;
      if (this.received > this.limits.maxRequestBody) {
        this.overLimit(last);
        return;
      }
    }
    if (last) this.uploadDone = true;
    upload.feed(chunk, last);
  }

  onAborted(): void {
    this.aborted = true;
    this.phase = Phase.DONE;
    this.upload?.destroy();
    this.controller?.abort(new Error('the public client went away'));
  }

  onWritable(): void {
    if (this.phase === Phase.STREAMING) this.controller?.resume();
  }

  private dispatch(origin: string): void {
    const request = this.request;
    const headers: string[] = [];
    let hostAt = -1;
    let lengthAt = -1;
    let host: [string, string] | null = null;
    let length: string | null = null;
    for (let i = 0, pair = 0; i < request.headers.length; i += 2, pair++) {
      const name = request.headers[i]!;
      const lower = name.toLowerCase();
      if (lower === 'host') {
        hostAt = pair;
        host = [name, request.headers[i + 1]!];
      } else if (lower === 'content-length') {
        lengthAt = pair;
        length = name;
      }
      if (UNSENDABLE.has(lower)) continue;
      headers.push(name, request.headers[i + 1]!);
    }
    // undici writes Host first and Content-Length last: the owner puts them back where they were.
    headers.push(SECRET_HEADER, this.secret, CLIENT_HEADER, request.clientAddress, PROTO_HEADER, request.proto, ORDER_HEADER, headerOrder(hostAt, lengthAt, host?.[0] ?? 'host', length ?? 'content-length'));
    if (host !== null) headers.push(host[0], host[1]);
    if (request.contentLength >= 0) headers.push(length ?? 'content-length', String(request.contentLength));
    this.agent.dispatch(
      {
        origin,
        path: request.path,
        method: request.method as Dispatcher.HttpMethod,
        headers,
        body: this.upload,
        headersTimeout: this.limits.requestTimeoutMs + 1_000,
        bodyTimeout: 0,
      },
      this,
    );
  }

  // ---- undici's handler --------------------------------------------------------------------------

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.aborted) controller.abort(new Error('the public client went away'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, _headers: unknown, statusMessage?: string): void {
    if (this.aborted || this.phase === Phase.DONE || controller === this.abandoned) return;
    const raw = (controller as unknown as { rawHeaders: Buffer[] | null }).rawHeaders ?? [];
    if (statusCode === 404 && this.notOwnerRetried(controller, raw)) return;
    let contentLength = -1;
    const fields: string[] = [];
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!.toString('latin1');
      const lower = name.toLowerCase();
      const value = raw[i + 1]!.toString('latin1');
      if (lower === 'content-length') contentLength = Number(value);
      // The owner wrote one Content-Length where the local server had it: it stays there.
      else if (OWN_RESPONSE_HEADERS.has(lower)) continue;
      if (lower.startsWith(CLUSTER_HEADER_PREFIX)) {
        // The owner does not hold the tunnel (any more): the cached owner was wrong.
        if (lower === NOT_OWNER_HEADER) this.directory.forget(this.request.subdomain);
        continue;
      }
      fields.push(name, value);
    }
    this.phase = Phase.STREAMING;
    this.exchange.writeHead(statusCode, statusMessage ?? standardReason(statusCode), fields, contentLength, contentLength >= 0);
  }

  /**
   * The edge asked does not hold the tunnel (any more: a client on several edges, or a pool member, left it
   * a moment ago, or it is draining) and no part of the body went to it: the request goes to another edge
   * the tunnel is attached to, up to HOP_CONNECT_TRIES in all, as a refused connection does. Only a 404 is
   * looked at, so an answer of the tunnel's own costs nothing more.
   */
  private notOwnerRetried(controller: Dispatcher.DispatchController, raw: readonly Buffer[]): boolean {
    if (this.tries >= HOP_CONNECT_TRIES || (this.upload !== null && this.upload.started)) return false;
    let notOwner = false;
    for (let i = 0; i < raw.length && !notOwner; i += 2) notOwner = raw[i]!.toString('latin1').toLowerCase() === NOT_OWNER_HEADER;
    if (!notOwner) return false;
    this.directory.forget(this.request.subdomain);
    this.abandoned = controller;
    this.controller = null;
    controller.abort(new Error('the edge asked does not hold the tunnel'));
    this.route();
    return true;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.phase !== Phase.STREAMING || this.aborted) return;
    if (!this.exchange.write(chunk)) controller.pause();
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    if (this.phase !== Phase.STREAMING || this.aborted) return;
    this.phase = Phase.DONE;
    const raw = (controller as unknown as { rawTrailers: Buffer[] | null }).rawTrailers ?? [];
    const trailers: string[] = [];
    for (const item of raw) trailers.push(item.toString('latin1'));
    this.exchange.end(trailers);
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    if (controller === this.abandoned) return;
    if (this.aborted || this.phase === Phase.DONE) {
      this.upload?.destroy();
      return;
    }
    const code = (error as { code?: string }).code;
    const refused = connectionRefused(error);
    const neverSent = refused || code === 'UND_ERR_CONNECT_TIMEOUT';
    // A bodiless GET or HEAD whose connection broke before any answer (a pooled connection to an edge
    // that just died) is sent again, as a front proxy would: nothing of it can have taken effect twice.
    const resendable = this.upload === null && (this.request.method === 'GET' || this.request.method === 'HEAD') && code !== 'UND_ERR_HEADERS_TIMEOUT';
    if (this.phase === Phase.WAITING && (neverSent || resendable)) {
      // Another edge the tunnel is attached to may take it.
      this.directory.unreachable?.(this.ownerNode);
      if (this.tries < HOP_CONNECT_TRIES && (this.upload === null || !this.upload.started)) {
        this.controller = null;
        this.route();
        return;
      }
    }
    this.upload?.destroy();
    if (this.phase === Phase.STREAMING) {
      this.phase = Phase.DONE;
      this.exchange.destroy();
      return;
    }
    if (code === 'UND_ERR_HEADERS_TIMEOUT') {
      this.fail('LOCAL_TIMEOUT', `The local server did not answer within ${this.limits.requestTimeoutMs} ms.`);
      return;
    }
    this.directory.forget(this.request.subdomain);
    const why = refused ? 'refused the connection' : code === 'UND_ERR_CONNECT_TIMEOUT' ? 'did not accept the connection in time' : `failed (${code ?? error.message})`;
    this.fail('EDGE_UNREACHABLE', `The edge holding ${this.request.subdomain} is unreachable: it ${why}.`);
  }

  // ---- the public side ---------------------------------------------------------------------------

  private overLimit(last: boolean): void {
    if (this.phase === Phase.STREAMING) {
      this.phase = Phase.DONE;
      this.controller?.abort(new Error('the request body is over the limit'));
      this.exchange.destroy();
      return;
    }
    // DONE first: the abort calls onResponseError at once, which must not answer.
    this.phase = Phase.DONE;
    this.uploadDone = true;
    this.controller?.abort(new Error('the request body is over the limit'));
    this.upload?.destroy();
    this.refused('PAYLOAD_TOO_LARGE');
    const answer = (): void => writePublicError(this.exchange, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${this.limits.maxRequestBody} bytes.`, true);
    if (last) answer();
    else this.exchange.discardBody(answer);
  }

  /** The edge's own answer, while nothing was written. */
  private fail(code: ErrorCode, message?: string, extraHeaders?: [string, string][]): void {
    if (this.aborted || this.phase !== Phase.WAITING) return;
    this.phase = Phase.DONE;
    this.upload?.destroy();
    this.refused(code);
    // A body still arriving cannot be read to its end: the connection closes after the answer.
    writePublicError(this.exchange, code, message, !this.uploadDone, extraHeaders);
  }
}
