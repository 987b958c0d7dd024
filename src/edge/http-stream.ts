/**
 * One HTTP exchange through a tunnel, on the edge's side: the request goes out as OPEN (+ DATA, +
 * TRAILERS) frames within the stream's and the connection's credit; the response comes back as INFO
 * (interim answers), RESPONSE (+ DATA, + TRAILERS) and is written to a sink: the public client's socket
 * (PublicHttpStream) or memory, for a replay (ReplayHttpStream). Either way the exchange is captured,
 * and the capture is committed before the last byte of the response leaves (DESIGN.md section 3,
 * "Nothing lost"), except an upgrade request's, which is never captured (see `capture`).
 *
 * An upgrade request (OPEN with `upgrade`) answered 101 switches the stream to raw bytes: DATA both
 * ways under the same credit, `end` as each direction's FIN (docs/protocol.md section 13); the public
 * connection switches once the 101's turn is done.
 */
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import { copyWithDataRoom, dataFrame, encode, uintSize, withBinaryRoom } from '../protocol/codec.js';
import { FrameType, ResetCode } from '../protocol/constants.js';
import { ReceiveWindow, SendCredit, takeFrameCredit, takeWholeCredit } from '../protocol/flow.js';
import type { CaptureToStore, RingHandle } from '../store/captures.js';
import { CaptureBuffer } from '../capture-buffer.js';
import { checkResponseHeaders, checkTrailers, reasonProblem, statusKind, StatusKind, withoutLength, type ResponseHead } from './response-head.js';
import type { StreamHost } from './stream-host.js';

const EMPTY: string[] = [];
const EMPTY_BODY = new Uint8Array(0);

/**
 * Where an HTTP stream is, as the frames from the client see it (docs/protocol.md section 5). Every
 * RESPONSE and DATA frame is checked against it; one that does not fit (a second final RESPONSE, DATA
 * before RESPONSE, body past the declared Content-Length, a body on a response that has none) resets
 * the stream with PROTOCOL_ERROR and the public client gets 502, or its connection closed when the
 * response had started. Frames for a stream that left the session's table are ignored by the session.
 */
export const enum HttpStreamState {
  /** OPEN sent; waiting for the final response head (INFO heads may come first). */
  AWAITING_HEAD,
  /** The final head arrived; body frames follow until one carries end (or TRAILERS come). */
  RECEIVING_BODY,
  /** A 101 to an upgrade request: raw bytes both ways until both directions ended. */
  UPGRADED,
  /** The client's last frame arrived: the capture commits, then the last bytes go out. */
  COMPLETE,
  /** Ended early: the edge answered instead (timeout, tunnel closed, RESET, a bad frame) or the public client left. */
  RESET,
}

const enum AfterCapture {
  NOTHING,
  END,
  FAIL,
  SWITCH,
}

export interface RequestHead {
  method: string;
  /** The request target sent to the local server: origin-form (or `*`), as received. */
  target: string;
  headers: string[];
  clientAddress: string;
  /** An upgrade request: a 101 switches the stream to raw bytes. */
  upgrade: boolean;
  /**
   * The head a capture keeps instead of the OPEN frame, when the frame carries a credential the
   * tunnel's policy redacts (docs/policies.md, "What is captured"); absent or null: the frame.
   */
  captureHeaders?: readonly string[] | null;
}

/**
 * Bytes an OPEN frame holds after its inline body: the booleans `end` and `upgrade`, one byte each in
 * msgpack. A field appended to OPEN after them must be counted here, or captures of inline bodies shift.
 */
const OPEN_BYTES_AFTER_BODY = 2;

export abstract class EdgeHttpStream {
  readonly kind = 'http';
  state = HttpStreamState.AWAITING_HEAD;
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
  /** The whole request body was received from the public side (after a 101: the public side's FIN). */
  protected requestFinished = false;
  /** Trailer fields that end the request body: sent after its last bytes. */
  private requestTrailers: string[] | null = null;
  protected requestPaused = false;
  readonly requestCapture: CaptureBuffer;

