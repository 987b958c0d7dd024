/**
 * One request to a local target and its response, as the caller (the client's HTTP stream) sees it:
 * the caller writes the request body and trailers through the exchange, and hears the response on its
 * handler. The exchange outlives its connection: it waits in the pool's queue without one, and a retry
 * (connection.ts) moves it to a new one.
 *
 * Request body, in order: the inline body given to `request()`, then each `write()`, then `end()`.
 * `write()` returns false when the bytes are not yet on a socket that can take more (the pool has no
 * connection free, the body waits for `100 Continue`, or the socket's buffer is full); the handler's
 * `onRequestDrain()` says when they are, so a caller returns tunnel credit only for bytes the local
 * socket took. Bytes of a body the local server will not read (it answered before `100 Continue`, the
 * connection is gone after a whole response) are discarded: `write()` returns true for them.
 */
import type { Duplex } from 'node:stream';
import type { MessageHead } from '../../http1/parser.js';
import { chunkSizeLine } from '../../http1/head.js';
import { badRequest, type LocalHopError } from './errors.js';
import { buildRequestHead, RequestFraming, trailerSection, type RequestFramingValue, type RequestPlan } from './request-head.js';
import type { LocalConnection } from './connection.js';
import type { TargetPool } from './pool.js';

/** How the response body is delimited (the final head's fields, the request method and the status). */
export const ResponseFraming = {
  /** HEAD, 204, 304: no body whatever the fields say. */
  NONE: 0,
  /** `Content-Length`: exactly that many bytes (more are discarded, fewer are an error). */
  LENGTH: 1,
  /** `Transfer-Encoding: chunked`: trailers may follow. */
  CHUNKED: 2,
  /** Neither: the body runs until the local server closes the connection. */
  CLOSE: 3,
} as const;
export type ResponseFramingValue = (typeof ResponseFraming)[keyof typeof ResponseFraming];

/** What the local hop tells the caller, in this order: interim heads, the head, body, trailers, end. */
export interface LocalResponseHandler {
  /** A 1xx other than 101 (100 Continue when the request expected it, 102, 103 Early Hints...). */
  onInterim(head: MessageHead): void;
  /**
   * The final head: status, reason phrase as sent, fields as sent (names in their case, one byte per
   * character, hop-by-hop ones included). `contentLength` is the declared length with LENGTH, else -1.
   */
  onHead(head: MessageHead, framing: ResponseFramingValue, contentLength: number): void;
  /** Body bytes (chunked framing removed); the chunk is the handler's to keep. */
  onBody(chunk: Buffer): void;
  /**
   * Body bytes of a Content-Length body as a view of the socket's read, valid only during the call (a
   * handler that copies them anyway saves a copy); without it such bytes come to onBody as copies.
   */
  onBodyView?(view: Buffer): void;
  /** Trailer fields after a chunked body, flat like the head's, only when there are some. */
  onTrailers(fields: string[]): void;
  /** The response is whole. Nothing else follows but onRequestDrain while the request body is written. */
  onEnd(): void;
  /**
   * A 101 to a request marked `upgrade`: the socket is the caller's from now on (paused: attach
   * listeners, then resume it), and `leftover` holds the bytes already read after the head (the new
   * protocol's first bytes, possibly none). Nothing else follows.
   */
  onUpgrade(head: MessageHead, socket: Duplex, leftover: Buffer): void;
  /** The exchange failed (never after onEnd or onUpgrade): `error.resetCode` is the RESET to send. */
  onError(error: LocalHopError): void;
  /** Body bytes write() refused are on the socket now and it takes more. */
  onRequestDrain(): void;
}

/** What the tunnel gives for a request. */
export interface LocalRequest {
  method: string;
  /** The request-target as received (origin-form normally). */
  target: string;
  /** Flat [name, value, ...], names in their case, one byte per character. */
  fields: readonly string[];
  /** The request asks to change protocol (WebSocket and any other upgrade). */
  upgrade?: boolean;
}

const ExchangeState = { WAITING: 0, ACTIVE: 1, FINISHED: 2 } as const;
type ExchangeStateValue = (typeof ExchangeState)[keyof typeof ExchangeState];

