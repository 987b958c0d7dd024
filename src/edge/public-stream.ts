/**
 * The public side of an HTTP exchange through a tunnel: a request read from the edge's public listener
 * (src/http1/server.ts) and the answer written back to it.
 *
 * Response frames arrive inside the tunnel WebSocket's message callback; the stream queues what it
 * received (views of the session's copy of each message, no further copy) and the session's end-of-turn
 * flush writes it corked, one syscall per response. Interim answers (INFO) go out the same way, before
 * the final head. Credit for response bytes goes back to the client only once the public socket took
 * them, so a slow public reader slows the local server instead of filling the edge's memory.
 *
 * The request body goes out as one OPEN when it is small and whole (the fast path), else as DATA within
 * credit; the public socket is not read while the stream has no credit. `Expect: 100-continue` skips the
 * fast path: the body comes only once the local server's 100 went out.
 *
 * After a 101 to an upgrade the connection's socket is this stream's: raw bytes both ways as DATA, each
 * direction's FIN as `end`, the socket paused while credit is short (docs/protocol.md section 13).
 */
import type { Socket } from 'node:net';
import type { ErrorCode } from '../errors.js';
import { WHOLE_ANSWER_LIMIT, type ExchangeSink, type ServerExchange } from '../http1/server.js';
import { dropHopByHop } from '../protocol/headers.js';
import { EdgeHttpStream, type RequestHead } from './http-stream.js';
import { writePublicError } from './responses.js';
import type { StreamHost } from './stream-host.js';

/**
 * Where the public response is. Only IDLE and STREAMING write to the exchange; DONE and ABORTED never do
 * again, whatever arrives later. RAW: the socket switched protocols and is this stream's.
 */
export const enum PublicState {
  /** Nothing written to the public client yet (interim answers aside): an error can still be a clean 502. */
  IDLE,
  /** The head is written; body bytes go out as they come. */
  STREAMING,
  /** The socket is full: onWritable carries on. */
  DRAINING,
  /** After a 101: raw bytes on the socket. */
  RAW,
  /** Ended, failed or cut. */
  DONE,
  /** The public client went away: the exchange is gone. */
  ABORTED,
}

/** How the request body leaves: gathered into one OPEN of this many bytes, or streamed (-1). */
export interface RequestIntake {
  gather: number;
  /** The most body bytes taken before 413 (streamed bodies; a gathered one is within it already). */
  limit: number;
}

const EMPTY = new Uint8Array(0);
/** An upgraded public connection idle both ways this long is cut (docs/security.md, "Timeouts"). */
export const RAW_IDLE_TIMEOUT_MS = 10 * 60 * 1000;

export class PublicHttpStream extends EdgeHttpStream implements ExchangeSink {
  /** Request body bytes are framed (copied once, into the frame) or gathered into a buffer of our own. */
  readonly takesViews = true;
  publicState = PublicState.IDLE;
  private contentLength = -1;
  /** Response body bytes received from the tunnel so far. */
  private bodyBytes = 0;
  /** Body bytes received and not yet handed to the writer, in order. */
  private chunks: Uint8Array[] = [];
  /** The end of a Content-Length body, held back until the capture is committed. */
  private tail: Uint8Array | null = null;
  /** The response may end once `chunks` is written (the capture is committed). */
  private endRequested = false;
  private failure: { code: ErrorCode; message: string } | null = null;
  /** A refusal waits for the rest of the request body to be read and dropped (a 413). */
  private refusalWaits = false;
  /** Interim answers waiting for the turn's end. */
  private interims: [number, string, string[]][] | null = null;
  /** Waiting in the session's write queue. */
  private writeScheduled = false;
  /** Bytes the writer (or, after a 101, the socket) took while full: their credit waits for it to drain. */
  private unacknowledged = 0;

  // The request body on its way in.
  private gather: number;
  /** The OPEN a body that comes in pieces is gathered into (its one copy), and where in it the body starts. */
  private gathered: Buffer | null = null;
  private gatheredAt = 0;
  private gatheredBytes = 0;
  private received = 0;
  private readonly limit: number;

  // After a 101.
  private socket: Socket | null = null;
  /** Raw bytes (and the FIN) from the client that came before the socket was handed over. */
  private early: Uint8Array[] | null = null;
  private earlyEnd = false;
  private rawWriteEnded = false;
  /** Public bytes passed through after a 101, each way (the access log's counts). */
  bytesIn = 0;
  bytesOut = 0;

  constructor(
    id: number,
    session: StreamHost,
    head: RequestHead,
    private readonly exchange: ServerExchange,
    intake: RequestIntake,
  ) {
    super(id, session, head, null);
    this.gather = intake.gather;
    this.limit = intake.limit;
  }

