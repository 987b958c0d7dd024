/**
 * One stream on the client's side (docs/protocol.md sections 5-7, 12 and 13): an OPEN becomes a request
 * on the local hop (src/client/local-hop/, raw sockets and llhttp), and the local server's answer goes
 * back as it was sent: INFO for each 1xx but 101, RESPONSE with its status, reason phrase and fields
 * (names in their case, values byte for byte, hop-by-hop ones left out), DATA, TRAILERS, all within
 * credit. A request body goes to the local socket as the edge sends it, and its credit goes back only
 * once the local socket took the bytes. `Expect: 100-continue` reaches the local server, whose 100 (or
 * refusal) comes back.
 *
 * What the local hop hands over during one loop turn is framed at the turn's end: a response whose
 * head, body and end come in one turn is one RESPONSE frame whatever its framing; otherwise the head
 * leaves at the end of the turn it came in, and each later turn's bytes as one DATA frame, so nothing is
 * held back (a flushed head, a slow body). The local socket is not read while bytes wait for credit, so
 * a slow public reader slows the local server instead of filling the client's memory.
 *
 * An upgrade (OPEN with `upgrade`): a 101 goes back as RESPONSE 101 with the local server's fields
 * (Connection, Upgrade, the extensions and subprotocol it chose; no framing fields), and from then on the
 * socket's bytes pass both ways as DATA, untouched, under the same credit; each direction's FIN is DATA
 * `end`, and the stream ends when both directions ended. Any other answer to an upgrade is an ordinary
 * response, body and all. A WebSocket's messages are read for the inspector as they pass
 * (src/client/ws-observer.ts), never changed.
 */
import type { Duplex } from 'node:stream';
import { MessageHead } from '../http1/parser.js';
import { DATA_PREFIX_ROOM, dataFrame, encode, markDataRoom, withBinaryRoom } from '../protocol/codec.js';
import { FrameType } from '../protocol/constants.js';
import { ReceiveWindow, SendCredit, takeFrameCredit, takeWholeCredit } from '../protocol/flow.js';
import { dropHopByHop, isName } from '../protocol/headers.js';
import { CaptureBuffer } from '../capture-buffer.js';
import { edgeResetText, logWebSocketMessage, webSocketExchange, WS_MESSAGE_BYTES_KEPT, type Exchange } from './exchange.js';
import { eventIdOf } from './delivered-events.js';
import { localRequestHeaders } from './host-header.js';
import { failed, LocalHopError } from './local-hop/errors.js';
import { ResponseFraming, type LocalExchange, type LocalResponseHandler, type ResponseFramingValue } from './local-hop/exchange.js';
import type { LocalTarget } from './routes.js';
import type { StreamHost } from './stream-host.js';
import { WsObserver, WsOpcode, type ObservedWsMessage } from './ws-observer.js';

export interface OpenRequest {
  requestId: string;
  method: string;
  /** The request target (origin-form, or `*`), as the public client sent it. */
  path: string;
  headers: string[];
  clientAddress: string;
  replayOf: string | null;
  /** OPEN's `upgrade`: the request asks to switch protocols (a WebSocket or any other). */
  upgrade: boolean;
}

const EMPTY_BODY = Buffer.alloc(0);

/** Response fields that are each hop's own framing: a 101 has no body, and the edge writes its own. */
const FRAMING = ['content-length', 'transfer-encoding'];

export class ClientHttpStream implements LocalResponseHandler {
  closed = false;
  readonly port: number;
  readonly target: LocalTarget;
  private readonly startedAt = Date.now();
  private readonly startedHr = performance.now();
  private exchange: LocalExchange | null = null;

  // Request body, edge → local.
  private readonly requestWindow: ReceiveWindow;
  private requestEnded = false;
  /** Body bytes the edge sent that the local socket has not taken yet: their credit waits. */
  private uncredited = 0;
  /** Body bytes each way (raw bytes after a 101), for the counters and the inspector. */
  private requestBytes = 0;
  private responseBytes = 0;