export class LocalExchange implements RequestPlan {
  framing: RequestFramingValue = RequestFraming.NONE;
  declaredLength = -1;
  expectContinue = false;

  readonly method: string;
  readonly upgrade: boolean;
  /** The request head, bytes as characters. */
  private head = '';
  /** The body given with the request: kept until the exchange ends, to be written again by a retry. */
  private inline: Buffer | null = null;
  /** Body bytes accepted from the caller, inline ones included. */
  private bodyBytes = 0;
  /** write() chunks not yet on a socket (no connection yet, or held for 100 Continue). */
  private pending: Buffer[] | null = null;
  private endRequested = false;
  private trailers: readonly string[] | null = null;
  private continueTimer: NodeJS.Timeout | null = null;

  state: ExchangeStateValue = ExchangeState.WAITING;
  connection: LocalConnection | null = null;
  /** The body is held until the local server's 100 Continue (or its final answer, or the timeout). */
  bodyHeld = false;
  /** A write() chunk reached a socket: after that the request cannot be sent again. */
  bodyStreamed = false;
  /** The whole request (head, body, last chunk) is on the socket. */
  requestDone = false;
  /** Further body bytes go nowhere: the local server answered without them, or the connection is gone. */
  discardBody = false;
  /** A byte of the response arrived on the current connection. */
  responseBytesSeen = false;
  responseDone = false;
  /** Sent again once after a reused connection closed under it (connection.ts, the retry rule). */
  retried = false;
  private needDrain = false;
  /** The caller paused the response: a connection given to the exchange later starts paused. */
  paused = false;

  constructor(
    readonly pool: TargetPool,
    request: LocalRequest,
    readonly handler: LocalResponseHandler,
  ) {
    this.method = request.method;
    this.upgrade = request.upgrade === true;
  }

  /** Builds the head; returns the reason when the request cannot be written. */
  prepare(request: LocalRequest, body: Buffer | null, end: boolean): LocalHopError | null {
    const known = end ? (body === null ? 0 : body.byteLength) : -1;
    const head = buildRequestHead(this.pool.target, request.method, request.target, request.fields, this.upgrade, known, this);
    if (typeof head !== 'string') return head;
    this.head = head;
    if (body !== null && body.byteLength > 0) {
      this.inline = body;
      this.bodyBytes = body.byteLength;
      if (this.declaredLength !== -1 && this.bodyBytes > this.declaredLength) return badRequest(this.pool.target, `the body is longer than its Content-Length (${this.declaredLength})`);
    }
    this.endRequested = end;
    return null;
  }

  // ---- the caller's side ------------------------------------------------------------------------------

  /** More request body. Returns false when the bytes wait (onRequestDrain follows); true when taken. */
  write(chunk: Buffer): boolean {
    if (this.state === ExchangeState.FINISHED || this.discardBody || chunk.byteLength === 0) return true;
    if (this.endRequested) return true;
    this.bodyBytes += chunk.byteLength;
    if (this.declaredLength !== -1 && this.bodyBytes > this.declaredLength) {
      this.fail(badRequest(this.pool.target, `the body is longer than its Content-Length (${this.declaredLength})`));
      return true;
    }
    if (this.framing === RequestFraming.NONE) {
      this.fail(badRequest(this.pool.target, 'body bytes after a request that was to have none'));
      return true;
    }
    const connection = this.connection;
    if (connection === null || this.bodyHeld) {
      (this.pending ??= []).push(chunk);
      this.needDrain = true;
      return false;
    }
    this.bodyStreamed = true;
    if (this.writeChunk(connection, chunk)) return true;
    this.needDrain = true;
    return false;
  }