  /** The exchange may no longer be written to. */
  private get over(): boolean {
    return this.publicState >= PublicState.DONE;
  }

  // ---- the request body (ExchangeSink) --------------------------------------------------------------

  onRequestBody(chunk: Buffer | null, last: boolean): void {
    if (this.gather >= 0) {
      if (last && this.gathered === null) {
        // The whole body in one piece (a view the frame copies): no copy of our own.
        this.gather = -1;
        this.sendOpen(chunk !== null && chunk.byteLength > 0 ? chunk : null, true);
        return;
      }
      if (chunk !== null && chunk.byteLength > 0) {
        if (this.gathered === null) {
          const room = this.openWithRoom(this.gather);
          this.gathered = room.frame;
          this.gatheredAt = room.start;
        }
        // The head's Content-Length: what the parser hands over never exceeds it.
        this.gatheredBytes += chunk.copy(this.gathered, this.gatheredAt + this.gatheredBytes, 0, Math.min(chunk.byteLength, this.gather - this.gatheredBytes));
      }
      if (!last) return;
      const announced = this.gather;
      this.gather = -1;
      const frame = this.gathered;
      this.gathered = null;
      if (frame === null) {
        this.sendOpen(null, true);
        return;
      }
      const body = frame.subarray(this.gatheredAt, this.gatheredAt + this.gatheredBytes);
      // A body shorter than announced (never from the parser) cannot use the frame laid out for it.
      this.sendOpen(body, true, this.gatheredBytes === announced ? frame : null);
      return;
    }
    // A request without a body went as one OPEN that ended it: its end here is already known.
    if (this.closed || this.upgraded || this.requestFinished) return;
    if (chunk !== null) {
      this.received += chunk.byteLength;
      if (this.received > this.limit) {
        // The stream is cancelled now; the 413 waits until the rest of the body was read and dropped
        // (bounded), then closes the connection.
        this.refusalWaits = true;
        this.cancel('PAYLOAD_TOO_LARGE', `The request body is larger than ${this.limit} bytes.`);
        this.exchange.discardBody(() => {
          this.refusalWaits = false;
          if (this.failure !== null) this.scheduleWrite();
        });
        return;
      }
    }
    this.sendBody(chunk ?? EMPTY, last);
  }

  onRequestTrailers(fields: string[]): void {
    if (!this.closed) this.setRequestTrailers(dropHopByHop(fields));
  }

  /** The connection ended before the response did (the client left, a timeout, a broken request). */
  onAborted(): void {
    const wasOver = this.over;
    this.publicState = PublicState.ABORTED;
    this.chunks = [];
    this.tail = null;
    this.interims = null;
    if (!wasOver) this.abandoned();
    this.releaseConnectionCredit();
  }

  /** The writer took what waited: credit goes back, and what waits next is written. */
  onWritable(): void {
    if (this.over) return;
    if (this.publicState === PublicState.DRAINING) this.publicState = PublicState.STREAMING;
    const bytes = this.unacknowledged;
    this.unacknowledged = 0;
    this.consumed(bytes);
    this.flushWrites();
  }

  protected pauseRequest(): void {
    this.requestPaused = true;
    if (this.socket !== null) this.socket.pause();
    else if (this.publicState !== PublicState.ABORTED) this.exchange.pauseBody();
  }

  protected resumeRequest(): void {
    this.requestPaused = false;
    if (this.socket !== null) this.socket.resume();
    else if (this.publicState !== PublicState.ABORTED) this.exchange.resumeBody();
  }

  // ---- the response -------------------------------------------------------------------------------

  protected interim(status: number, reason: string, headers: string[]): void {
    if (this.over) return;
    (this.interims ??= []).push([status, reason, headers]);
    this.scheduleWrite();
  }

  protected startResponse(): void {
    this.contentLength = this.response!.contentLength;
    // Nothing held back (issue 13): the head goes out at the end of this turn even if no body byte
    // came with it; a body that arrived in the same turn still leaves with it, in one write.
    this.scheduleWrite();
  }

  /** A middle chunk of the body (owned: a view of the session's copy of its message). */
  protected writeBody(chunk: Uint8Array): void {
    if (this.over) {
      this.releaseConnectionCredit();
      return;
    }
    this.bodyBytes += chunk.byteLength;
    if (this.contentLength >= 0 && this.bodyBytes >= this.contentLength) {
      // This chunk completes the declared body: hold its end back until the capture is committed.
      const keep = Math.max(0, chunk.byteLength - (this.bodyBytes - this.contentLength) - 1);
      if (keep > 0) this.chunks.push(chunk.subarray(0, keep));
      const rest = chunk.subarray(keep);
      this.tail = this.tail === null ? rest : Buffer.concat([this.tail, rest]);
    } else {
      this.chunks.push(chunk);
    }
    this.scheduleWrite();
  }

