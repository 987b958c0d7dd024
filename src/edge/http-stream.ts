/**
 * One HTTP exchange through a tunnel, on the edge's side: the request goes out as OPEN (+ DATA) frames
 * within the stream's and the connection's credit; the response comes back as RESPONSE (+ DATA) and is
 * written to a sink: the public client's socket (PublicHttpStream) or memory, for a replay
 * (ReplayHttpStream). Either way the exchange is captured, and the capture is committed before the
 * last byte of the response leaves (DESIGN.md section 3, "Nothing lost").
 */
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import { encode } from '../protocol/codec.js';
import { FrameType, ResetCode } from '../protocol/constants.js';
import { ReceiveWindow, SendCredit, takeFrameCredit, takeWholeCredit } from '../protocol/flow.js';
import type { RingHandle, StoredCapture } from '../store/captures.js';
import { CaptureBuffer } from '../capture-buffer.js';
import type { TunnelSession } from './session.js';

const EMPTY: string[] = [];

const enum AfterCapture {
  NOTHING,
  END,
  FAIL,
}

export interface RequestHead {
  method: string;
  /** Path and query, as received. */
  path: string;
  headers: string[];
  clientAddress: string;
}

export abstract class EdgeHttpStream {
  readonly kind = 'http';
  readonly requestId: string;
  readonly seq: number;
  readonly receivedAt: number;
  /** performance.now() when the request reached the edge. */
  readonly startedAt: number;
  /** performance.now() when OPEN was sent and when RESPONSE arrived, for the hop metric (0: not taken; ~0.1-0.2 µs each, so only with --admin). */
  openedAt = 0;
  respondedAt = 0;
  deadline: number;

  // Request body, edge → client.
  readonly sendCredit: SendCredit;
  private pending: Buffer[] = [];
  /** The whole request body was received from the public side. */
  protected requestFinished = false;
  protected requestPaused = false;
  readonly requestCapture: CaptureBuffer;

  // Response, client → edge.
  readonly receiveWindow: ReceiveWindow;
  status = 0;
  responseHeaders: string[] = EMPTY;
  responseStarted = false;
  readonly responseCapture: CaptureBuffer;
  /** Response body bytes received, and those whose connection credit went back to the client. */
  private bodyReceived = 0;
  private bodyReturned = 0;
  private durationMs = -1;
  /** The edge's error code, or CLIENT_CLOSED, when the local server's response did not complete. */
  error: string | null = null;
  /** No more frames are accepted; the stream left the session's table. */
  closed = false;
  /** The OPEN frame as sent, and whether it carried a body inline (for the capture). */
  private openFrame: Buffer | null = null;
  private openHasBody = false;
  /** The RESPONSE frame as received, and whether it carried the whole body. */
  private responseFrame: Uint8Array | null = null;
  private responseHasBody = false;
  /** What to do once the capture is committed, and what for. */
  private then: AfterCapture = AfterCapture.NOTHING;
  private pendingLast: Uint8Array | null = null;
  private edgeFailure: { code: ErrorCode; message: string; started: boolean } | null = null;

  constructor(
    readonly id: number,
    readonly session: TunnelSession,
    readonly head: RequestHead,
    protected readonly replayOf: string | null,
  ) {
    const next = session.ring.next();
    this.requestId = next.id;
    this.seq = next.seq;
    this.receivedAt = Date.now();
    this.startedAt = performance.now();
    this.deadline = this.receivedAt + session.deps.requestTimeoutMs;
    const settings = session.deps.settings;
    this.sendCredit = new SendCredit(settings.streamWindow);
    this.receiveWindow = new ReceiveWindow(settings.streamWindow);
    const limit = session.deps.capture.enabled ? session.deps.capture.bodyLimit : 0;
    this.requestCapture = new CaptureBuffer(limit);
    this.responseCapture = new CaptureBuffer(limit);
  }

  // ---- request: edge → client -----------------------------------------------------------------------