  // Response, local → edge.
  private readonly sendCredit: SendCredit;
  private status = 0;
  private reason = '';
  private responseHeaders: string[] = [];
  /** Trailer fields after the local server's chunked body: they end the response (TRAILERS). */
  private trailers: string[] | null = null;
  /**
   * Body bytes of the current loop turn, not yet framed. The head, too, waits for the turn's end: a
   * response that ends in the turn its head came leaves as one RESPONSE frame with its body and end=true
   * whatever its framing; otherwise the head leaves at the turn's end with the bytes so far.
   */
  private held: Buffer[] = [];
  private heldBytes = 0;
  /**
   * Where the bytes of a Content-Length body land straight from the local socket's reads
   * (`onBodyView`): the frame they will leave in, its prefix already written in front of them (RESPONSE
   * while the head has not gone, else DATA), so each byte is copied once on its way to the edge. Its
   * bytes count in `heldBytes` and come after `held` (which is empty for such a body).
   */
  private landing: Buffer | null = null;
  /** Where the landing's frame starts, where its body bytes start, how many it holds, and how many it has room for. */
  private landingStart = 0;
  private landingAt = 0;
  private landingFill = 0;
  private landingRoom = 0;
  /** The landing is a DATA frame (it was opened after the head went). */
  private landingData = false;
  /** Body bytes of a Content-Length response still to come. */
  private contentLeft = 0;
  private turnEndPending = false;
  private headSent = false;
  /** Framed in turn, waiting for credit (the local socket is not read meanwhile). */
  private queue: Buffer[] = [];
  private queued = 0;
  private endPending = false;
  private sentEnd = false;
  private localPaused = false;
  private finished = false;
  /** A held webhook's id (cluster mode), remembered once the local server answers it 2xx; `repeat`: it was answered before. */
  private eventId: string | null = null;
  private repeat = false;
  /**
   * The tunnel dropped while the local server held this held webhook, whole and unanswered: its answer is
   * still awaited (and then dropped), so that a 2xx is remembered and the event's next delivery, by
   * another edge, is answered from memory instead of reaching the local server twice.
   */
  private awaitingEventAnswer = false;

  // After a 101: the local socket, the edge's FIN, and edge bytes not yet on the socket.
  private socket: Duplex | null = null;
  private edgeEnded = false;
  private unwritten = 0;

  // Recording, for the inspector.
  private readonly requestRecorder: CaptureBuffer | null;
  /** The path the local server gets (the route's prefix stripped when it says so). */
  private readonly localPath: string;
  private readonly responseRecorder: CaptureBuffer | null;
  private upgradeLog: Exchange | null = null;
  private observer: WsObserver | null = null;

  constructor(
    readonly id: number,
    readonly host: StreamHost,
    private readonly request: OpenRequest,
  ) {
    const resolved = host.routes.resolve(request.path);
    this.target = resolved.target;
    this.localPath = resolved.path;
    this.port = this.target.port;
    const settings = host.settings;
    this.requestWindow = new ReceiveWindow(settings.streamWindow);
    this.sendCredit = new SendCredit(settings.streamWindow);
    const recording = request.upgrade ? 0 : host.recordLimit;
    this.requestRecorder = recording > 0 ? new CaptureBuffer(recording) : null;
    this.responseRecorder = recording > 0 ? new CaptureBuffer(recording) : null;
  }

  /** Starts the local request: `body` is the inline first chunk (a view of the frame, owned), `end` says it is all. */
  start(body: Uint8Array | null, end: boolean): void {
    const request = this.request;
    let size = body === null ? 0 : body.byteLength;
    if (request.upgrade && size > 0) {
      // An upgrade's OPEN ends its request (the edge declines an upgrade with a body): nothing to send.
      this.host.consumedConnection(size);
      size = 0;
    }
    if (size > 0) {
      if (!this.requestWindow.receive(size)) {
        this.host.protocolError(`the edge exceeded the window of stream ${this.id}`);
        return;
      }
      this.requestBytes += size;
      this.requestRecorder?.addOwned(body!);
    }
    const whole = end || request.upgrade;
    if (whole) this.requestEnded = true;
    const delivered = this.host.deliveredEvents;
    if (delivered != null && !request.upgrade) {
      const eventId = eventIdOf(request.headers);
      if (eventId !== null && delivered.has(eventId)) {
        // A held webhook the local server already took, sent again by another edge: answered here.
        this.repeat = true;
        if (size > 0) this.writeBody(viewOf(body!));
        if (whole) this.answerRepeat();
        return;
      }
      this.eventId = eventId;
    }
    const fields = localRequestHeaders(request.headers, this.target, this.host.hostHeader);
    const inline = whole && size > 0 ? viewOf(body!) : null;
    try {
      this.exchange = this.host.pool(this.target).request({ method: request.method, target: this.localPath, fields, upgrade: request.upgrade }, inline, whole, this);
    } catch (error) {
      this.onError(error instanceof LocalHopError ? error : failed(this.target, (error as Error).message));
      return;
    }
    // A whole body is the exchange's now (kept for a retry): its share of the connection window goes back.
    if (inline !== null) this.host.consumedConnection(size);
    else if (size > 0) this.writeBody(viewOf(body!));
  }

