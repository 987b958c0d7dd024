/**
 * Request framing at the edge (issue 11, findings 3 and 5; issue 24): llhttp, the public listener's
 * parser, refuses every malformed framing itself (bad chunk sizes, CL with TE, two or bad
 * Content-Lengths: 400 and the connection closed, src/http1). What it accepts and the edge still refuses
 * is checked here on the header walk the edge does anyway: a Transfer-Encoding other than exactly
 * `chunked` (`gzip, chunked` is valid HTTP, but the tunnel forwards the de-chunked bytes without the
 * coding that would say how to read them), and two Hosts. docs/security.md lists each rule and its test.
 */
import type { ExchangeSink, ServerExchange } from '../http1/server.js';

/**
 * Tallies the framing headers of one request as its headers are walked (the edge already walks every
 * public request's headers once, src/edge/headers.ts; this rides on that walk).
 */
export class FramingTally {
  contentLengthCount = 0;
  /** The first Content-Length as sent; -1 when absent, -2 when not 1 to 15 digits. */
  contentLength = -1;
  /** A second Content-Length differs from the first (or is not a number). */
  contentLengthConflict = false;
  transferEncodingCount = 0;
  transferEncoding = '';
  hostCount = 0;

  reset(): void {
    this.contentLengthCount = 0;
    this.contentLength = -1;
    this.contentLengthConflict = false;
    this.transferEncodingCount = 0;
    this.transferEncoding = '';
    this.hostCount = 0;
  }

  contentLengthHeader(value: string): void {
    const parsed = CONTENT_LENGTH.test(value) ? Number(value) : -2;
    if (this.contentLengthCount > 0 && parsed !== this.contentLength) this.contentLengthConflict = true;
    this.contentLengthCount++;
    if (this.contentLengthCount === 1) this.contentLength = parsed;
  }

  transferEncodingHeader(value: string): void {
    this.transferEncodingCount++;
    this.transferEncoding = value;
  }

  /** Why the framing is refused, or null when it is unambiguous. */
  problem(): string | null {
    if (this.hostCount > 1) return 'The request has more than one Host header.';
    if (this.contentLengthCount > 0) {
      if (this.transferEncodingCount > 0) return 'The request has both Content-Length and Transfer-Encoding.';
      if (this.contentLength === -2) return 'The Content-Length header must be a decimal number of bytes.';
      // Refused even when the values are equal, as Node's own parser (llhttp) does: no reader can
      // disagree about a request that has one.
      if (this.contentLengthCount > 1) {
        return this.contentLengthConflict ? 'The request has Content-Length headers that disagree.' : 'The request has more than one Content-Length header.';
      }
      return null;
    }
    if (this.transferEncodingCount > 1) return 'The request has more than one Transfer-Encoding header.';
    if (this.transferEncodingCount === 1 && this.transferEncoding.toLowerCase() !== 'chunked') {
      return 'Transfer-Encoding must be exactly "chunked".';
    }
    return null;
  }
}

const CONTENT_LENGTH = /^[0-9]{1,15}$/;

/**
 * Reads a whole request body of at most `limit` bytes into one Buffer, then calls `done` with it (null
 * when there is none). A body over the limit (declared, or found while reading) is read and dropped
 * first, within the linger bounds (ServerExchange.discardBody: 32 MiB or 5 s), then `tooLarge` answers
 * and the connection closes: a client that sends its whole body before it reads gets the answer.
 * `aborted` is called when the connection ends first.
 */
export function gatherBody(
  exchange: ServerExchange,
  body: { contentLength: number; chunked: boolean },
  limit: number,
  tooLarge: () => void,
  done: (body: Buffer | null, trailers: string[] | null) => void,
  aborted: () => void = () => undefined,
): void {
  if (body.contentLength > limit) {
    exchange.discardBody(tooLarge);
    return;
  }
  exchange.attach(new Gatherer(exchange, limit, { tooLarge, done }, aborted));
}

class Gatherer implements ExchangeSink {
  private chunks: Buffer[] = [];
  private received = 0;
  private trailers: string[] | null = null;

  constructor(
    private readonly exchange: ServerExchange,
    private readonly limit: number,
    private then: { tooLarge: () => void; done: (body: Buffer | null, trailers: string[] | null) => void } | null,
    private readonly aborted: () => void,
  ) {}

  onRequestTrailers(fields: string[]): void {
    this.trailers = fields;
  }

  onRequestBody(chunk: Buffer | null, last: boolean): void {
    const then = this.then;
    if (then === null) return;
    if (chunk !== null && chunk.byteLength > 0) {
      this.received += chunk.byteLength;
      if (this.received > this.limit) {
        this.then = null;
        this.chunks = [];
        if (last) then.tooLarge();
        else this.exchange.discardBody(then.tooLarge);
        return;
      }
      this.chunks.push(chunk);
    }
    if (!last) return;
    this.then = null;
    const chunks = this.chunks;
    this.chunks = [];
    then.done(chunks.length === 0 ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.received), this.trailers);
  }

  onAborted(): void {
    this.then = null;
    this.aborted();
  }
}

/** A request's framing as the API and unknown hosts need it (their headers are not otherwise walked). */
export interface Framing {
  problem: string | null;
  contentLength: number;
  chunked: boolean;
}

const ownTally = new FramingTally();

export function requestFraming(fields: readonly string[]): Framing {
  ownTally.reset();
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    const length = name.length;
    if (length !== 4 && length !== 14 && length !== 17) continue;
    const lower = name.toLowerCase();
    if (lower === 'content-length') ownTally.contentLengthHeader(fields[i + 1]!);
    else if (lower === 'transfer-encoding') ownTally.transferEncodingHeader(fields[i + 1]!);
    else if (lower === 'host') ownTally.hostCount++;
  }
  return { problem: ownTally.problem(), contentLength: ownTally.contentLength, chunked: ownTally.transferEncodingCount > 0 };
}