  /** The request body is complete; `trailers` follow a chunked body (with Content-Length they are dropped). */
  end(trailers: readonly string[] | null = null): void {
    if (this.state === ExchangeState.FINISHED || this.endRequested) return;
    this.endRequested = true;
    this.trailers = trailers;
    if (this.discardBody) {
      this.requestDone = true;
      this.connection?.exchangeSettled();
      return;
    }
    if (this.declaredLength !== -1 && this.bodyBytes !== this.declaredLength) {
      this.fail(badRequest(this.pool.target, `the body ended after ${this.bodyBytes} of its ${this.declaredLength} bytes (Content-Length)`));
      return;
    }
    if (this.connection === null || this.bodyHeld) return;
    this.finishRequest(this.connection);
  }

  /** Stop reading the response (the caller cannot take more now): at most one socket read follows. */
  pause(): void {
    this.paused = true;
    this.connection?.socket.pause();
  }

  resume(): void {
    this.paused = false;
    if (this.state !== ExchangeState.FINISHED) this.connection?.socket.resume();
  }

  /** Request bytes accepted and not yet handed to the kernel (held, queued, or in the socket's buffer). */
  get bufferedRequestBytes(): number {
    let held = 0;
    if (this.pending !== null) for (const chunk of this.pending) held += chunk.byteLength;
    return held + (this.connection?.socket.writableLength ?? 0);
  }

  /** Response bytes read from the socket and not yet parsed (paused): what backpressure holds here. */
  get bufferedResponseBytes(): number {
    return this.connection?.socket.readableLength ?? 0;
  }

  /** The caller is done with the exchange (the public client left): the connection is closed, never reused. */
  abort(): void {
    if (this.state === ExchangeState.FINISHED) return;
    this.close();
  }

  // ---- the connection's side --------------------------------------------------------------------------

  /** The exchange has a connection: the head goes out, with the inline body unless 100 Continue is awaited. */
  sendRequest(connection: LocalConnection): void {
    this.state = ExchangeState.ACTIVE;
    this.connection = connection;
    this.responseBytesSeen = false;
    const socket = connection.socket;
    const inline = this.inline;
    if (this.expectContinue) {
      socket.write(this.head, 'latin1');
      this.bodyHeld = true;
      this.continueTimer ??= setTimeout(continueWaited, this.pool.options.continueTimeoutMs, this);
      return;
    }
    if (inline === null) socket.write(this.head, 'latin1');
    else if (this.framing === RequestFraming.CHUNKED) writeJoined(socket, this.head + chunkSizeLine(inline.byteLength), inline, '\r\n');
    else writeJoined(socket, this.head, inline, '');
    this.flushPending(connection);
  }

  /** The local server said 100 Continue: the body goes. */
  continued(): void {
    if (!this.bodyHeld || this.connection === null) return;
    this.releaseBody(this.connection);
  }

  /** The final head arrived: a body still held for 100 Continue is never sent (RFC 9110 section 10.1.1). */
  finalHead(): void {
    if (!this.bodyHeld) return;
    this.bodyHeld = false;
    this.clearContinueTimer();
    this.discardBody = true;
    this.inline = null;
    this.pending = null;
    if (this.needDrain) {
      this.needDrain = false;
      this.handler.onRequestDrain();
    }
  }

  /** The socket drained: refused bytes are out. */
  drained(): void {
    if (!this.needDrain || this.state === ExchangeState.FINISHED || this.pending !== null || this.bodyHeld) return;
    this.needDrain = false;
    this.handler.onRequestDrain();
  }

  /**
   * The response ended: the handler hears it. The request body may still be unfinished (a server may
   * answer before reading it all): it goes on until end() and the connection is released after that,
   * or abort() closes the connection.
   */
  responseEnded(): void {
    this.responseDone = true;
    this.clearContinueTimer();
    if (this.requestDone || this.discardBody) this.finish();
    this.handler.onEnd();
  }

  /** Both halves are done (the connection calls this just before it is released or closed). */
  settled(): void {
    this.finish();
    this.connection = null;
  }

  /** The connection went away after the response ended: the rest of the body has nowhere to go. */
  connectionLost(): void {
    this.finish();
    this.connection = null;
    if (!this.requestDone) this.discardBody = true;
    this.pending = null;
    if (this.needDrain) {
      this.needDrain = false;
      this.handler.onRequestDrain();
    }
  }