  /** Sends OPEN with the whole body inline when it fits the credit (the one-frame fast path). */
  sendOpen(body: Uint8Array | null, end: boolean): void {
    const size = body === null ? 0 : body.byteLength;
    let inline = body;
    if (size > 0 && !takeWholeCredit(size, this.session.deps.settings.maxFrameBody, this.sendCredit, this.session.connectionSend)) inline = null;
    const complete = end && (size === 0 || inline !== null);
    const frame = encode([FrameType.OPEN, this.id, this.requestId, this.head.method, this.head.path, this.head.headers, this.head.clientAddress, inline, complete]);
    this.openFrame = frame;
    if (this.session.deps.observer.metrics !== null) this.openedAt = performance.now();
    if (inline !== null && size > 0) {
      // The frame ends with the body's bytes and a one-byte boolean: the capture keeps a view of the
      // frame (which outlives this call) instead of a second copy of the body.
      this.openHasBody = true;
      this.requestCapture.addOwned(frame.subarray(frame.byteLength - 1 - size, frame.byteLength - 1));
    } else if (body !== null) {
      this.requestCapture.add(body);
    }
    this.session.send(frame);
    if (complete) {
      this.requestFinished = true;
    } else if (size > 0 && inline === null) {
      // Too big for one frame, or the credit left is short: send what the credit allows now.
      this.queueBody(body!, end, 0);
      this.drain();
    }
  }

  /** A chunk of the request body (a view the caller may not keep); `last` ends the body. */
  sendBody(chunk: Uint8Array, last: boolean): void {
    this.requestCapture.add(chunk);
    if (this.pending.length > 0) {
      this.queueBody(chunk, last, 0);
      return;
    }
    const sent = this.sendWithinCredit(chunk, last);
    if (sent < chunk.byteLength) this.queueBody(chunk, last, sent);
    else if (last) this.requestFinished = true;
  }

  /** Sends as much of `chunk` as credit allows, in frames of at most maxFrameBody; returns bytes sent. */
  private sendWithinCredit(chunk: Uint8Array, last: boolean): number {
    const maxFrame = this.session.deps.settings.maxFrameBody;
    const connection = this.session.connectionSend;
    let offset = 0;
    const length = chunk.byteLength;
    if (length === 0) {
      if (last) this.session.send(encode([FrameType.DATA, this.id, null, true]));
      return 0;
    }
    while (offset < length) {
      const size = takeFrameCredit(length - offset, maxFrame, this.sendCredit, connection);
      if (size === 0) break;
      const end = last && offset + size === length;
      this.session.send(encode([FrameType.DATA, this.id, chunk.subarray(offset, offset + size), end]));
      offset += size;
    }
    // The timeout runs from the last progress: a local server that reads a large body slowly is fine.
    if (offset > 0) this.deadline = Date.now() + this.session.deps.requestTimeoutMs;
    return offset;
  }

  private queueBody(chunk: Uint8Array, last: boolean, from: number): void {
    // The only copy of a request body chunk: it must outlive the uWS callback until credit arrives.
    if (from < chunk.byteLength) this.pending.push(Buffer.copyBytesFrom(chunk, from));
    if (last) this.requestFinished = true;
    if (this.connectionBlocked()) this.session.blocked.add(this);
    if (!this.requestPaused && !this.requestFinished) this.pauseRequest();
  }

  private connectionBlocked(): boolean {
    return this.session.connectionSend.available === 0;
  }

  /** More credit arrived (stream or connection): send what waits, resume the public socket when empty. */
  drain(): void {
    if (this.closed) return;
    while (this.pending.length > 0) {
      const chunk = this.pending[0]!;
      const isLastChunk = this.pending.length === 1;
      const sent = this.sendWithinCredit(chunk, this.requestFinished && isLastChunk);
      if (sent < chunk.byteLength) {
        this.pending[0] = chunk.subarray(sent);
        if (this.connectionBlocked()) this.session.blocked.add(this);
        return;
      }
      this.pending.shift();
    }
    if (!this.requestFinished && this.requestPaused) this.resumeRequest();
  }

