/**
 * The public side of an HTTP exchange: a uWebSockets.js response.
 *
 * Response frames arrive inside the tunnel WebSocket's message callback, where uWS has corked the
 * tunnel's socket; corking the public socket there is impossible, so every write would be its own
 * syscall (measured: status line, each header, body, separately). Writes are therefore deferred: the
 * stream queues what it received (views of the session's copy of each message, no further copy) and the
 * session's flush, outside any uWS callback, writes it corked, in one syscall per response.
 *
 * Writes honour the socket's backpressure (`tryEnd`/`onWritable`); credit for response bytes goes back
 * to the client only once uWS took them, so a slow public reader slows the local server instead of
 * filling the edge's memory.
 */
import type { ErrorCode } from '../errors.js';
import type { HttpResponse } from '../uws.js';
import { EdgeHttpStream, type RequestHead } from './http-stream.js';
import type { HeaderValue } from './response-head.js';
import { acceptOf } from './public-error.js';
import { endHeadResponse, statusLine, writePublicError } from './responses.js';
import type { StreamHost } from './stream-host.js';

/**
 * Where the public response is. Only IDLE and STREAMING may touch the HttpResponse; DONE and ABORTED
 * never do again, whatever arrives later (uWS aborts the process on a write to a finished response).
 */
export const enum PublicState {
  /** Nothing written to the public client yet: an error can still be a clean 502. */
  IDLE,
  /** The head is written; body bytes go out as they come. */
  STREAMING,
  /** The socket is full: onWritable carries on. */
  DRAINING,
  /** Ended, failed or cut. */
  DONE,
  /** The public client went away (uWS onAborted): the HttpResponse is gone. */
  ABORTED,
}

export class PublicHttpStream extends EdgeHttpStream {
  publicState = PublicState.IDLE;
  private contentLength = -1;
  private headers: HeaderValue[] = [];
  /** Response body bytes received from the tunnel so far. */
  private bodyBytes = 0;
  /** Body bytes received and not yet taken by uWS, in order. */
  private chunks: Uint8Array[] = [];
  /** The end of a Content-Length body, held back until the capture is committed. */
  private tail: Uint8Array | null = null;
  /** The response may end once `chunks` is written (the capture is committed). */
  private endRequested = false;
  private failure: { code: ErrorCode; message: string } | null = null;
  /** Waiting in the session's write queue. */
  private writeScheduled = false;
  /** Chunked-mode bytes uWS buffered under backpressure: their credit waits for onWritable. */
  private unacknowledged = 0;

  constructor(
    id: number,
    session: StreamHost,
    head: RequestHead,
    private readonly res: HttpResponse,
    private readonly isHead: boolean,
  ) {
    super(id, session, head, null);
  }

  /** The HttpResponse may no longer be touched. */
  private get over(): boolean {
    return this.publicState >= PublicState.DONE;
  }

  /** uWS calls this when the public client goes away before the response ended. */
  onAborted(): void {
    const wasOver = this.over;
    this.publicState = PublicState.ABORTED;
    this.chunks = [];
    this.tail = null;
    if (!wasOver) this.abandoned();
    this.releaseConnectionCredit();
  }

  protected pauseRequest(): void {
    this.requestPaused = true;
    if (this.publicState !== PublicState.ABORTED) this.res.pause();
  }

  protected resumeRequest(): void {
    this.requestPaused = false;
    if (this.publicState !== PublicState.ABORTED) this.res.resume();
  }

