/**
 * Request framing at the edge (issue 11, findings 3 and 5): one strict check of the headers that say
 * where a request ends, before anything is forwarded, and the two refusals that must not leave bytes
 * behind on the connection (400 for bad framing, 413 for a body over the limit).
 *
 * uWebSockets.js 20.30 reads Content-Length and Transfer-Encoding its own lenient way (the first of two
 * Content-Lengths, an empty one as 0, any Transfer-Encoding as chunked), and everything after what it
 * took for the body is parsed as the next request. A proxy in front that reads the same bytes another
 * way would then carry a request of the attacker's choosing on a connection it shares with other users
 * (request smuggling). So every request whose framing headers are not unambiguous is refused, and its
 * connection closed, before a byte of it or of anything after it reaches a local server.
 * docs/security.md lists each rule and the test that checks it.
 */
import type { HttpRequest, HttpResponse } from '../uws.js';

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

/** A tally for requests whose headers are not otherwise walked (the API, unknown hosts): one shared, as uWS requests are synchronous. */
const apiTally = new FramingTally();
function tallyHeader(name: string, value: string): void {
  if (name === 'content-length') apiTally.contentLengthHeader(value);
  else if (name === 'transfer-encoding') apiTally.transferEncodingHeader(value);
  else if (name === 'host') apiTally.hostCount++;
}

/** The framing problem of a request the edge does not otherwise walk, or null. */
export function requestFramingProblem(req: HttpRequest): string | null {
  apiTally.reset();
  req.forEach(tallyHeader);
  return apiTally.problem();
}

/**
 * Answers a refused request and closes its connection, so nothing that follows on it is read as
 * another request.
 *
 * Not at once: measured on uWS 20.30, an `end(body, true)` inside the request handler does not stop the
 * parser, which goes on with the bytes it already read and hands them to the handler as the next
 * request (and forgets the close). While a response is pending, uWS instead closes a connection on
 * which another request arrives. So the answer waits for the next turn of the event loop: bytes that
 * came with the refused request close the connection unanswered; otherwise the client gets the answer
 * and the connection closes after it.
 */
export function refuseAndClose(res: HttpResponse, write: (res: HttpResponse) => void): void {
  const state = { aborted: false };
  res.onAborted(() => {
    state.aborted = true;
  });
  setImmediate(() => {
    if (!state.aborted) res.cork(() => write(res));
  });
}

/**
 * Bounds of the lingering read before a 413 (as nginx's lingering close): the rest of a body over the
 * limit is read and thrown away, up to this many bytes or this long after the refusal, so an ordinary
 * client that sends its whole body before reading gets the 413 instead of a reset connection.
 */
export const LINGER_MAX_BYTES = 32 * 1024 * 1024;
export const LINGER_MAX_MS = 5_000;

/**
 * Reads and discards the rest of a request body over the limit, then calls `answer` once: when the
 * whole body was read, or a bound was reached (the answer closes the connection either way). `already`
 * counts body bytes read before. The caller registered onAborted and says through `isAborted`.
 */
export function discardBody(res: HttpResponse, isAborted: () => boolean, answer: () => void, already = 0): void {
  let discarded = already;
  let answered = false;
  const finish = (): void => {
    if (answered) return;
    answered = true;
    clearTimeout(timer);
    if (!isAborted()) res.cork(answer);
  };
  const timer = setTimeout(finish, LINGER_MAX_MS);
  timer.unref();
  res.onData((chunk, isLast) => {
    discarded += chunk.byteLength;
    if (isLast || discarded > LINGER_MAX_BYTES) finish();
  });
}

/**
 * Reads a whole request body of at most `limit` bytes into one Buffer, then calls `done` with it (null
 * when the request declares no body). A body over the limit, declared or found while reading, is read
 * and dropped (discardBody) and `tooLarge` answers it. The caller registered onAborted.
 */
export function gatherBody(
  res: HttpResponse,
  body: { contentLength: number; chunked: boolean },
  limit: number,
  isAborted: () => boolean,
  tooLarge: () => void,
  done: (body: Buffer | null) => void,
): void {
  if (body.contentLength > limit) {
    discardBody(res, isAborted, tooLarge);
    return;
  }
  if (body.contentLength <= 0 && !body.chunked) {
    done(null);
    return;
  }
  const chunks: Buffer[] = [];
  let received = 0;
  res.onData((chunk, isLast) => {
    if (received < 0) return;
    received += chunk.byteLength;
    if (received > limit) {
      if (isLast) res.cork(tooLarge);
      else discardBody(res, isAborted, tooLarge, received);
      received = -1;
      return;
    }
    chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
    if (isLast) done(Buffer.concat(chunks, received));
  });
}