  // Response, client → edge.
  readonly receiveWindow: ReceiveWindow;
  status = 0;
  responseHeaders: string[] = EMPTY;
  /** The final head as the public client gets it (set when the final RESPONSE is accepted). */
  protected response: ResponseHead | null = null;
  /** The most body bytes the response may have: its Content-Length, 0 when it has no body, -1 unbounded. */
  private bodyLimit = -1;
  readonly responseCapture: CaptureBuffer;
  /** Response body bytes received, and those whose connection credit went back to the client. */
  private bodyReceived = 0;
  private bodyReturned = 0;
  private durationMs = -1;
  /** The edge's error code, or CLIENT_CLOSED, when the local server's response did not complete. */
  error: string | null = null;
  /** The OPEN frame as sent, and whether it carried a body inline (for the capture). */
  private openFrame: Buffer | null = null;
  private openHasBody = false;
  /** The RESPONSE frame as received, and whether it carried the whole body. */
  private responseFrame: Uint8Array | null = null;
  private responseHasBody = false;
  /** After a 101: the client's direction ended (DATA end, or a FIN it relayed). */
  protected rawReceiveEnded = false;
  /** The reason phrase and trailers of the final response, as the client sent them. */
  reason = '';
  protected responseTrailers: string[] | null = null;
  /** What to do once the capture is committed, and what for. */
  private then: AfterCapture = AfterCapture.NOTHING;
  private pendingLast: Uint8Array | null = null;
  private edgeFailure: { code: ErrorCode; message: string } | null = null;

  constructor(
    readonly id: number,
    readonly session: StreamHost,
    readonly head: RequestHead,
    protected readonly replayOf: string | null,
  ) {
    const next = session.ring.next();
    this.requestId = next.id;
    this.seq = next.seq;
    this.receivedAt = Date.now();
    this.startedAt = performance.now();
    this.deadline = this.receivedAt + session.requestTimeoutMs;
    const settings = session.settings;
    this.sendCredit = new SendCredit(settings.streamWindow);
    this.receiveWindow = new ReceiveWindow(settings.streamWindow);
    this.requestCapture = new CaptureBuffer(session.captureLimit);
    this.responseCapture = new CaptureBuffer(session.captureLimit);
  }

  /** The stream left the session's table: no frame from the client is taken any more. */
  get closed(): boolean {
    return this.state >= HttpStreamState.COMPLETE;
  }

  /** Switched to raw bytes (a 101 to an upgrade). */
  get upgraded(): boolean {
    return this.state === HttpStreamState.UPGRADED;
  }

  /** The final response head was accepted. */
  get responseStarted(): boolean {
    return this.response !== null;
  }

  // ---- request: edge → client -----------------------------------------------------------------------

  /**
   * Sends OPEN with the whole body inline when it fits the credit (the one-frame fast path). `framed`:
   * the complete OPEN with `body` already in it (`openWithRoom`), sent as it is when the body goes inline.
   */
  sendOpen(body: Uint8Array | null, end: boolean, framed: Buffer | null = null): void {
    const size = body === null ? 0 : body.byteLength;
    let inline = body;
    if (size > 0 && !takeWholeCredit(size, this.session.settings.maxFrameBody, this.sendCredit, this.session.connectionSend)) inline = null;
    const complete = end && (size === 0 || inline !== null);
    const frame = framed !== null && inline !== null && complete ? framed : this.encodeOpen(inline, complete);
    this.openFrame = frame;
    if (this.session.timesHops) this.openedAt = performance.now();
    if (inline !== null && size > 0) {
      // The frame ends with the body's bytes, two one-byte booleans and the tunnel id (absent for 0): the
      // capture keeps a view of the frame (which outlives this call) instead of a second copy of the body.
      this.openHasBody = true;
      const bodyEnd = frame.byteLength - this.openBytesAfterBody();
      this.requestCapture.addOwned(frame.subarray(bodyEnd - size, bodyEnd));
    }
    this.session.send(frame);
    if (complete) {
      this.requestFinished = true;
    } else if (size > 0 && inline === null) {
      // Too big for one frame, or the credit left is short: send what the credit allows now (the
      // queued copy is what the capture keeps).
      this.queueBody(body!, end, 0);
      this.drain();
    }
  }

  private encodeOpen(inline: Uint8Array | null, complete: boolean): Buffer {
    const head = this.head;
    const tunnel = this.session.tunnelId;
    return tunnel === 0
      ? encode([FrameType.OPEN, this.id, this.requestId, head.method, head.target, head.headers, head.clientAddress, inline, complete, head.upgrade])
      : encode([FrameType.OPEN, this.id, this.requestId, head.method, head.target, head.headers, head.clientAddress, inline, complete, head.upgrade, tunnel]);
  }

