/**
 * Status lines and error bodies, built once and reused: they are written on every response.
 */
import { STATUS_CODES } from 'node:http';
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import type { HttpResponse } from '../uws.js';
import { publicErrorAnswer } from './public-error.js';

const STATUS_LINES: string[] = [];
for (let code = 100; code <= 999; code++) STATUS_LINES[code] = `${code} ${STATUS_CODES[code] ?? 'Status'}`;

export function statusLine(status: number): string {
  return STATUS_LINES[status] ?? `${status} Status`;
}

/**
 * Answers an edge error on the public side at once (inside the request handler, so already corked):
 * JSON, or a small HTML page when `accept` (the request's Accept) prefers text/html (public-error.ts).
 * `Burrow-Error` tells users the edge answered, not their app.
 */
export function writePublicError(
  res: HttpResponse,
  code: ErrorCode,
  message: string = ERROR_CODES[code].message,
  closeConnection = false,
  extraHeaders: readonly [string, string][] = [],
  accept = '',
): void {
  const answer = publicErrorAnswer(code, message, accept);
  res.writeStatus(statusLine(answer.status));
  for (const [name, value] of extraHeaders) res.writeHeader(name, value);
  for (const [name, value] of answer.headers) res.writeHeader(name, value);
  res.end(answer.body, closeConnection);
}

/**
 * Ends the answer to a HEAD request: the head with `Content-Length: contentLength`, no body.
 *
 * Not `endWithoutBody(contentLength)`: uWS 20.30 then still waits for that many body bytes, so the
 * response never completes inside uWS. The connection stays "answering": the next request on it is
 * taken as pipelined and the connection closed without an answer, and with `closeConnection` the
 * connection is never closed (measured with a bare uWS app; docs/protocol.md section 17). Written as a
 * field of our own, in uWS's own case, the length is announced and the response is complete at once.
 * `Connection: close` is then ours too: the client closes the connection after the head.
 */
export function endHeadResponse(res: HttpResponse, contentLength: number, closeConnection = false): void {
  res.writeHeader('Content-Length', String(contentLength));
  if (closeConnection) res.writeHeader('Connection', 'close');
  res.endWithoutBody();
}
