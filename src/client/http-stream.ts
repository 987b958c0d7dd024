/**
 * One HTTP exchange on the client's side: an OPEN frame becomes an undici dispatch to the local port;
 * the response goes back as RESPONSE (+ DATA) within credit. What undici hands over during one loop turn
 * is framed at the turn's end: a response whose head, body and end come in one turn is one RESPONSE
 * frame whatever its framing (Content-Length or chunked; a close-delimited body's end, the FIN, is read a
 * turn later); otherwise the head leaves at the end of the turn it came in and each later turn's bytes
 * as one DATA frame, so nothing is held back (a flushed head, a slow body). undici is paused while the
 * edge has not granted credit, so a slow public reader slows the local server instead of filling the
 * client's memory.
 */
import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import { encode } from '../protocol/codec.js';
import { FrameType, ResetCode } from '../protocol/constants.js';
import { ReceiveWindow, SendCredit, takeFrameCredit, takeWholeCredit } from '../protocol/flow.js';
import { connectionNamed, HOP_BY_HOP, removeNamed } from '../protocol/headers.js';
import { CaptureBuffer } from '../capture-buffer.js';
import { edgeResetText, type Exchange } from './exchange.js';
import { localRequestHeaders } from './host-header.js';
import type { LocalTarget } from './routes.js';
import type { StreamHost } from './stream-host.js';

/** Certificate errors of an https:// target: the message says how to accept a self-signed one. */
const CERTIFICATE_ERROR = /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/;

export interface OpenRequest {
  requestId: string;
  method: string;
  path: string;
  headers: string[];
  clientAddress: string;
  replayOf: string | null;
}

export class ClientHttpStream implements Dispatcher.DispatchHandler {
  readonly kind = 'http';
  closed = false;
  readonly port: number;
  readonly target: LocalTarget;
  private readonly startedAt = Date.now();
  private readonly startedHr = performance.now();

  // Request body, edge → local.
  private body: Readable | null = null;
  private readonly requestWindow: ReceiveWindow;
  private pushed = 0;
  private accounted = 0;
  /** Body bytes each way, for the counters and the inspector. */
  private requestBytes = 0;
  private responseBytes = 0;
  private requestEnded = false;

  // Response, local → edge.
  private controller: Dispatcher.DispatchController | null = null;
  private readonly sendCredit: SendCredit;
  private status = 0;
  private responseHeaders: string[] = [];
  /** The Content-Length the local server declared, -1 when none: a body that ends short is reset. */
  private declaredLength = -1;
  /**
   * Body bytes of the current loop turn, not yet framed. The head, too, waits for the turn's end: a
   * response that ends in the turn its head came leaves as one RESPONSE frame with its body and end=true
   * whatever its framing; otherwise the head leaves at the turn's end with the bytes so far.
   */
  private held: Buffer[] = [];
  private heldBytes = 0;
  private turnEndPending = false;
  private headSent = false;
  /** Framed in turn, waiting for credit (undici paused meanwhile). */
  private queue: Buffer[] = [];
  private endPending = false;
  private finished = false;

  // Recording, for the inspector.
  private readonly requestRecorder: CaptureBuffer | null;
  /** The path the local server gets (the route's prefix stripped when it says so). */
  private readonly localPath: string;
  private readonly responseRecorder: CaptureBuffer | null;

  constructor(
    readonly id: number,
    private readonly host: StreamHost,
    private readonly request: OpenRequest,
  ) {
    const resolved = host.routes.resolve(request.path);
    this.target = resolved.target;
    this.localPath = resolved.path;
    this.port = this.target.port;
    const settings = host.settings;
    this.requestWindow = new ReceiveWindow(settings.streamWindow);
    this.sendCredit = new SendCredit(settings.streamWindow);
    const recording = host.recordLimit;
    this.requestRecorder = recording > 0 ? new CaptureBuffer(recording) : null;
    this.responseRecorder = recording > 0 ? new CaptureBuffer(recording) : null;
  }