  /** The capture is committed (or off): the last bytes go out and the response ends. */
  protected endResponse(lastChunk: Uint8Array | null): void {
    if (this.over) {
      this.releaseConnectionCredit();
      return;
    }
    if (this.tail !== null) {
      this.chunks.push(this.tail);
      this.tail = null;
    }
    if (lastChunk !== null && lastChunk.byteLength > 0) {
      this.bodyBytes += lastChunk.byteLength;
      this.chunks.push(lastChunk);
    }
    this.endRequested = true;
    this.scheduleWrite();
  }

  protected failResponse(code: ErrorCode, message: string): void {
    this.chunks = [];
    this.tail = null;
    this.releaseConnectionCredit();
    if (this.over) return;
    this.failure = { code, message };
    this.scheduleWrite();
  }

  private scheduleWrite(): void {
    if (this.writeScheduled) return;
    this.writeScheduled = true;
    this.session.deferWrite(this);
  }

  /** Called by the session's flush, outside any socket callback: writes what waits, corked. */
  flushWrites(): void {
    this.writeScheduled = false;
    if (this.over) return;
    const whole = this.wholeLength();
    if (whole > 0) {
      // The usual small answer: head and body in one write, which needs no cork.
      this.writeWhole(whole);
      return;
    }
    const exchange = this.exchange;
    exchange.cork();
    this.writeNow();
    exchange.uncork();
  }

  /** The body's length when the whole answer is here and nothing else waits to go first, else -1. */
  private wholeLength(): number {
    if (this.publicState !== PublicState.IDLE || !this.endRequested || this.failure !== null || this.interims !== null) return -1;
    if (this.response === null || this.upgraded || this.noBody()) return -1;
    const bytes = bytesOf(this.chunks);
    if (bytes > WHOLE_ANSWER_LIMIT || (this.contentLength >= 0 ? bytes !== this.contentLength : this.responseTrailers !== null)) return -1;
    return bytes;
  }

  private writeWhole(length: number): void {
    this.publicState = PublicState.STREAMING;
    const chunks = this.chunks;
    this.chunks = [];
    const response = this.response!;
    if (this.exchange.writeWhole(this.status, this.reason, this.outgoingHead(response.headers), chunks, length, response.lengthInFields)) {
      this.consumed(length);
      this.completeEnd();
    } else {
      this.unacknowledged += length;
      this.publicState = PublicState.DRAINING;
    }
  }

  /** Writes what waits (corked by the caller). */
  private writeNow(): void {
    const state = this.publicState;
    if (state >= PublicState.RAW) return;
    const exchange = this.exchange;
    const failure = this.failure;
    if (failure !== null) {
      if (this.refusalWaits) return;
      this.publicState = PublicState.DONE;
      this.interims = null;
      if (state !== PublicState.IDLE) exchange.destroy();
      // A request body still arriving cannot be read to its end: the connection closes after the answer.
      else writePublicError(exchange, failure.code, failure.message, !this.requestFinished);
      return;
    }
    const interims = this.interims;
    if (interims !== null) {
      this.interims = null;
      for (const [status, reason, headers] of interims) exchange.writeInterim(status, reason, headers);
    }
    const response = this.response;
    if (response === null || state === PublicState.DRAINING || this.upgraded) return;
    if (state === PublicState.IDLE) {
      this.publicState = PublicState.STREAMING;
      let length = this.contentLength;
      // A body of no declared length that is all here (and without trailers) goes with a length of
      // its own rather than chunked, as a whole answer should (docs/protocol.md 16, "framing").
      if (length < 0 && this.endRequested && this.responseTrailers === null && !this.noBody()) {
        length = bytesOf(this.chunks);
      }
      exchange.writeHead(this.status, this.reason, this.outgoingHead(response.headers), length, response.lengthInFields);
    }
    if (this.endRequested && this.noBody()) {
      this.publicState = PublicState.DONE;
      exchange.end();
      this.releaseConnectionCredit();
      return;
    }
    const chunks = this.chunks;
    if (chunks.length > 0) {
      this.chunks = [];
      for (const chunk of chunks) {
        if (exchange.write(chunk)) this.consumed(chunk.byteLength);
        else this.unacknowledged += chunk.byteLength;
      }
    }
    if (this.unacknowledged > 0) {
      this.publicState = PublicState.DRAINING;
      return;
    }
    if (this.endRequested) this.completeEnd();
  }