  // ---- request body -----------------------------------------------------------------------------------

  /** A DATA frame from the edge: request body, or after a 101 raw bytes (a view of the frame, which we own). */
  onRequestData(chunk: Uint8Array | null, end: boolean): void {
    if (this.closed) return;
    const size = chunk === null ? 0 : chunk.byteLength;
    if (this.socket !== null || this.request.upgrade) {
      this.rawFromEdge(chunk, end);
      return;
    }
    if (this.requestEnded) {
      this.host.protocolError(`DATA after the end of the request body on stream ${this.id}`);
      return;
    }
    if (size > 0) {
      if (!this.requestWindow.receive(size)) {
        this.host.protocolError(`the edge exceeded the window of stream ${this.id}`);
        return;
      }
      this.requestBytes += size;
      this.requestRecorder?.addOwned(chunk!);
      this.writeBody(viewOf(chunk!));
    }
    if (end) this.endRequest(null);
  }

  /** TRAILERS from the edge: they end the request body and follow it to the local server. */
  onRequestTrailers(fields: string[]): void {
    if (this.closed) return;
    if (this.requestEnded || this.request.upgrade) {
      this.host.protocolError(`TRAILERS after the end of the request body on stream ${this.id}`);
      return;
    }
    this.endRequest(fields);
  }

  private writeBody(chunk: Buffer): void {
    this.uncredited += chunk.byteLength;
    if (this.exchange !== null ? this.exchange.write(chunk) : this.repeat) this.creditTaken();
  }

  private endRequest(trailers: string[] | null): void {
    this.requestEnded = true;
    if (this.repeat) this.answerRepeat();
    else this.exchange?.end(trailers);
  }

  /** The answer to a repeated delivery (src/client/delivered-events.ts), once its body has arrived. */
  private answerRepeat(): void {
    const head = new MessageHead();
    head.status = 200;
    head.reason = 'OK';
    head.fields = ['Burrow-Duplicate-Delivery', '1', 'Content-Length', '0'];
    this.onHead(head, ResponseFraming.LENGTH, 0);
    this.onEnd();
  }

  /** The local socket took the body bytes written so far: their credit goes back to the edge. */
  onRequestDrain(): void {
    this.creditTaken();
  }

  private creditTaken(): void {
    const bytes = this.uncredited;
    if (bytes === 0) return;
    this.uncredited = 0;
    if (!this.closed) {
      const grant = this.requestWindow.consume(bytes);
      if (grant > 0) this.host.send(encode([FrameType.WINDOW, this.id, grant]));
    }
    this.host.consumedConnection(bytes);
  }

  // ---- the local hop's handler ------------------------------------------------------------------------

  onInterim(head: MessageHead): void {
    if (this.closed) return;
    this.host.send(encode([FrameType.INFO, this.id, head.status, head.reason, dropHopByHop(head.fields)]));
  }

  onHead(head: MessageHead, framing: ResponseFramingValue, contentLength: number): void {
    if (this.closed) {
      if (!this.awaitingEventAnswer) return;
      this.awaitingEventAnswer = false;
      if (head.status >= 200 && head.status < 300) this.host.deliveredEvents?.add(this.eventId!);
      this.exchange?.abort();
      return;
    }
    this.status = head.status;
    this.reason = head.reason;
    this.contentLeft = framing === ResponseFraming.LENGTH ? contentLength : 0;
    // Content-Length stays: the edge checks the body against it and frames the public answer by it.
    this.responseHeaders = dropHopByHop(head.fields);
    if (this.request.upgrade) this.recordUpgrade(head.status, this.responseHeaders, null);
    this.holdUntilTurnEnd();
  }