  private openBytesAfterBody(): number {
    const tunnel = this.session.tunnelId;
    return tunnel === 0 ? OPEN_BYTES_AFTER_BODY : OPEN_BYTES_AFTER_BODY + uintSize(tunnel);
  }

  /**
   * The complete OPEN of a `size`-byte body, with room for the body that the caller fills in place (its
   * pieces copied once, straight into the frame): `frame.subarray(start, start + size)`. Then
   * `sendOpen(that room, true, frame)`.
   */
  openWithRoom(size: number): { frame: Buffer; start: number } {
    const after = this.openBytesAfterBody();
    const frame = withBinaryRoom(this.encodeOpen(EMPTY_BODY, true), after, size);
    return { frame, start: frame.byteLength - after - size };
  }

  /**
   * A chunk of the request body (a view the caller may not keep); `last` ends the body. The capture
   * keeps views of the frames the bytes went out in, or the copy of the bytes that wait for credit: one
   * copy of the body, not a second one for the capture.
   */
  sendBody(chunk: Uint8Array, last: boolean): void {
    if (this.pending.length > 0) {
      this.queueBody(chunk, last, 0);
      return;
    }
    const sent = this.sendWithinCredit(chunk, last, true);
    if (sent < chunk.byteLength) this.queueBody(chunk, last, sent);
    else if (last) this.requestFinished = true;
  }

  /**
   * Sends as much of `chunk` as credit allows, in frames of at most maxFrameBody; returns bytes sent.
   * `capture`: the bytes sent are new to the capture (not queued bytes it already holds).
   */
  private sendWithinCredit(chunk: Uint8Array, last: boolean, capture: boolean): number {
    const maxFrame = this.session.settings.maxFrameBody;
    const connection = this.session.connectionSend;
    let offset = 0;
    const length = chunk.byteLength;
    const trailers = last ? this.requestTrailers : null;
    if (length === 0) {
      if (last) this.session.send(trailers === null ? encode([FrameType.DATA, this.id, null, true]) : encode([FrameType.TRAILERS, this.id, trailers]));
      return 0;
    }
    while (offset < length) {
      const size = takeFrameCredit(length - offset, maxFrame, this.sendCredit, connection);
      if (size === 0) break;
      const end = last && offset + size === length;
      // Bytes that waited for credit (queueBody) are framed where they lie when they go whole.
      const frame = dataFrame(this.id, offset === 0 && size === length ? chunk : chunk.subarray(offset, offset + size), end && trailers === null);
      // The frame ends with the bytes and a one-byte boolean (`end`). A switched stream's bytes
      // are not captured (its handshake was).
      if (capture && this.state !== HttpStreamState.UPGRADED) this.requestCapture.addOwned(frame.subarray(frame.byteLength - 1 - size, frame.byteLength - 1));
      this.session.send(frame);
      offset += size;
      if (end && trailers !== null) this.session.send(encode([FrameType.TRAILERS, this.id, trailers]));
    }
    // The timeout runs from the last progress: a local server that reads a large body slowly is fine.
    if (offset > 0) this.deadline = Date.now() + this.session.requestTimeoutMs;
    return offset;
  }

