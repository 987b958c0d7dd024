/**
 * A public HTTP request forwarded to the edge that holds its tunnel (docs/cluster.md, "The internal
 * hop"). The request's head is the one this edge read (readPublicRequestHead: X-Forwarded-* already
 * the edge's), sent with the cluster secret and the client's address and scheme; the owner takes it as
 * a public request and captures it. Bodies stream both ways under backpressure: a full hop pauses the
 * public upload (uWS pause/resume), a slow public reader pauses the owner's response (undici's
 * controller), so memory stays bounded by the socket buffers.
 *
 * Nothing of the owner's answer is changed but its framing: status line and headers go out as received
 * (Date, Content-Length and Transfer-Encoding are this edge's uWS's own, written the way the owner's
 * were), so a client sees the same bytes through any edge.
 */
import { Readable } from 'node:stream';
import { STATUS_CODES } from 'node:http';
import type { Agent, Dispatcher } from 'undici';
import type { ErrorCode } from '../../errors.js';
import type { HttpResponse } from '../../uws.js';
import { discardBody } from '../request-framing.js';
import { acceptOf } from '../public-error.js';
import { statusLine, writePublicError } from '../responses.js';
import { CLIENT_HEADER, CLUSTER_HEADER_PREFIX, NOT_OWNER_HEADER, ORDER_HEADER, PROTO_HEADER, SECRET_HEADER } from './secret.js';
import { connectionRefused } from './peer-link.js';
import type { ClusterDirectory } from './types.js';

export interface ForwardedRequest {
  subdomain: string;
  method: string;
  /** Path and query as received. */
  path: string;
  /** readPublicRequestHead's headers: [name, value, ...], hop-by-hop ones already dropped. */
  headers: string[];
  contentLength: number;
  chunked: boolean;
  clientAddress: string;
  proto: string;
  /** The 404's message when no edge holds the tunnel: the one the edge gives for a local miss. */
  notFound: string;
}

export interface ForwardLimits {
  maxRequestBody: number;
  /** The edge's 504 timer; the owner's own fires first, this one covers an owner that never answers. */
  requestTimeoutMs: number;
}

/** Response headers that are this edge's to write (framing, its own Date, uWS's mark) or the hop's. */
const OWN_RESPONSE_HEADERS = new Set(['date', 'content-length', 'transfer-encoding', 'connection', 'keep-alive', 'uwebsockets']);
/** Request headers undici refuses to carry (it frames the hop itself); uWS already answered any 100-continue. */
const UNSENDABLE = new Set(['expect', 'host', 'content-length']);
const NO_BYTES = new Uint8Array(0);
const RETRY_SOON: [string, string][] = [['retry-after', '1']];

/** The public upload as the hop's request body: pushes pause the public socket when the hop is full. */
class PublicUpload extends Readable {
  constructor(private readonly res: HttpResponse, private readonly isAborted: () => boolean) {
    super({ highWaterMark: 64 * 1024 });
  }

  paused = false;

  override _read(): void {
    if (this.paused && !this.isAborted()) {
      this.paused = false;
      this.res.resume();
    }
  }