  /** Starts the local request: `body` is the inline first chunk (owned), `end` says it is all. */
  start(body: Uint8Array | null, end: boolean): void {
    let payload: Buffer | Readable | null = null;
    if (body !== null && body.byteLength > 0) {
      this.requestBytes += body.byteLength;
      if (!this.requestWindow.receive(body.byteLength)) {
        this.host.protocolError(`the edge exceeded the window of stream ${this.id}`);
        return;
      }
      this.requestRecorder?.addOwned(body);
    }
    if (end) {
      payload = body === null || body.byteLength === 0 ? null : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
      if (body !== null) this.host.consumedConnection(body.byteLength);
    } else {
      const stream = new Readable({ read() {}, highWaterMark: 64 * 1024 });
      // Credit goes back as undici takes each chunk (it pauses the body while its socket is full). Not
      // from read(): Node calls it before the chunk leaves the buffer and not again until the next
      // push, so with a stream window no larger than what one read drains, no credit ever went back
      // and the upload hung. Paused first, so this listener does not start the flow before undici's.
      stream.pause();
      stream.on('data', (chunk: Buffer) => this.returnRequestCredit(chunk.byteLength));
      this.body = stream;
      if (body !== null && body.byteLength > 0) this.pushBody(body);
      payload = this.body;
    }
    try {
      const forwarded = localRequestHeaders(this.request.headers, this.target, this.host.hostHeader);
      this.host.pool(this.target).dispatch(
        { path: this.localPath, method: this.request.method, headers: forwarded, body: payload, blocking: false },
        this,
      );
    } catch (error) {
      this.onResponseError(null, error as Error);
    }
  }

  // ---- request body ---------------------------------------------------------------------------------

  /** A DATA frame from the edge: more request body (a view of the frame, which we own). */
  onRequestData(chunk: Uint8Array | null, end: boolean): void {
    if (this.closed) return;
    if (this.body === null || this.body.readableEnded || this.requestEnded) {
      this.host.protocolError(`DATA after the end of the request body on stream ${this.id}`);
      return;
    }
    if (end) this.requestEnded = true;
    if (chunk !== null && chunk.byteLength > 0) {
      this.requestBytes += chunk.byteLength;
      if (!this.requestWindow.receive(chunk.byteLength)) {
        this.host.protocolError(`the edge exceeded the window of stream ${this.id}`);
        return;
      }
      this.requestRecorder?.addOwned(chunk);
      this.pushBody(chunk);
    }
    if (end) this.body.push(null);
  }

  private pushBody(chunk: Uint8Array): void {
    this.pushed += chunk.byteLength;
    this.body!.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
  }

  /**
   * The exchange is over: request bytes that reached this stream but were never read by undici (the
   * public client left, the local server answered without reading) are dropped, and their share of the
   * tunnel's connection window goes back to the edge. Without this, each abandoned upload kept up to a
   * stream window of it, and the tunnel's request bodies hung once the window was gone.
   */
  private releaseConnectionCredit(): void {
    const unread = this.pushed - this.accounted;
    if (unread <= 0) return;
    this.accounted = this.pushed;
    this.host.consumedConnection(unread);
  }

  /** undici took `bytes` of the body: they go back to the edge as credit. */
  private returnRequestCredit(bytes: number): void {
    if (this.closed) return;
    this.accounted += bytes;
    const grant = this.requestWindow.consume(bytes);
    if (grant > 0) this.host.send(encode([FrameType.WINDOW, this.id, grant]));
    this.host.consumedConnection(bytes);
  }