  private queueBody(chunk: Uint8Array, last: boolean, from: number): void {
    // The only copy of a request body chunk: it must outlive the read it came in until credit arrives.
    // Each frame's worth lands with room for a DATA frame around it, so when the credit takes it whole
    // it leaves as it is (codec's dataFrame), not copied into a frame again.
    const maxFrame = this.session.settings.maxFrameBody;
    for (let at = from; at < chunk.byteLength; at += maxFrame) {
      const size = Math.min(maxFrame, chunk.byteLength - at);
      const copy = copyWithDataRoom(at === 0 && size === chunk.byteLength ? chunk : chunk.subarray(at, at + size));
      this.pending.push(copy);
      if (this.state !== HttpStreamState.UPGRADED) this.requestCapture.addOwned(copy);
    }
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
      const sent = this.sendWithinCredit(chunk, this.requestFinished && isLastChunk, false);
      if (sent < chunk.byteLength) {
        this.pending[0] = chunk.subarray(sent);
        if (this.connectionBlocked()) this.session.blocked.add(this);
        return;
      }
      this.pending.shift();
    }
    // Also when the body has ended meanwhile: uWS goes on parsing what it already read after a pause,
    // so the body's last chunk can arrive while paused, and a socket left paused never reads the next
    // request on the connection (uWS times it out, and the client's next request is reset).
    if (this.requestPaused) this.resumeRequest();
  }

  onWindow(credit: number): void {
    this.sendCredit.grant(credit);
    this.drain();
  }

  /** Trailer fields of the request (before its body's last call): they go as TRAILERS after the body. */
  setRequestTrailers(fields: string[]): void {
    this.requestTrailers = fields.length > 0 ? fields : null;
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
   * message: it may be kept. The session did the flow-control accounting of the body already.
   */
  onResponse(status: number, reason: string, headers: string[], body: Uint8Array | null, end: boolean, frame: Uint8Array): void {
    const size = body === null ? 0 : body.byteLength;
    if (this.state !== HttpStreamState.AWAITING_HEAD) {
      this.refuse(`a second RESPONSE on stream ${this.id}`, size);
      return;
    }
    const kind = statusKind(status);
    if (kind === StatusKind.INFORMATIONAL) {
      this.refuse(`the informational status ${status} in RESPONSE (interim answers are INFO frames)`, size);
      return;
    }
    if (kind === StatusKind.INVALID) {
      this.refuse(`the status ${status} is not an HTTP status (100-599)`, size);
      return;
    }
    if (kind === StatusKind.SWITCHING && !this.head.upgrade) {
      this.refuse('101 Switching Protocols on a stream that asked for no upgrade', size);
      return;
    }
    const switching = kind === StatusKind.SWITCHING;
    const checked = reasonProblem(reason) ?? checkResponseHeaders(headers, switching);
    if (typeof checked === 'string') {
      this.refuse(checked, size);
      return;
    }
    if (this.session.timesHops) this.respondedAt = performance.now();
    this.response = checked;
    this.responseFrame = frame;
    this.status = status;
    this.reason = reason;
    this.responseHeaders = headers;
    if (switching) {
      this.switchStream(body, end);
      return;
    }
    this.state = HttpStreamState.RECEIVING_BODY;
    this.bodyLimit = this.head.method === 'HEAD' || status === 204 || status === 304 ? 0 : checked.contentLength;
    this.responseHasBody = end && size > 0;
    this.startResponse();
    if (size > 0) this.onResponseBody(body!, end);
    else if (end) this.finish();
  }

  /** An INFO frame: an interim answer (100, 102, 103, …) before the final one, passed on as it came. */
  onInfo(status: number, reason: string, headers: string[]): void {
    if (this.state !== HttpStreamState.AWAITING_HEAD) {
      this.refuse(`INFO after the final response on stream ${this.id}`, 0);
      return;
    }
    if (statusKind(status) !== StatusKind.INFORMATIONAL) {
      this.refuse(`INFO with the status ${status} (only 1xx other than 101)`, 0);
      return;
    }
    const checked = reasonProblem(reason) ?? checkResponseHeaders(headers);
    if (typeof checked === 'string') {
      this.refuse(checked, 0);
      return;
    }
    // An interim answer is progress: the local server is working on it.
    this.deadline = Date.now() + this.session.requestTimeoutMs;
    this.interim(status, reason, withoutLength(checked));
  }

  /** A TRAILERS frame from the client: trailer fields, and the end of the response body. */
  onTrailers(headers: string[]): void {
    if (this.state === HttpStreamState.UPGRADED) {
      this.refuse(`TRAILERS on the switched stream ${this.id}`, 0);
      return;
    }
    if (this.state !== HttpStreamState.RECEIVING_BODY) {
      this.refuse(`TRAILERS before RESPONSE on stream ${this.id}`, 0);
      return;
    }
    const checked = checkTrailers(headers);
    if (typeof checked === 'string') {
      this.refuse(checked, 0);
      return;
    }
    this.responseTrailers = checked;
    this.finish();
  }

  /** A DATA frame from the client (its chunk a view of the session's copy of the message). */
  onData(chunk: Uint8Array | null, end: boolean): void {
    const size = chunk === null ? 0 : chunk.byteLength;
    if (this.state === HttpStreamState.UPGRADED) {
      if (this.rawReceiveEnded) {
        this.refuse(`DATA after the end of the switched stream ${this.id}`, size);
        return;
      }
      if (end) this.rawReceiveEnded = true;
      this.writeRaw(chunk, end);
      return;
    }
    if (this.state !== HttpStreamState.RECEIVING_BODY) {
      this.refuse(`DATA before RESPONSE on stream ${this.id}`, size);
      return;
    }
    if (size > 0) this.onResponseBody(chunk!, end);
    else if (end) this.finish();
  }

  /**
   * A 101 to the upgrade: the exchange is counted now (an upgrade is not captured), then the public
   * connection switches (AfterCapture.SWITCH). Bytes that came with the 101 wait for the switch like any
   * raw bytes.
   */
  private switchStream(body: Uint8Array | null, end: boolean): void {
    this.state = HttpStreamState.UPGRADED;
    this.durationMs = Math.round(performance.now() - this.startedAt);
    this.requestFinished = false;
    this.then = AfterCapture.SWITCH;
    this.capture();
    if ((body !== null && body.byteLength > 0) || end) {
      if (end) this.rawReceiveEnded = true;
      this.writeRaw(body, end);
    }
  }

  /** After a 101: both directions ended, the stream leaves the table (nothing more to capture). */
  protected rawEnded(): void {
    if (this.state !== HttpStreamState.UPGRADED) return;
    this.state = HttpStreamState.COMPLETE;
    this.pending = [];
    this.session.endStream(this);
    this.releaseConnectionCredit();
    this.session.upgradeEnded(this);
  }

  private onResponseBody(chunk: Uint8Array, end: boolean): void {
    const limit = this.bodyLimit;
    if (limit >= 0 && this.bodyReceived + chunk.byteLength > limit) {
      this.refuse(
        limit === 0 && this.response!.contentLength !== 0 ? `a body on a response that has none (status ${this.status})` : `body bytes beyond the declared content-length ${limit}`,
        chunk.byteLength,
      );
      return;
    }
    this.bodyReceived += chunk.byteLength;
    this.responseCapture.addOwned(chunk);
    if (end) {
      this.finish(chunk);
    } else {
      this.writeBody(chunk);
    }
  }

  /**
   * A frame that does not fit the stream's state: the stream is reset with PROTOCOL_ERROR, the public
   * client gets 502 INVALID_RESPONSE (or its connection closed), and the tunnel carries on. The
   * refused frame's body bytes are dropped, so their connection credit goes back at once.
   */
  private refuse(reason: string, droppedBytes: number): void {
    if (droppedBytes > 0) this.session.consumedConnection(droppedBytes);
    if (this.closed) return;
    this.session.send(encode([FrameType.RESET, this.id, ResetCode.PROTOCOL_ERROR, reason]));
    this.fail('INVALID_RESPONSE', `The tunnel client sent a response the edge cannot forward: ${reason}.`);
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
    this.state = HttpStreamState.COMPLETE;
    this.pending = [];
    // Answered before the whole body was read (or sent): the rest is read and dropped, as direct.
    if (this.requestPaused) this.resumeRequest();
    this.session.endStream(this);
    this.pendingLast = lastChunk;
    this.then = AfterCapture.END;
    this.capture();
  }

  /** The edge answers instead of the local server (timeout, tunnel closed, local unreachable). */
  fail(code: ErrorCode, message: string = ERROR_CODES[code].message): void {
    if (this.state === HttpStreamState.UPGRADED) {
      this.rawFailed();
      return;
    }
    if (this.closed) return;
    this.error = code;
    this.durationMs = Math.round(performance.now() - this.startedAt);
    this.state = HttpStreamState.RESET;
    // Request bytes waiting for credit will never be sent: let them go now, not when uWS frees the response.
    this.pending = [];
    this.session.endStream(this);
    this.edgeFailure = { code, message };
    if (!this.responseStarted) this.status = ERROR_CODES[code].status;
    this.then = AfterCapture.FAIL;
    this.capture();
  }

  /** The switched stream is cut (RESET, the tunnel closed, the public socket failed): it ends at once. */
  private rawFailed(): void {
    if (this.state !== HttpStreamState.UPGRADED) return;
    this.state = HttpStreamState.RESET;
    this.pending = [];
    this.session.endStream(this);
    this.releaseConnectionCredit();
    this.cutRaw();
    this.session.upgradeEnded(this);
  }

  /** The public side went away: tell the client, capture what there was. */
  protected abandoned(): void {
    if (this.state === HttpStreamState.UPGRADED) {
      this.session.send(encode([FrameType.RESET, this.id, ResetCode.CANCEL, 'the public client closed the connection']));
      this.rawFailed();
      return;
    }
    if (this.closed) return;
    this.error ??= 'CLIENT_CLOSED';
    this.durationMs = Math.round(performance.now() - this.startedAt);
    this.session.send(encode([FrameType.RESET, this.id, ResetCode.CANCEL, 'the public client closed the connection']));
    this.state = HttpStreamState.RESET;
    this.pending = [];
    this.session.endStream(this);
    if (!this.responseStarted) this.status = 499;
    this.then = AfterCapture.NOTHING;
    this.capture();
  }

  /** A RESET from the client. */
  onReset(code: number, message: string): void {
    if (this.state === HttpStreamState.UPGRADED) {
      this.rawFailed();
      return;
    }
    const reason = message === '' ? undefined : message;
    if (code === ResetCode.LOCAL_UNREACHABLE || code === ResetCode.LOCAL_ERROR) this.fail('LOCAL_UNREACHABLE', reason);
    else this.fail('TUNNEL_CLOSED', reason);
  }

  /**
   * Counts the exchange and hands it to this turn's capture commit (or finishes at once without capture).
   * A request that asked to switch protocols (a WebSocket) is not captured, whatever it was answered: the
   * inspector shows it under a `ws_` id the edge's API does not know (docs/inspector.md), so the edge's
   * history, the dashboard and `burrow requests` hold HTTP exchanges only, and nothing replays an upgrade.
   */
  private capture(): void {
    this.session.capture(this, this.requestCapture.size, this.responseCapture.size, !this.head.upgrade);
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
      this.failResponse(failure.code, failure.message);
    } else if (then === AfterCapture.SWITCH && this.state === HttpStreamState.UPGRADED) {
      this.switchProtocols();
    }
  }

  /**
   * The capture as it is stored: the frames for the heads, and a body only where it is not the one
   * inside its frame, kept whole (docs/architecture.md, "Capture durability").
   */
  storedCapture(): CaptureToStore {
    const requestCapture = this.requestCapture;
    const responseCapture = this.responseCapture;
    // A frame whose inline body was cut by the capture limit is not stored: it would keep the whole body.
    const redacted = this.head.captureHeaders ?? null;
    const open = this.openFrame !== null && redacted === null && !(this.openHasBody && requestCapture.truncated) ? this.openFrame : null;
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
      path: this.head.target,
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
      requestHeaders: open === null ? ((redacted as string[] | null) ?? this.head.headers) : null,
      requestBody: requestInFrame ? null : requestCapture.keptBody(),
      response,
      responseHeaders: response === null ? this.responseHeaders : null,
      responseBody: responseInFrame ? null : responseCapture.keptBody(),
    };
  }

  /** The edge gives up on the exchange: the client stops work on it, the public side gets the error. */
  cancel(code: ErrorCode, message: string): void {
    if (this.closed) return;
    this.session.send(encode([FrameType.RESET, this.id, ResetCode.CANCEL, message]));
    this.fail(code, message);
  }

  /** Called by the session's coarse timer (a switched stream has no deadline: the two ends' own pings rule). */
  checkDeadline(now: number): void {
    if (!this.responseStarted && now >= this.deadline) {
      this.cancel('LOCAL_TIMEOUT', `The local server did not answer within ${this.session.requestTimeoutMs} ms.`);
    }
  }

  /** Status and headers arrived. */
  protected abstract startResponse(): void;
  /** An interim answer (checked, hop-by-hop fields left out). */
  protected abstract interim(status: number, reason: string, headers: string[]): void;
  /** The 101's capture is committed: the public connection switches to raw bytes. */
  protected abstract switchProtocols(): void;
  /** Raw bytes from the client after a 101 (a view the sink may keep), `end` its FIN. */
  protected abstract writeRaw(chunk: Uint8Array | null, end: boolean): void;
  /** The switched stream was cut: close the public socket at once. */
  protected abstract cutRaw(): void;
  /** A middle chunk of the response body (a view valid during the call). */
  protected abstract writeBody(chunk: Uint8Array): void;
  /** The last bytes (owned, or a view when the capture is off) and the end of the response. */
  protected abstract endResponse(lastChunk: Uint8Array | null): void;
  /** Answer with the edge's error, or cut the response if its head was already written. */
  protected abstract failResponse(code: ErrorCode, message: string): void;
}
