/**
 * The public side of an HTTP exchange: a uWebSockets.js response. Writes honour the socket's
 * backpressure (`tryEnd`/`onWritable`) and credit for response bytes goes back to the client only once
 * uWS took them, so a slow public reader slows the local server instead of filling the edge's memory.
 */
import type { ErrorCode } from '../errors.js';
import type { HttpResponse } from '../uws.js';
import { cleanResponseHeaders } from './headers.js';
import { EdgeHttpStream, type RequestHead } from './http-stream.js';
import { statusLine, writePublicError } from './responses.js';
import type { TunnelSession } from './session.js';

export class PublicHttpStream extends EdgeHttpStream {
  private aborted = false;
  private headWritten = false;
  private finished = false;
  private contentLength = -1;
  private headers: string[] = [];
  /** Response body bytes received from the tunnel so far. */
  private bodyBytes = 0;
  /** Chunks waiting for the socket to drain (content-length mode), owned copies. */
  private queue: Uint8Array[] = [];
  /** The end of a Content-Length body, held back until the capture is committed. */
  private tail: Buffer | null = null;
  /** Chunked-mode bytes uWS buffered under backpressure: their credit waits for onWritable. */
  private unacknowledged = 0;
  private writableHandler: ((offset: number) => boolean) | null = null;
  private endAfterQueue = false;

  constructor(
    id: number,
    session: TunnelSession,
    head: RequestHead,
    private readonly res: HttpResponse,
    private readonly isHead: boolean,
  ) {
    super(id, session, head, null);
  }

  /** uWS calls this when the public client goes away before the response ended. */
  onAborted(): void {
    this.aborted = true;
    this.queue = [];
    this.tail = null;
    if (!this.finished) this.abandoned();
    this.releaseConnectionCredit();
  }

  protected pauseRequest(): void {
    this.requestPaused = true;
    if (!this.aborted) this.res.pause();
  }

  protected resumeRequest(): void {
    this.requestPaused = false;
    if (!this.aborted) this.res.resume();
  }

  protected startResponse(): void {
    const cleaned = cleanResponseHeaders(this.responseHeaders);
    this.headers = cleaned.headers;
    this.contentLength = cleaned.contentLength;
  }

  private writeHead(): void {
    this.headWritten = true;
    const res = this.res;
    res.writeStatus(statusLine(this.status));
    const headers = this.headers;
    for (let i = 0; i < headers.length; i += 2) res.writeHeader(headers[i]!, headers[i + 1]!);
  }

  protected writeBody(chunk: Uint8Array): void {
    if (this.aborted) {
      this.releaseConnectionCredit();
      return;
    }
    this.bodyBytes += chunk.byteLength;
    if (this.contentLength >= 0 && this.bodyBytes >= this.contentLength) {
      // This chunk completes the declared body: hold its end back until the capture is committed.
      const keep = chunk.byteLength - (this.bodyBytes - this.contentLength) - 1;
      const head = keep > 0 ? chunk.subarray(0, keep) : null;
      const rest = chunk.subarray(keep > 0 ? keep : 0);
      this.tail = this.tail === null ? Buffer.copyBytesFrom(rest) : Buffer.concat([this.tail, rest]);
      if (head === null) return;
      chunk = head;
    }
    this.res.cork(() => {
      if (!this.headWritten) this.writeHead();
      this.pushOut(chunk, false);
    });
  }

  /** Writes `chunk` now or queues it behind earlier bytes; `owned` says it may be kept without a copy. */
  private pushOut(chunk: Uint8Array, owned: boolean): void {
    if (this.queue.length > 0) {
      this.queue.push(owned ? chunk : Buffer.copyBytesFrom(chunk));
      return;
    }
    const accepted = this.tryWrite(chunk);
    if (accepted < chunk.byteLength) {
      const rest = chunk.subarray(accepted);
      this.queue.push(owned ? rest : Buffer.copyBytesFrom(rest));
      this.awaitWritable();
    }
  }

  /** Hands bytes to uWS; returns how many it took. */
  private tryWrite(chunk: Uint8Array): number {
    const res = this.res;
    if (this.contentLength >= 0) {
      const before = res.getWriteOffset();
      const [ok, done] = res.tryEnd(chunk, this.contentLength);
      const accepted = ok ? chunk.byteLength : res.getWriteOffset() - before;
      if (done) this.finished = true;
      this.consumed(accepted);
      return accepted;
    }
    if (res.write(chunk)) {
      this.consumed(chunk.byteLength);
    } else {
      this.unacknowledged += chunk.byteLength;
      this.awaitWritable();
    }
    return chunk.byteLength;
  }

  private awaitWritable(): void {
    if (this.writableHandler !== null) return;
    this.writableHandler = () => this.onWritable();
    this.res.onWritable(this.writableHandler);
  }

  private onWritable(): boolean {
    if (this.aborted) return true;
    if (this.unacknowledged > 0) {
      const bytes = this.unacknowledged;
      this.unacknowledged = 0;
      this.consumed(bytes);
    }
    while (this.queue.length > 0) {
      const chunk = this.queue[0]!;
      const accepted = this.tryWrite(chunk);
      if (accepted < chunk.byteLength) {
        this.queue[0] = chunk.subarray(accepted);
        return false;
      }
      this.queue.shift();
    }
    if (this.endAfterQueue) this.completeEnd();
    return true;
  }

  protected endResponse(lastChunk: Uint8Array | null): void {
    if (this.aborted) {
      this.releaseConnectionCredit();
      return;
    }
    this.res.cork(() => {
      if (!this.headWritten) this.writeHead();
      const status = this.status;
      if (this.isHead || status === 204 || status === 304 || status < 200) {
        this.finished = true;
        // endWithoutBody(undefined) would announce a huge Content-Length: call it without an argument.
        if (this.isHead && this.contentLength >= 0) this.res.endWithoutBody(this.contentLength);
        else this.res.endWithoutBody();
        this.releaseConnectionCredit();
        return;
      }
      if (this.contentLength < 0) {
        this.finished = true;
        if (lastChunk === null) this.res.end();
        else this.res.end(lastChunk);
        this.releaseConnectionCredit();
        return;
      }
      if (this.tail !== null) {
        this.pushOut(this.tail, true);
        this.tail = null;
      }
      if (lastChunk !== null) {
        this.bodyBytes += lastChunk.byteLength;
        this.pushOut(lastChunk, false);
      }
      if (this.queue.length > 0) this.endAfterQueue = true;
      else this.completeEnd();
    });
  }

  /**
   * Everything was handed over. tryEnd ends the response when the last declared byte goes out; what is
   * left is an empty body (Content-Length: 0), ended here, or a body shorter than it declared, which
   * cannot end cleanly: the connection is cut so the client sees the truncation.
   */
  private completeEnd(): void {
    this.releaseConnectionCredit();
    if (this.finished) return;
    this.finished = true;
    if (this.bodyBytes === this.contentLength) this.res.end();
    else this.res.close();
  }

  protected failResponse(code: ErrorCode, message: string, started: boolean): void {
    this.queue = [];
    this.tail = null;
    this.releaseConnectionCredit();
    if (this.aborted || this.finished) return;
    this.finished = true;
    this.res.cork(() => {
      if (started || this.headWritten) {
        this.res.close();
        return;
      }
      // A request body still arriving cannot be read to its end: close the connection after the answer.
      writePublicError(this.res, code, message, !this.requestFinished);
    });
  }
}