  /** Ready to be sent again on a new connection (nothing of the body was streamed). */
  rewind(): void {
    this.connection = null;
    this.state = ExchangeState.WAITING;
    this.bodyHeld = false;
    this.requestDone = false;
    this.retried = true;
  }

  /** Ends the exchange with `error` (after onEnd the handler hears nothing: the response was whole). */
  fail(error: LocalHopError): void {
    if (this.state === ExchangeState.FINISHED) return;
    this.close();
    if (!this.responseDone) this.handler.onError(error);
  }

  /** Finished, off its connection (which is closed, its framing unknown) or out of the pool's line. */
  private close(): void {
    this.finish();
    const connection = this.connection;
    this.connection = null;
    if (connection !== null) connection.destroy();
    else this.pool.unqueue(this);
  }

  get finished(): boolean {
    return this.state === ExchangeState.FINISHED;
  }

  /** Whether the request can be written again on another connection, all of it. */
  get replayable(): boolean {
    return !this.bodyStreamed && !this.responseBytesSeen && !this.retried;
  }

  private finish(): void {
    this.state = ExchangeState.FINISHED;
    this.clearContinueTimer();
  }

  /** As curl does: a server that ignores Expect gets the body after a second anyway. */
  continueWaited(): void {
    this.continueTimer = null;
    if (this.bodyHeld && this.connection !== null && this.state === ExchangeState.ACTIVE) this.releaseBody(this.connection);
  }

  private releaseBody(connection: LocalConnection): void {
    this.bodyHeld = false;
    this.clearContinueTimer();
    const inline = this.inline;
    if (inline !== null) this.writeChunk(connection, inline);
    this.flushPending(connection);
  }

  private flushPending(connection: LocalConnection): void {
    const pending = this.pending;
    if (pending !== null) {
      this.pending = null;
      this.bodyStreamed = true;
      for (const chunk of pending) this.writeChunk(connection, chunk);
    }
    if (this.endRequested) this.finishRequest(connection);
    if (this.needDrain && !connection.socket.writableNeedDrain) {
      this.needDrain = false;
      this.handler.onRequestDrain();
    }
  }

  private writeChunk(connection: LocalConnection, chunk: Buffer): boolean {
    const socket = connection.socket;
    if (this.framing !== RequestFraming.CHUNKED) return socket.write(chunk);
    return writeJoined(socket, chunkSizeLine(chunk.byteLength), chunk, '\r\n');
  }

  private finishRequest(connection: LocalConnection): void {
    if (this.requestDone) return;
    if (this.framing === RequestFraming.CHUNKED) {
      const tail = this.trailers === null || this.trailers.length === 0 ? '0\r\n\r\n' : trailerSection(this.trailers);
      if (tail === null) {
        this.fail(badRequest(this.pool.target, 'a trailer field holds a byte a head cannot carry'));
        return;
      }
      connection.socket.write(tail, 'latin1');
    }
    this.requestDone = true;
    connection.exchangeSettled();
  }

  private clearContinueTimer(): void {
    if (this.continueTimer === null) return;
    clearTimeout(this.continueTimer);
    this.continueTimer = null;
  }
}

/** A module function, not a closure per exchange. */
function continueWaited(exchange: LocalExchange): void {
  exchange.continueWaited();
}

/** Bodies up to this size leave with their head or chunk framing in one buffer, one write. */
const JOIN_LIMIT = 16 * 1024;

/** `before`, `body`, `after` as one write: joined into one buffer when small, else corked. */
function writeJoined(socket: Duplex, before: string, body: Buffer, after: string): boolean {
  if (body.byteLength <= JOIN_LIMIT) {
    const joined = Buffer.allocUnsafe(before.length + body.byteLength + after.length);
    joined.write(before, 0, 'latin1');
    body.copy(joined, before.length);
    if (after.length > 0) joined.write(after, before.length + body.byteLength, 'latin1');
    return socket.write(joined);
  }
  socket.cork();
  socket.write(before, 'latin1');
  socket.write(body);
  if (after.length > 0) socket.write(after, 'latin1');
  socket.uncork();
  return !socket.writableNeedDrain;
}