  // ---- undici's handler -----------------------------------------------------------------------------

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.closed) controller.abort(new Error('cancelled by the edge'));
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (statusCode < 200) return; // 1xx informational: the final response follows.
    this.status = statusCode;
    // Header bytes cross as they came: each byte one char (latin1), in the server's order, names
    // lower-cased; hop-by-hop ones left out (Node servers always send two of them).
    const raw = (controller as { rawHeaders?: (Buffer | string)[] | null }).rawHeaders;
    const flat: string[] = [];
    let connection = '';
    let length = '';
    if (raw !== null && raw !== undefined) {
      for (let i = 0; i + 1 < raw.length; i += 2) {
        const name = latin1(raw[i]!).toLowerCase();
        const value = latin1(raw[i + 1]!);
        if (HOP_BY_HOP.has(name)) {
          if (name === 'connection') connection = connection === '' ? value : `${connection},${value}`;
          continue;
        }
        if (name === 'content-length') length = value;
        flat.push(name, value);
      }
    } else {
      for (const name in headers) {
        const value = headers[name];
        if (value === undefined) continue;
        if (HOP_BY_HOP.has(name)) {
          if (name === 'connection') connection = Array.isArray(value) ? value.join(',') : value;
          continue;
        }
        if (name === 'content-length') length = Array.isArray(value) ? value[0]! : value;
        if (typeof value === 'string') flat.push(name, value);
        else for (const item of value) flat.push(name, item);
      }
    }
    if (connection !== '') {
      const named = connectionNamed(connection);
      if (named.length > 0) removeNamed(flat, named);
    }
    this.responseHeaders = flat;
    const noBody = this.request.method === 'HEAD' || statusCode === 204 || statusCode === 304;
    const known = /^[0-9]{1,15}$/.test(length) ? Number(length) : -1;
    this.declaredLength = noBody ? -1 : known;
    this.holdUntilTurnEnd();
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.closed || chunk.byteLength === 0) return;
    this.responseBytes += chunk.byteLength;
    this.held.push(chunk);
    this.heldBytes += chunk.byteLength;
    // A turn that brings more than a frame's worth does not wait for its end: the frame goes now, and
    // undici is paused when credit runs out, so a fast local server never piles up bytes here.
    if (this.heldBytes >= this.host.settings.maxFrameBody) this.release();
    else this.holdUntilTurnEnd();
  }

  onResponseEnd(): void {
    if (this.closed) return;
    if (this.declaredLength >= 0 && this.responseBytes !== this.declaredLength) {
      // undici checks this too; a short body must never reach the public client as a whole one.
      this.onResponseError(null, new Error(`the body ended after ${this.responseBytes} of ${this.declaredLength} bytes (Content-Length)`));
      return;
    }
    if (!this.headSent) {
      // Head, body and end in one turn: one frame, given the credit.
      const body = this.takeHeld();
      if (body === null || takeWholeCredit(body.byteLength, this.host.settings.maxFrameBody, this.sendCredit, this.host.connectionSend)) {
        this.host.send(encode([FrameType.RESPONSE, this.id, this.status, this.responseHeaders, body, true]));
        this.complete(null);
        return;
      }
      this.sendHead(null);
      this.queue.push(body);
    } else {
      const body = this.takeHeld();
      if (body !== null) this.queue.push(body);
    }
    this.endPending = true;
    this.flush();
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, failure: Error): void {
    if (this.closed) return;
    const error = plainError(failure);
    const code = (error as { code?: string }).code ?? '';
    const unreachable = !this.headSent && this.status === 0 && /ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ECONNRESET|UND_ERR_SOCKET|UND_ERR_CONNECT/.test(`${code} ${error.message}`);
    const certificate = this.target.scheme === 'https' && CERTIFICATE_ERROR.test(`${code} ${error.message}`);
    // undici calls a 100 it did not ask for (it never sends Expect) a "bad response".
    const hint = certificate ? ' (a self-signed certificate? --local-insecure accepts it)' : error.message === 'bad response' ? ' (an unrequested 100 Continue, or bytes before the request)' : '';
    const message = `local server at ${this.target.origin}: ${error.message}${hint}`;
    this.host.send(encode([FrameType.RESET, this.id, unreachable ? ResetCode.LOCAL_UNREACHABLE : ResetCode.LOCAL_ERROR, message]));
    this.complete(message);
  }

  // ---- response body within credit ------------------------------------------------------------------

  private holdUntilTurnEnd(): void {
    if (this.turnEndPending) return;
    this.turnEndPending = true;
    this.host.atTurnEnd(this);
  }

  /** The loop turn is over: the head (once) and this turn's bytes leave now, nothing waits longer. */
  turnEnded(): void {
    this.turnEndPending = false;
    if (this.closed || this.status === 0) return;
    this.release();
  }

  /** Frames what is held: the head with the bytes inline when the credit allows, else head then DATA. */
  private release(): void {
    const body = this.takeHeld();
    if (!this.headSent) {
      if (body !== null && this.queue.length === 0 && takeWholeCredit(body.byteLength, this.host.settings.maxFrameBody, this.sendCredit, this.host.connectionSend)) {
        this.sendHead(body);
        return;
      }
      this.sendHead(null);
    }
    if (body === null) return;
    this.queue.push(body);
    this.flush();
  }

  /**
   * The held bytes as one buffer (copied only when they came in several chunks), or null. The inspector
   * records that buffer, so a body that came in several chunks in one turn is joined once, not once for
   * the frame and again for the recording.
   */
  private takeHeld(): Buffer | null {
    const held = this.held;
    const size = this.heldBytes;
    if (size === 0) return null;
    this.held = [];
    this.heldBytes = 0;
    const whole = held.length === 1 ? held[0]! : Buffer.concat(held, size);
    this.responseRecorder?.addOwned(whole);
    return whole;
  }

  private sendHead(body: Buffer | null): void {
    this.headSent = true;
    this.host.send(encode([FrameType.RESPONSE, this.id, this.status, this.responseHeaders, body, false]));
  }

  /** Sends queued response bytes within credit; pauses undici while bytes wait. */
  flush(): void {
    if (this.closed) return;
    const maxFrame = this.host.settings.maxFrameBody;
    const connection = this.host.connectionSend;
    while (this.queue.length > 0) {
      const chunk = this.queue[0]!;
      const size = takeFrameCredit(chunk.byteLength, maxFrame, this.sendCredit, connection);
      if (size === 0) {
        if (connection.available === 0) this.host.blocked.add(this);
        if (this.controller !== null && !this.controller.paused) this.controller.pause();
        return;
      }
      const last = this.endPending && this.queue.length === 1 && size === chunk.byteLength;
      this.host.send(encode([FrameType.DATA, this.id, size === chunk.byteLength ? chunk : chunk.subarray(0, size), last]));
      if (size === chunk.byteLength) this.queue.shift();
      else this.queue[0] = chunk.subarray(size);
      if (last) {
        this.complete(null);
        return;
      }
    }
    if (this.endPending) {
      this.host.send(encode([FrameType.DATA, this.id, null, true]));
      this.complete(null);
      return;
    }
    if (this.controller !== null && this.controller.paused) this.controller.resume();
  }

  onWindow(credit: number): void {
    this.sendCredit.grant(credit);
    this.flush();
  }

  /** RESET from the edge: the public client left or the edge gave up (its code and message say which). */
  onReset(code?: number, message?: string): void {
    if (this.closed) return;
    this.complete(edgeResetText(code, message));
    this.controller?.abort(new Error('cancelled by the edge'));
    this.body?.destroy();
  }

  /** The tunnel dropped. */
  tunnelClosed(): void {
    this.onReset();
  }

  private complete(error: string | null): void {
    if (this.finished) return;
    this.finished = true;
    this.closed = true;
    this.host.endStream(this);
    this.releaseConnectionCredit();
    if (this.body !== null && !this.body.readableEnded) this.body.destroy();
    this.host.count(this.requestBytes, this.responseBytes, error !== null || this.status >= 500);
    if (!this.host.observed) return;
    const requestRecorder = this.requestRecorder;
    const responseRecorder = this.responseRecorder;
    // Bytes of an exchange that ended before they were framed (an error, a reset) are recorded too.
    if (responseRecorder !== null) for (const chunk of this.held) responseRecorder.addOwned(chunk);
    const exchange: Exchange = {
      id: this.request.requestId,
      method: this.request.method,
      path: this.request.path,
      port: this.port,
      requestHeaders: this.request.headers,
      requestBody: requestRecorder === null ? null : requestRecorder.bytes(),
      requestBodySize: this.requestBytes,
      requestTruncated: requestRecorder === null ? false : requestRecorder.truncated,
      status: this.status,
      responseHeaders: this.responseHeaders,
      responseBody: responseRecorder === null ? null : responseRecorder.bytes(),
      responseBodySize: this.responseBytes,
      responseTruncated: responseRecorder === null ? false : responseRecorder.truncated,
      startedAt: this.startedAt,
      latencyMs: performance.now() - this.startedHr,
      error,
      replayOf: this.request.replayOf,
      clientAddress: this.request.clientAddress,
    };
    this.host.record(exchange);
  }
}

/**
 * `localhost` is dialled on both loopbacks; when both fail, Node reports an AggregateError with an empty
 * message: one error carrying its parts' messages and first code reads better.
 */
export function plainError(error: Error): Error {
  const parts = (error as { errors?: unknown }).errors;
  if (error.message !== '' || !Array.isArray(parts) || parts.length === 0) return error;
  const plain = new Error(parts.map((part) => (part as Error).message).join('; ')) as Error & { code?: string };
  plain.code = (error as { code?: string }).code ?? (parts[0] as { code?: string }).code;
  return plain;
}

function latin1(item: Buffer | string): string {
  return typeof item === 'string' ? item : item.toString('latin1');
}