  onWindow(credit: number): void {
    this.sendCredit.grant(credit);
    this.drain();
  }

  /** Request body bytes held while waiting for credit. */
  get bufferedRequestBytes(): number {
    let bytes = 0;
    for (const chunk of this.pending) bytes += chunk.byteLength;
    return bytes;
  }


  protected abstract pauseRequest(): void;
  protected abstract resumeRequest(): void;

  // ---- response: client → edge ----------------------------------------------------------------------

  /**
   * A RESPONSE frame (`frame`: the whole message). Its body is a view of the session's own copy of the
   * message: it may be kept.
   * Returns false when it breaks the protocol (second RESPONSE).
   */
  onResponse(status: number, headers: string[], body: Uint8Array | null, end: boolean, frame: Uint8Array): boolean {
    if (this.responseStarted) return false;
    this.responseStarted = true;
    if (this.session.deps.observer.metrics !== null) this.respondedAt = performance.now();
    this.responseFrame = frame;
    this.responseHasBody = end && body !== null && body.byteLength > 0;
    this.status = status;
    this.responseHeaders = headers;
    this.startResponse();
    if (body !== null && body.byteLength > 0) this.onResponseBody(body, end);
    else if (end) this.finish();
    return true;
  }

  onData(chunk: Uint8Array | null, end: boolean): boolean {
    if (!this.responseStarted) return false;
    if (chunk !== null && chunk.byteLength > 0) this.onResponseBody(chunk, end);
    else if (end) this.finish();
    return true;
  }

  private onResponseBody(chunk: Uint8Array, end: boolean): void {
    this.bodyReceived += chunk.byteLength;
    this.responseCapture.addOwned(chunk);
    if (end) {
      this.finish(chunk);
    } else {
      this.writeBody(chunk);
    }
  }

  /** Returns credit for `bytes` of response body written out. */
  protected consumed(bytes: number): void {
    if (bytes === 0) return;
    if (!this.closed) {
      const grant = this.receiveWindow.consume(bytes);
      if (grant > 0) this.session.send(encode([FrameType.WINDOW, this.id, grant]));
    }
    this.bodyReturned += bytes;
    this.session.consumedConnection(bytes);
  }

  /**
   * The exchange is over on the public side (ended, failed or abandoned): whatever response bytes were
   * received but not written out are dropped, and their connection credit goes back to the client.
   */
  protected releaseConnectionCredit(): void {
    const rest = this.bodyReceived - this.bodyReturned;
    if (rest <= 0) return;
    this.bodyReturned = this.bodyReceived;
    this.session.consumedConnection(rest);
  }

  /** The response is complete: capture it, and once committed write the last bytes. */
  private finish(lastChunk: Uint8Array | null = null): void {
    this.durationMs = Math.round(performance.now() - this.startedAt);
    this.session.endStream(this);
    this.pendingLast = lastChunk;
    this.then = AfterCapture.END;
    this.capture();
  }

  /** The edge answers instead of the local server (timeout, tunnel closed, local unreachable). */
  fail(code: ErrorCode, message: string = ERROR_CODES[code].message): void {
    if (this.closed) return;
    this.error = code;
    this.durationMs = Math.round(performance.now() - this.startedAt);
    this.session.endStream(this);
    this.edgeFailure = { code, message, started: this.responseStarted };
    if (!this.responseStarted) this.status = ERROR_CODES[code].status;
    this.then = AfterCapture.FAIL;
    this.capture();
  }

  /** The public side went away: tell the client, capture what there was. */
  protected abandoned(): void {
    if (this.closed) return;
    this.error ??= 'CLIENT_CLOSED';
    this.durationMs = Math.round(performance.now() - this.startedAt);
    this.session.send(encode([FrameType.RESET, this.id, ResetCode.CANCEL, 'the public client closed the connection']));
    this.session.endStream(this);
    if (!this.responseStarted) this.status = 499;
    this.then = AfterCapture.NOTHING;
    this.capture();
  }