  takeChunk(chunk: ArrayBuffer, isLast: boolean): void {
    // uWS neuters the chunk when the callback returns: the one copy of the body.
    const more = this.push(Buffer.from(new Uint8Array(chunk)));
    if (isLast) this.push(null);
    else if (!more && !this.paused) {
      this.paused = true;
      this.res.pause();
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

export class ForwardedExchange implements Dispatcher.DispatchHandler {
  private phase = Phase.WAITING;
  private aborted = false;
  private upload: PublicUpload | null = null;
  private uploadDone = true;
  private received = 0;
  private controller: Dispatcher.DispatchController | null = null;
  private contentLength = -1;
  private noBody = false;
  /** A Content-Length body's bytes uWS did not take yet (the public reader is slow). */
  private pending: Uint8Array | null = null;
  private ended = false;
  private waitingWritable = false;

  constructor(
    private readonly res: HttpResponse,
    private readonly request: ForwardedRequest,
    private readonly directory: ClusterDirectory,
    private readonly agent: Agent,
    private readonly secret: string,
    private readonly limits: ForwardLimits,
    private readonly refused: (code: ErrorCode) => void,
  ) {}

  /** Inside the uWS handler: takes the body as it comes, then asks who holds the tunnel. */
  start(): void {
    const res = this.res;
    const request = this.request;
    res.onAborted(() => this.onAborted());
    if (request.contentLength > this.limits.maxRequestBody) {
      this.refused('PAYLOAD_TOO_LARGE');
      this.phase = Phase.DONE;
      discardBody(res, () => this.aborted, () => writePublicError(res, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${this.limits.maxRequestBody} bytes.`, true));
      return;
    }
    if (request.contentLength > 0 || request.chunked) {
      const upload = new PublicUpload(res, () => this.aborted);
      this.upload = upload;
      this.uploadDone = false;
      upload.on('error', () => undefined);
      res.onData((chunk, isLast) => {
        if (this.phase === Phase.DONE && this.uploadDone) return;
        this.received += chunk.byteLength;
        if (this.received > this.limits.maxRequestBody) {
          this.overLimit(isLast);
          return;
        }
        if (isLast) this.uploadDone = true;
        upload.takeChunk(chunk, isLast);
      });
    }
    this.directory.ownerOf(request.subdomain).then(
      (owner) => {
        if (this.aborted || this.phase === Phase.DONE) return;
        if (owner === null || owner.nodeId === this.directory.self.nodeId) {
          this.fail('TUNNEL_NOT_FOUND', request.notFound);
          return;
        }
        this.dispatch(owner.advertise);
      },
      () => this.fail('STORE_UNAVAILABLE', undefined, RETRY_SOON),
    );
  }

  private dispatch(origin: string): void {
    const request = this.request;
    const headers: string[] = [];
    let hostAt = -1;
    let lengthAt = -1;
    let host = '';
    for (let i = 0, pair = 0; i < request.headers.length; i += 2, pair++) {
      const name = request.headers[i]!;
      if (name === 'host') {
        hostAt = pair;
        host = request.headers[i + 1]!;
      } else if (name === 'content-length') lengthAt = pair;
      if (UNSENDABLE.has(name)) continue;
      headers.push(name, request.headers[i + 1]!);
    }
    // undici writes Host first and Content-Length last: the owner puts them back where they were.
    headers.push(SECRET_HEADER, this.secret, CLIENT_HEADER, request.clientAddress, PROTO_HEADER, request.proto, ORDER_HEADER, `${hostAt},${lengthAt}`);
    if (host !== '') headers.push('host', host);
    if (request.contentLength >= 0) headers.push('content-length', String(request.contentLength));
    this.agent.dispatch(
      {
        origin,
        path: request.path,
        method: request.method as Dispatcher.HttpMethod,
        headers,
        body: this.upload,
        headersTimeout: this.limits.requestTimeoutMs + 1_000,
        bodyTimeout: 0,
        // uWS 20.30 resets the next request on a connection that carried a chunked body (measured:
        // test/cluster/hop-http.test.ts): such a request gets a connection of its own.
        reset: request.chunked,
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
    if (this.aborted || this.phase === Phase.DONE) return;
    const raw = (controller as unknown as { rawHeaders: Buffer[] | null }).rawHeaders ?? [];
    const res = this.res;
    let contentLength = -1;
    this.phase = Phase.STREAMING;
    res.cork(() => {
      res.writeStatus(statusMessage !== undefined && statusMessage !== STATUS_CODES[statusCode] ? `${statusCode} ${statusMessage}` : statusLine(statusCode));
      for (let i = 0; i < raw.length; i += 2) {
        const name = raw[i]!.toString('latin1').toLowerCase();
        if (name === 'content-length') contentLength = Number(raw[i + 1]!.toString('latin1'));
        if (OWN_RESPONSE_HEADERS.has(name)) continue;
        if (name.startsWith(CLUSTER_HEADER_PREFIX)) {
          // The owner does not hold the tunnel (any more): the cached owner was wrong.
          if (name === NOT_OWNER_HEADER) this.directory.forget(this.request.subdomain);
          continue;
        }
        res.writeHeader(name, raw[i + 1]!);
      }
      this.contentLength = contentLength;
      this.noBody = this.request.method === 'HEAD' || statusCode === 204 || statusCode === 304;
      if (this.noBody) {
        this.phase = Phase.DONE;
        // No length argument at all when there is none: uWS reads an explicit undefined as a huge one.
        if (this.request.method === 'HEAD' && contentLength >= 0) res.endWithoutBody(contentLength, !this.uploadDone);
        else if (this.uploadDone) res.endWithoutBody();
        else res.endWithoutBody(0, true);
      } else if (contentLength > 0) {
        // The head leaves at once, with its length, as it did from the owner.
        res.tryEnd(NO_BYTES, contentLength);
      }
    });
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.phase !== Phase.STREAMING || this.aborted) return;
    const res = this.res;
    res.cork(() => {
      if (this.contentLength >= 0) {
        if (!this.offer(chunk)) controller.pause();
      } else if (!res.write(chunk)) {
        controller.pause();
        this.awaitWritable();
      }
    });
  }

  onResponseEnd(): void {
    this.ended = true;
    if (this.phase !== Phase.STREAMING || this.aborted) return;
    if (this.pending !== null) return; // onWritable ends it
    this.finish();
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.upload?.destroy();
    if (this.aborted || this.phase === Phase.DONE) return;
    if (this.phase === Phase.STREAMING) {
      this.phase = Phase.DONE;
      this.res.close();
      return;
    }
    const code = (error as { code?: string }).code;
    if (code === 'UND_ERR_HEADERS_TIMEOUT') {
      this.fail('LOCAL_TIMEOUT', `The local server did not answer within ${this.limits.requestTimeoutMs} ms.`);
      return;
    }
    this.directory.forget(this.request.subdomain);
    const why = connectionRefused(error) ? 'refused the connection' : code === 'UND_ERR_CONNECT_TIMEOUT' ? 'did not accept the connection in time' : `failed (${code ?? error.message})`;
    this.fail('EDGE_UNREACHABLE', `The edge holding ${this.request.subdomain} is unreachable: it ${why}.`);
  }

  // ---- the public side ---------------------------------------------------------------------------

  /** Hands a Content-Length chunk to uWS; false when the socket is full (the rest waits in `pending`). */
  private offer(chunk: Uint8Array): boolean {
    const res = this.res;
    const before = res.getWriteOffset();
    const [ok, done] = res.tryEnd(chunk, this.contentLength);
    if (done) {
      this.phase = Phase.DONE;
      return true;
    }
    if (ok) return true;
    this.pending = chunk.subarray(res.getWriteOffset() - before);
    this.awaitWritable();
    return false;
  }

  private awaitWritable(): void {
    if (this.waitingWritable) return;
    this.waitingWritable = true;
    this.res.onWritable(() => {
      this.waitingWritable = false;
      if (this.phase !== Phase.STREAMING || this.aborted) return true;
      const pending = this.pending;
      if (pending !== null) {
        this.pending = null;
        if (!this.offer(pending)) return false;
      }
      if (this.ended && this.phase === Phase.STREAMING) this.finish();
      else this.controller?.resume();
      return true;
    });
  }

  /** The owner's body ended: a Content-Length body that fell short is cut, as the owner would have. */
  private finish(): void {
    if (this.phase !== Phase.STREAMING) return;
    this.phase = Phase.DONE;
    const res = this.res;
    res.cork(() => {
      if (this.contentLength <= 0) res.end('', !this.uploadDone);
      else res.close();
    });
  }

  private overLimit(isLast: boolean): void {
    if (this.phase === Phase.STREAMING) {
      this.phase = Phase.DONE;
      this.controller?.abort(new Error('the request body is over the limit'));
      this.res.close();
      return;
    }
    // DONE first: the abort calls onResponseError at once, which must not answer.
    this.phase = Phase.DONE;
    this.uploadDone = true;
    this.controller?.abort(new Error('the request body is over the limit'));
    this.upload?.destroy();
    this.refused('PAYLOAD_TOO_LARGE');
    const answer = (): void => writePublicError(this.res, 'PAYLOAD_TOO_LARGE', `The request body is larger than ${this.limits.maxRequestBody} bytes.`, true);
    if (isLast) this.res.cork(answer);
    else discardBody(this.res, () => this.aborted, answer, this.received);
  }

  /** The edge's own answer, while nothing was written. */
  private fail(code: ErrorCode, message?: string, extraHeaders?: [string, string][]): void {
    if (this.aborted || this.phase !== Phase.WAITING) return;
    this.phase = Phase.DONE;
    this.upload?.destroy();
    this.refused(code);
    // A body still arriving cannot be read to its end: the connection closes after the answer.
    this.res.cork(() => writePublicError(this.res, code, message, !this.uploadDone, extraHeaders, acceptOf(this.request.headers)));
  }

  private onAborted(): void {
    this.aborted = true;
    this.phase = Phase.DONE;
    this.upload?.destroy();
    this.controller?.abort(new Error('the public client went away'));
  }
}