  onBody(chunk: Buffer): void {
    if (this.closed || chunk.byteLength === 0) return;
    this.responseBytes += chunk.byteLength;
    this.held.push(chunk);
    this.heldBytes += chunk.byteLength;
    // A turn that brings more than a frame's worth does not wait for its end: the frames go now, and
    // the socket is paused when credit runs out, so a fast local server never piles up bytes here. A
    // frame's worth exactly waits for the turn's end, which may bring the response's end too: one
    // RESPONSE frame, not the body and then an empty DATA to end it.
    if (this.heldBytes > this.host.settings.maxFrameBody) this.release();
    else this.holdUntilTurnEnd();
  }

  /**
   * Bytes of a Content-Length body as a view of the local socket's read: copied into the landing (the
   * frame they leave in), a new one each frame's worth. A full landing goes at once, as held bytes past
   * a frame's worth do in onBody.
   */
  onBodyView(view: Buffer): void {
    if (this.closed || view.byteLength === 0) return;
    this.responseBytes += view.byteLength;
    let at = 0;
    while (at < view.byteLength) {
      if (this.landing !== null && this.landingFill === this.landingRoom) {
        this.release();
        if (this.closed) return;
      }
      if (this.landing === null) this.openLanding(Math.max(this.contentLeft, view.byteLength - at));
      const size = Math.min(view.byteLength - at, this.landingRoom - this.landingFill);
      view.copy(this.landing!, this.landingAt + this.landingFill, at, at + size);
      this.landingFill += size;
      this.heldBytes += size;
      this.contentLeft -= size;
      at += size;
    }
    this.holdUntilTurnEnd();
  }

  /** A landing for up to a frame's worth of the `left` body bytes still to come. */
  private openLanding(left: number): void {
    const room = Math.min(left, this.host.settings.maxFrameBody);
    this.landingData = this.headSent;
    // The frame up to its body (a bin 32 header), the body's room, and `end` after it (both frames end so).
    const empty = this.landingData
      ? encode([FrameType.DATA, this.id, EMPTY_BODY, false])
      : encode([FrameType.RESPONSE, this.id, this.status, this.reason, this.responseHeaders, EMPTY_BODY, false]);
    const prefix = empty.byteLength - 3;
    // At least a DATA frame's room in front, so bytes that wait for credit can leave as DATA where they lie.
    const at = Math.max(prefix + 5, DATA_PREFIX_ROOM);
    const landing = Buffer.allocUnsafe(at + room + 1);
    landing.set(empty.subarray(0, prefix), at - 5 - prefix);
    landing[at - 5] = 0xc6;
    this.landing = landing;
    this.landingStart = at - 5 - prefix;
    this.landingAt = at;
    this.landingFill = 0;
    this.landingRoom = room;
  }

  /** The landing as the frame it was opened for, with what it holds and `end`; the bytes are recorded. */
  private sendLanding(end: boolean): void {
    const landing = this.landing!;
    const at = this.landingAt;
    const size = this.landingFill;
    landing.writeUInt32BE(size, at - 4);
    landing[at + size] = end ? 0xc3 : 0xc2;
    this.responseRecorder?.addOwned(landing.subarray(at, at + size));
    this.heldBytes -= size;
    this.landing = null;
    this.host.send(landing.subarray(this.landingStart, at + size + 1));
  }

  /** The landing's bytes moved to `held` as a view (to be framed another way: credit was short). */
  private landingToHeld(): void {
    const landing = this.landing;
    if (landing === null) return;
    this.landing = null;
    if (this.landingFill === 0) return;
    const view = landing.subarray(this.landingAt, this.landingAt + this.landingFill);
    // The landing is this stream's alone, with a DATA frame's room in front (openLanding).
    markDataRoom(view, landing);
    this.held.push(view);
  }

  /** DATA straight from the landing when it holds all that is held and the credit takes it whole. */
  private sendLandingData(end: boolean): boolean {
    if (this.landing === null || !this.landingData || this.held.length > 0 || this.queue.length > 0) return false;
    if (this.landingFill === 0 && !end) return false;
    if (!takeWholeCredit(this.landingFill, this.host.settings.maxFrameBody, this.sendCredit, this.host.connectionSend)) return false;
    this.sendLanding(end);
    return true;
  }