  /** A RESET from the client. */
  onReset(code: number, message: string): void {
    const reason = message === '' ? undefined : message;
    if (code === ResetCode.LOCAL_UNREACHABLE || code === ResetCode.LOCAL_ERROR) this.fail('LOCAL_UNREACHABLE', reason);
    else this.fail('TUNNEL_CLOSED', reason);
  }

  /** Counts the exchange and hands it to this turn's capture commit (or finishes at once without capture). */
  private capture(): void {
    const deps = this.session.deps;
    deps.usage.count(this.session.accountId, this.requestCapture.size, this.responseCapture.size);
    if (this.replayOf === null && deps.observer.watching) deps.observer.exchangeEnded(this);
    if (deps.capture.enabled) deps.turn.capture(this);
    else this.afterCapture();
  }

  get ring(): RingHandle {
    return this.session.ring;
  }

  /** The turn committed the capture: finish the public side. */
  afterCapture(): void {
    const then = this.then;
    this.then = AfterCapture.NOTHING;
    if (then === AfterCapture.END) {
      const last = this.pendingLast;
      this.pendingLast = null;
      this.endResponse(last);
    } else if (then === AfterCapture.FAIL) {
      const failure = this.edgeFailure!;
      this.failResponse(failure.code, failure.message, failure.started);
    }
  }

  /**
   * The capture as it is stored: the frames for the heads, and a body only where it is not the one
   * inside its frame, kept whole (docs/architecture.md, "Capture durability").
   */
  storedCapture(): StoredCapture {
    const requestCapture = this.requestCapture;
    const responseCapture = this.responseCapture;
    // A frame whose inline body was cut by the capture limit is not stored: it would keep the whole body.
    const open = this.openFrame !== null && !(this.openHasBody && requestCapture.truncated) ? this.openFrame : null;
    const requestInFrame = open !== null && this.openHasBody;
    const response = this.responseFrame !== null && !(this.responseHasBody && responseCapture.truncated) ? this.responseFrame : null;
    const responseInFrame = response !== null && this.responseHasBody;
    return {
      id: this.requestId,
      seq: this.seq,
      subdomain: this.session.subdomain,
      accountId: this.session.accountId,
      tokenId: this.session.tokenId,
      clientAddress: this.head.clientAddress,
      method: this.head.method,
      path: this.head.path,
      status: this.status,
      receivedAt: this.receivedAt,
      durationMs: this.durationMs < 0 ? Math.round(performance.now() - this.startedAt) : this.durationMs,
      error: this.error,
      replayOf: this.replayOf,
      requestBodySize: requestCapture.size,
      requestTruncated: requestCapture.truncated,
      responseBodySize: responseCapture.size,
      responseTruncated: responseCapture.truncated,
      open,
      requestHeaders: open === null ? this.head.headers : null,
      requestBody: requestInFrame ? null : requestCapture.bytes(),
      response,
      responseHeaders: response === null ? this.responseHeaders : null,
      responseBody: responseInFrame ? null : responseCapture.bytes(),
    };
  }

  /** The edge gives up on the exchange: the client stops work on it, the public side gets the error. */
  cancel(code: ErrorCode, message: string): void {
    if (this.closed) return;
    this.session.send(encode([FrameType.RESET, this.id, ResetCode.CANCEL, message]));
    this.fail(code, message);
  }

  /** Called by the session's coarse timer. */
  checkDeadline(now: number): void {
    if (!this.responseStarted && now >= this.deadline) {
      this.cancel('LOCAL_TIMEOUT', `The local server did not answer within ${this.session.deps.requestTimeoutMs} ms.`);
    }
  }

  /** Status and headers arrived. */
  protected abstract startResponse(): void;
  /** A middle chunk of the response body (a view valid during the call). */
  protected abstract writeBody(chunk: Uint8Array): void;
  /** The last bytes (owned, or a view when the capture is off) and the end of the response. */
  protected abstract endResponse(lastChunk: Uint8Array | null): void;
  /** Answer with the edge's error, or cut the response if it already started. */
  protected abstract failResponse(code: ErrorCode, message: string, started: boolean): void;
}