  /** The response head as the public client gets it: the tunnel policy's response header rules applied. */
  private outgoingHead(fields: string[]): readonly string[] {
    const policy = this.session.policy;
    return policy == null ? fields : policy.responseFields(fields);
  }

  private noBody(): boolean {
    const status = this.status;
    return this.head.method === 'HEAD' || status === 204 || status === 304;
  }

  /**
   * Everything was handed over: the response ends (with trailers after a chunked body). A body shorter
   * than its declared length cannot end cleanly: the writer cuts the connection.
   */
  private completeEnd(): void {
    this.releaseConnectionCredit();
    if (this.over) return;
    this.publicState = PublicState.DONE;
    this.exchange.end(this.responseTrailers);
  }

  // ---- after a 101 ----------------------------------------------------------------------------------

  /** The handshake is captured: the 101 goes out, and the connection hands its socket over (onSwitched). */
  protected switchProtocols(): void {
    if (this.over) return;
    this.publicState = PublicState.RAW;
    const exchange = this.exchange;
    exchange.cork();
    const interims = this.interims;
    this.interims = null;
    if (interims !== null) for (const [status, reason, headers] of interims) exchange.writeInterim(status, reason, headers);
    exchange.writeHead(101, this.reason, this.outgoingHead(this.response!.headers), -1);
    exchange.uncork();
  }

  onSwitched(socket: Socket, head: Buffer): void {
    if (this.closed) {
      socket.destroy();
      return;
    }
    this.socket = socket;
    // A switched connection that carries nothing either way for this long is gone (a peer behind a NAT
    // that forgot it, a client that vanished without a FIN): it is cut, as a proxy's read timeout does.
    socket.setTimeout(RAW_IDLE_TIMEOUT_MS, () => socket.destroy());
    socket.on('data', (chunk: Buffer) => this.onRawIn(chunk));
    socket.on('end', () => this.onRawIn(null));
    socket.on('drain', () => this.onRawDrain());
    socket.on('close', () => this.onRawClosed());
    socket.on('error', () => undefined);
    const early = this.early;
    this.early = null;
    if (early !== null) for (const chunk of early) this.writeRaw(chunk, false);
    if (this.earlyEnd) this.writeRaw(null, true);
    if (head.byteLength > 0) this.onRawIn(head);
    if (!this.requestPaused) socket.resume();
  }

  /** Bytes from the public client after the switch (null: its FIN). */
  private onRawIn(chunk: Buffer | null): void {
    if (!this.upgraded || this.requestFinished) return;
    if (chunk === null) {
      this.sendBody(EMPTY, true);
      this.checkRawDone();
      return;
    }
    this.bytesIn += chunk.byteLength;
    this.sendBody(chunk, false);
  }

  /** Bytes (and the FIN) from the local server after the 101. */
  protected writeRaw(chunk: Uint8Array | null, end: boolean): void {
    const socket = this.socket;
    if (socket === null) {
      if (chunk !== null && chunk.byteLength > 0) (this.early ??= []).push(chunk);
      if (end) this.earlyEnd = true;
      return;
    }
    if (chunk !== null && chunk.byteLength > 0) {
      this.bytesOut += chunk.byteLength;
      if (socket.write(chunk)) this.consumed(chunk.byteLength);
      else this.unacknowledged += chunk.byteLength;
    }
    if (end && !this.rawWriteEnded) {
      this.rawWriteEnded = true;
      socket.end();
      this.checkRawDone();
    }
  }

  private onRawDrain(): void {
    const bytes = this.unacknowledged;
    this.unacknowledged = 0;
    this.consumed(bytes);
    this.checkRawDone();
  }

  override drain(): void {
    super.drain();
    if (this.socket !== null) this.checkRawDone();
  }

  /** Both directions ended and every byte left: the stream is over (the socket closes after both FINs). */
  private checkRawDone(): void {
    if (!this.upgraded || !this.rawWriteEnded || !this.requestFinished || this.unacknowledged > 0 || this.bufferedRequestBytes > 0) return;
    this.publicState = PublicState.DONE;
    this.rawEnded();
  }

  private onRawClosed(): void {
    if (this.upgraded) {
      this.publicState = PublicState.ABORTED;
      this.abandoned();
    }
  }

  protected cutRaw(): void {
    this.publicState = PublicState.DONE;
    this.early = null;
    this.socket?.destroy();
    // Never switched (the 101 was not written yet): the exchange's connection goes instead.
    if (this.socket === null) this.exchange.destroy();
  }
}

function bytesOf(chunks: readonly Uint8Array[]): number {
  let bytes = 0;
  for (const chunk of chunks) bytes += chunk.byteLength;
  return bytes;
}