  onTrailers(fields: string[]): void {
    const kept = dropHopByHop(fields);
    if (kept.length > 0) this.trailers = kept;
  }

  onEnd(): void {
    if (this.closed) return;
    if (!this.headSent) {
      // Head, body and end in one turn: one frame, given the credit.
      const size = this.heldBytes;
      if (size === 0 || takeWholeCredit(size, this.host.settings.maxFrameBody, this.sendCredit, this.host.connectionSend)) {
        const trailers = this.trailers;
        this.headSent = true;
        this.responseWithHeld(trailers === null);
        if (trailers !== null) this.host.send(encode([FrameType.TRAILERS, this.id, trailers]));
        this.complete(null);
        return;
      }
      this.sendHead();
      this.enqueue(this.takeHeld()!);
    } else {
      if (this.trailers === null && this.sendLandingData(true)) {
        this.sentAll();
        return;
      }
      const body = this.takeHeld();
      if (body !== null) this.enqueue(body);
    }
    this.endPending = true;
    this.flush();
  }

  onUpgrade(head: MessageHead, socket: Duplex, leftover: Buffer): void {
    if (this.closed) {
      socket.destroy();
      return;
    }
    this.exchange = null;
    this.socket = socket;
    this.status = 101;
    this.reason = head.reason;
    this.responseHeaders = withoutFraming(head.fields);
    this.headSent = true;
    this.host.send(encode([FrameType.RESPONSE, this.id, 101, head.reason, this.responseHeaders, null, false]));
    this.recordUpgrade(101, this.responseHeaders, null);
    // Each direction ends on its own (a FIN each way), as on the public connection.
    (socket as { allowHalfOpen: boolean }).allowHalfOpen = true;
    socket.on('data', this.onRawData);
    socket.on('end', this.onRawEnd);
    socket.on('error', this.onRawError);
    socket.on('close', this.onRawClose);
    if (leftover.byteLength > 0) this.onRawData(leftover);
    if (!this.localPaused) socket.resume();
  }

  onError(error: LocalHopError): void {
    if (this.closed) return;
    this.host.send(encode([FrameType.RESET, this.id, error.resetCode, error.message]));
    if (this.request.upgrade) this.recordUpgrade(0, [], error.message);
    this.complete(error.message);
  }

  // ---- after a 101: raw bytes ---------------------------------------------------------------------------

  private readonly onRawData = (chunk: Buffer): void => {
    if (this.closed || chunk.byteLength === 0) return;
    this.responseBytes += chunk.byteLength;
    this.observer?.fromServer.push(chunk);
    this.enqueue(chunk);
    this.flush();
  };

  private readonly onRawEnd = (): void => {
    if (this.closed) return;
    this.endPending = true;
    this.flush();
  };

  private readonly onRawError = (error: Error): void => {
    this.rawFailed(`the connection failed: ${error.message}`);
  };

  private readonly onRawClose = (): void => {
    // A close after both FINs is the stream's end (complete() ran); anything else cut it short.
    this.rawFailed('closed the connection');
  };

  private rawFailed(what: string): void {
    if (this.closed) return;
    this.onError(failed(this.target, what));
    this.socket?.destroy();
  }

  private rawFromEdge(chunk: Uint8Array | null, end: boolean): void {
    const size = chunk === null ? 0 : chunk.byteLength;
    if (size > 0 && !this.requestWindow.receive(size)) {
      this.host.protocolError(`the edge exceeded the window of stream ${this.id}`);
      return;
    }
    const socket = this.socket;
    if (socket === null || this.edgeEnded) {
      // Nothing may come before the 101 (the upgrade's OPEN ended its request) or after the FIN: dropped.
      if (size > 0) this.host.consumedConnection(size);
      return;
    }
    if (size > 0) {
      const bytes = viewOf(chunk!);
      this.requestBytes += size;
      this.observer?.fromClient.push(bytes);
      this.unwritten += size;
      socket.write(bytes, () => this.rawWritten(size));
    }
    if (end) {
      this.edgeEnded = true;
      if (this.unwritten === 0) this.rawEdgeFinished();
    }
  }