  protected startResponse(): void {
    const response = this.response!;
    this.headers = response.headers;
    this.contentLength = response.contentLength;
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

  /** Called by the session's flush, outside any uWS callback: writes what waits, corked. */
  flushWrites(): void {
    this.writeScheduled = false;
    if (this.over) return;
    corking = this;
    this.res.cork(writeCorked);
  }

  /** Writes what waits (the public socket is corked by the caller or by uWS). */
  writeNow(): boolean {
    const state = this.publicState;
    if (state >= PublicState.DONE) return true;
    const failure = this.failure;
    if (failure !== null) {
      this.publicState = PublicState.DONE;
      if (state !== PublicState.IDLE) this.res.close();
      // A request body still arriving cannot be read to its end: close the connection after the answer.
      else writePublicError(this.res, failure.code, failure.message, !this.requestFinished, undefined, acceptOf(this.head.headers));
      return true;
    }
    // Waiting for the socket to drain: onWritable carries on.
    if (state === PublicState.DRAINING) return false;
    if (state === PublicState.IDLE) {
      this.writeHead();
      // uWS 20.30 sends a head alone only for a known length: tryEnd of no bytes flushes it, with its
      // Content-Length, and ends nothing. Without a length (chunked) uWS completes the head only with
      // the first body byte (docs/protocol.md section 6). A length of 0 must not end here: the end
      // waits for the capture commit.
      if (this.chunks.length === 0 && !this.endRequested && this.contentLength > 0 && !this.noBody()) this.res.tryEnd(NO_BYTES, this.contentLength);
    }
    if (this.endRequested && this.noBody()) {
      this.publicState = PublicState.DONE;
      // endWithoutBody(undefined) would announce a huge Content-Length: call it without an argument.
      if (this.isHead && this.contentLength >= 0) endHeadResponse(this.res, this.contentLength);
      else this.res.endWithoutBody();
      this.releaseConnectionCredit();
      return true;
    }
    if (this.contentLength < 0 && this.endRequested) {
      // Chunked or of unknown length: uWS takes the rest whole (buffering it if it must).
      this.publicState = PublicState.DONE;
      const chunks = this.chunks;
      this.chunks = [];
      if (chunks.length === 0) this.res.end();
      else {
        for (let i = 0; i < chunks.length - 1; i++) this.res.write(chunks[i]!);
        this.res.end(chunks[chunks.length - 1]);
      }
      this.releaseConnectionCredit();
      return true;
    }
    while (this.chunks.length > 0) {
      const chunk = this.chunks[0]!;
      const accepted = this.tryWrite(chunk);
      if (this.publicState === PublicState.DONE) {
        // The declared length is out (the stream refuses bytes beyond it, so nothing should be left).
        this.chunks = [];
        break;
      }
      if (accepted < chunk.byteLength) {
        this.chunks[0] = chunk.subarray(accepted);
        this.awaitWritable();
        return false;
      }
      this.chunks.shift();
    }
    if (this.unacknowledged > 0) {
      this.awaitWritable();
      return false;
    }
    if (this.endRequested) this.completeEnd();
    return true;
  }

  private noBody(): boolean {
    const status = this.status;
    return this.isHead || status === 204 || status === 304;
  }

  private writeHead(): void {
    this.publicState = PublicState.STREAMING;
    const res = this.res;
    res.writeStatus(statusLine(this.status));
    const headers = this.headers;
    for (let i = 0; i < headers.length; i += 2) res.writeHeader(headers[i] as string, headers[i + 1]!);
  }

  /** Hands bytes to uWS; returns how many it took. */
  private tryWrite(chunk: Uint8Array): number {
    const res = this.res;
    if (this.contentLength >= 0) {
      const before = res.getWriteOffset();
      const [ok, done] = res.tryEnd(chunk, this.contentLength);
      const accepted = ok ? chunk.byteLength : res.getWriteOffset() - before;
      if (done) this.publicState = PublicState.DONE;
      this.consumed(accepted);
      return accepted;
    }
    if (res.write(chunk)) this.consumed(chunk.byteLength);
    else this.unacknowledged += chunk.byteLength;
    return chunk.byteLength;
  }

  private awaitWritable(): void {
    if (this.publicState === PublicState.DRAINING) return;
    this.publicState = PublicState.DRAINING;
    // Made only when the public client is slow, not for every response.
    this.res.onWritable(() => this.onWritable());
  }

  /** uWS: the socket drained (its own callback, so it is corked). */
  private onWritable(): boolean {
    if (this.over) return true;
    this.publicState = PublicState.STREAMING;
    if (this.unacknowledged > 0) {
      const bytes = this.unacknowledged;
      this.unacknowledged = 0;
      this.consumed(bytes);
    }
    return this.writeNow();
  }

  /**
   * Everything was handed over. tryEnd ends the response when the last declared byte goes out; what is
   * left is an empty body (Content-Length: 0), ended here, or a body shorter than it declared, which
   * cannot end cleanly: the connection is cut so the client sees the truncation.
   */
  private completeEnd(): void {
    this.releaseConnectionCredit();
    if (this.over) return;
    this.publicState = PublicState.DONE;
    if (this.bodyBytes === this.contentLength) this.res.end();
    else this.res.close();
  }
}

const NO_BYTES = new Uint8Array(0);

/** The stream whose writes the cork callback performs: one shared function, no closure per response. */
let corking: PublicHttpStream | null = null;
function writeCorked(): void {
  const stream = corking!;
  corking = null;
  stream.writeNow();
}