  /** The local socket took `bytes` of the edge's: their credit goes back. */
  private rawWritten(bytes: number): void {
    this.unwritten -= bytes;
    if (!this.closed) {
      const grant = this.requestWindow.consume(bytes);
      if (grant > 0) this.host.send(encode([FrameType.WINDOW, this.id, grant]));
    }
    this.host.consumedConnection(bytes);
    if (this.edgeEnded && this.unwritten === 0 && !this.closed) this.rawEdgeFinished();
  }

  /** The public client's FIN, after its last bytes: the local server gets it; both FINs end the stream. */
  private rawEdgeFinished(): void {
    this.socket?.end();
    if (this.sentEnd) this.complete(null);
  }

  // ---- response bytes within credit -------------------------------------------------------------------

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
    if (!this.headSent) {
      const size = this.heldBytes;
      if (size > 0 && this.queue.length === 0 && takeWholeCredit(size, this.host.settings.maxFrameBody, this.sendCredit, this.host.connectionSend)) {
        this.headSent = true;
        this.responseWithHeld(false);
        return;
      }
      this.sendHead();
    } else if (this.sendLandingData(false)) {
      return;
    }
    const framed = this.headSent && this.sendHeldAsData();
    const body = this.takeHeld();
    if (body === null && !framed) return;
    if (body !== null) this.enqueue(body);
    this.flush();
  }

  /**
   * Held chunks (a chunked body's pieces, say) as DATA frames within credit while nothing is queued,
   * each frame's bytes copied once from the chunks into it, instead of joined first and copied again by
   * `encode`. What the credit does not cover stays held. True when a frame went.
   */
  private sendHeldAsData(): boolean {
    if (this.landing !== null || this.held.length < 2 || this.queue.length > 0) return false;
    const maxFrame = this.host.settings.maxFrameBody;
    let framed = false;
    while (this.heldBytes > 0) {
      const size = takeFrameCredit(this.heldBytes, maxFrame, this.sendCredit, this.host.connectionSend);
      if (size === 0) return framed;
      framed = true;
      this.host.send(this.heldInto(encode([FrameType.DATA, this.id, EMPTY_BODY, false]), size));
    }
    return framed;
  }

  /**
   * The held bytes as one buffer (copied only when they came in several chunks), or null. The inspector
   * records that buffer, so a body that came in several chunks in one turn is joined once, not once for
   * the frame and again for the recording.
   */
  private takeHeld(): Buffer | null {
    this.landingToHeld();
    const held = this.held;
    const size = this.heldBytes;
    if (size === 0) return null;
    this.held = [];
    this.heldBytes = 0;
    const whole = held.length === 1 ? held[0]! : Buffer.concat(held, size);
    this.responseRecorder?.addOwned(whole);
    return whole;
  }

  /** Sends RESPONSE with the held bytes inline (credit taken by the caller), `end` as given. */
  private responseWithHeld(end: boolean): void {
    if (this.landing !== null && !this.landingData && this.held.length === 0) {
      this.sendLanding(end);
      return;
    }
    this.landingToHeld();
    this.host.send(this.heldResponse(end));
  }

  /**
   * RESPONSE with the held bytes inline. Bytes held in several chunks (a turn with several socket reads)
   * are copied once, straight into the frame, instead of joined first and copied again by `encode`; the
   * inspector records the frame's view of them.
   */
  private heldResponse(end: boolean): Buffer {
    const held = this.held;
    if (held.length <= 1) {
      const body = this.takeHeld();
      return encode([FrameType.RESPONSE, this.id, this.status, this.reason, this.responseHeaders, body, end]);
    }
    return this.heldInto(encode([FrameType.RESPONSE, this.id, this.status, this.reason, this.responseHeaders, EMPTY_BODY, end]), this.heldBytes);
  }

  /**
   * `empty`, a frame ending with an empty binary field and `end` (RESPONSE, DATA), laid out again with
   * the first `size` held bytes in that field, copied once from the chunks; they leave `held`, and the
   * inspector records the frame's view of them.
   */
  private heldInto(empty: Buffer, size: number): Buffer {
    const frame = withBinaryRoom(empty, 1, size);
    const start = frame.byteLength - 1 - size;
    let at = start;
    while (at < start + size) {
      const chunk = this.held[0]!;
      const take = Math.min(chunk.byteLength, start + size - at);
      frame.set(take === chunk.byteLength ? chunk : chunk.subarray(0, take), at);
      at += take;
      if (take === chunk.byteLength) this.held.shift();
      else this.held[0] = chunk.subarray(take);
    }
    this.heldBytes -= size;
    this.responseRecorder?.addOwned(frame.subarray(start, at));
    return frame;
  }

  /** RESPONSE without body bytes: the body follows as DATA. */
  private sendHead(): void {
    this.headSent = true;
    this.host.send(encode([FrameType.RESPONSE, this.id, this.status, this.reason, this.responseHeaders, null, false]));
  }

  private enqueue(chunk: Buffer): void {
    this.queue.push(chunk);
    this.queued += chunk.byteLength;
  }

  /** Bytes from the local server waiting for credit (about one socket read at most: it is paused meanwhile). */
  get queuedBytes(): number {
    return this.queued;
  }

  /** Sends queued response bytes within credit; the local socket is not read while bytes wait. */
  flush(): void {
    if (this.closed) return;
    const maxFrame = this.host.settings.maxFrameBody;
    const connection = this.host.connectionSend;
    while (this.queue.length > 0) {
      const chunk = this.queue[0]!;
      const size = takeFrameCredit(chunk.byteLength, maxFrame, this.sendCredit, connection);
      if (size === 0) {
        if (connection.available === 0) this.host.blocked.add(this);
        this.pauseLocal();
        return;
      }
      const whole = size === chunk.byteLength;
      const last = this.endPending && this.queue.length === 1 && whole;
      const trailers = this.trailers;
      // A whole landing that waited is framed where it lies.
      this.host.send(dataFrame(this.id, whole ? chunk : chunk.subarray(0, size), last && trailers === null));
      this.queued -= size;
      if (size === chunk.byteLength) this.queue.shift();
      else this.queue[0] = chunk.subarray(size);
      if (last) {
        if (trailers !== null) this.host.send(encode([FrameType.TRAILERS, this.id, trailers]));
        this.sentAll();
        return;
      }
    }
    if (this.endPending) {
      const trailers = this.trailers;
      this.host.send(trailers === null ? encode([FrameType.DATA, this.id, null, true]) : encode([FrameType.TRAILERS, this.id, trailers]));
      this.sentAll();
      return;
    }
    this.resumeLocal();
  }

  /** This side's last frame went: an answer is over; a switched stream waits for the edge's FIN too. */
  private sentAll(): void {
    this.sentEnd = true;
    if (this.socket === null) this.complete(null);
    else if (this.edgeEnded && this.unwritten === 0) this.complete(null);
  }

  private pauseLocal(): void {
    if (this.localPaused) return;
    this.localPaused = true;
    if (this.socket !== null) this.socket.pause();
    else this.exchange?.pause();
  }

  private resumeLocal(): void {
    if (!this.localPaused) return;
    this.localPaused = false;
    if (this.socket !== null) this.socket.resume();
    else this.exchange?.resume();
  }

  onWindow(credit: number): void {
    this.sendCredit.grant(credit);
    this.flush();
  }

  /** RESET from the edge: the public client left or the edge gave up (its code and message say which). */
  onReset(code?: number, message?: string): void {
    if (this.closed) return;
    this.complete(edgeResetText(code, message));
    this.exchange?.abort();
    this.socket?.destroy();
  }

  /** The tunnel dropped. */
  tunnelClosed(): void {
    if (this.closed) return;
    if (this.eventId !== null && this.requestEnded && this.status === 0 && this.exchange !== null && this.host.deliveredEvents != null) {
      // The local server has the whole event and has not answered: see `awaitingEventAnswer`. The local
      // hop's response timeout bounds the wait.
      this.awaitingEventAnswer = true;
      this.complete(edgeResetText(undefined, undefined));
      return;
    }
    this.onReset();
  }

  private complete(error: string | null): void {
    if (this.finished) return;
    this.finished = true;
    // A 2xx head means the local server took the event, whether or not its answer got back to the edge.
    if (this.eventId !== null && this.status >= 200 && this.status < 300) this.host.deliveredEvents?.add(this.eventId);
    this.closed = true;
    this.host.endStream(this);
    // Body bytes that reached this stream and never reached the local socket give their share of the
    // connection window back: an abandoned upload must not keep a window of it.
    const unread = this.uncredited;
    this.uncredited = 0;
    if (unread > 0) this.host.consumedConnection(unread);
    // An answer that ended before the request body did: the rest of the body has nowhere to go, and
    // the connection, mid-request, cannot be used again.
    if ((!this.requestEnded || error !== null) && !this.awaitingEventAnswer) this.exchange?.abort();
    if (error !== null) this.socket?.destroy();
    this.observer?.close();
    this.host.count(this.requestBytes, this.responseBytes, error !== null || this.status >= 500);
    const upgradeLog = this.upgradeLog;
    if (upgradeLog !== null) {
      const websocket = upgradeLog.websocket!;
      if (websocket.closedAt === null) {
        websocket.closedAt = Date.now();
        this.host.recordWebSocket?.(upgradeLog);
      }
      return;
    }
    if (!this.host.observed || this.request.upgrade) return;
    const requestRecorder = this.requestRecorder;
    const responseRecorder = this.responseRecorder;
    // Bytes of an exchange that ended before they were framed (an error, a reset) are recorded too.
    this.landingToHeld();
    if (responseRecorder !== null) for (const chunk of this.held) responseRecorder.addOwned(chunk);
    const exchange: Exchange = {
      id: this.request.requestId,
      method: this.request.method,
      path: this.request.path,
      port: this.port,
      requestHeaders: this.request.headers,
      requestBody: requestRecorder === null ? null : requestRecorder.keptBody(),
      requestBodySize: this.requestBytes,
      requestTruncated: requestRecorder === null ? false : requestRecorder.truncated,
      status: this.status,
      responseHeaders: this.responseHeaders,
      responseBody: responseRecorder === null ? null : responseRecorder.keptBody(),
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

  /** The inspector's view of an upgrade: the handshake's answer, then (for a WebSocket) its messages and close. */
  private recordUpgrade(status: number, responseHeaders: string[], error: string | null): void {
    if (this.upgradeLog !== null || this.host.observesWebSockets !== true || this.host.recordWebSocket === undefined) return;
    const request = this.request;
    const log = webSocketExchange(request.requestId, request.method, request.path, this.port, request.headers, request.clientAddress, status, responseHeaders, error);
    this.upgradeLog = log;
    this.host.recordWebSocket(log);
    if (status !== 101 || !isWebSocket(request.headers)) return;
    const websocket = log.websocket!;
    // Without an inspector (burrow http's log lines) messages are only counted: nothing is kept or inflated.
    const keep = this.host.recordLimit > 0;
    this.observer = new WsObserver(keep ? responseHeaders : [], keep ? WS_MESSAGE_BYTES_KEPT : 0, (direction: 'in' | 'out', message: ObservedWsMessage) => {
      if (message.opcode === WsOpcode.CLOSE) {
        websocket.closeCode ??= message.closeCode;
        if (websocket.closeReason === '') websocket.closeReason = message.closeReason;
        return;
      }
      if (message.opcode !== WsOpcode.TEXT && message.opcode !== WsOpcode.BINARY) return;
      logWebSocketMessage(websocket, direction, message.data, message.opcode === WsOpcode.BINARY, message.size, message.note, keep);
    });
  }
}

/** A Buffer over the same bytes (frames are decoded to Uint8Array views the stream owns). */
function viewOf(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A 101's fields without body framing (a 101 has no body; the fields are otherwise the server's). */
function withoutFraming(fields: string[]): string[] {
  let framed = false;
  for (let i = 0; i < fields.length; i += 2) if (FRAMING.includes(fields[i]!.toLowerCase())) framed = true;
  if (!framed) return fields;
  const result: string[] = [];
  for (let i = 0; i < fields.length; i += 2) if (!FRAMING.includes(fields[i]!.toLowerCase())) result.push(fields[i]!, fields[i + 1]!);
  return result;
}

function isWebSocket(headers: readonly string[]): boolean {
  for (let i = 0; i < headers.length; i += 2) if (isName(headers[i]!, 'upgrade') && headers[i + 1]!.toLowerCase() === 'websocket') return true;
  return false;
}
