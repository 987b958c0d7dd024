/**
 * The edge's own answers (errors, the API, the dashboard): whole responses written through the public
 * listener's writer (src/http1/server.ts), with a `date` of the edge's (a tunnel's answer carries only
 * what its local server sent). Error bodies are built once per code and reused (src/edge/public-error.ts).
 */
import { ERROR_CODES, type ErrorCode } from '../errors.js';
import { fieldValue, httpDate, standardReason } from '../http1/head.js';
import type { ServerExchange } from '../http1/server.js';
import { publicErrorAnswer } from './public-error.js';

export { errorJson } from './public-error.js';

/**
 * Answers an edge error on the public side at once: JSON, or a small HTML page when the request's
 * Accept prefers text/html (public-error.ts). `Burrow-Error` tells users the edge answered, not their
 * app; `closeConnection` after a request whose body will not be read.
 */
export function writePublicError(
  exchange: ServerExchange,
  code: ErrorCode,
  message: string = ERROR_CODES[code].message,
  closeConnection = false,
  extraHeaders: readonly (readonly [string, string])[] = [],
): void {
  const answer = publicErrorAnswer(code, message, fieldValue(exchange.head.fields, 'accept') ?? '');
  const fields: string[] = [];
  for (const [name, value] of extraHeaders) fields.push(name, value);
  for (const [name, value] of answer.headers) fields.push(name, value);
  fields.push('Date', httpDate());
  if (closeConnection) exchange.closeAfter = true;
  exchange.respond(answer.status, standardReason(answer.status), fields, answer.body);
}

/** A whole answer of the edge's own: the status's standard reason, the fields given and a `date`. */
export function writeOwn(exchange: ServerExchange, status: number, fields: string[], body: string | Buffer | null, closeConnection = false): void {
  fields.push('date', httpDate());
  if (closeConnection) exchange.closeAfter = true;
  exchange.respond(status, standardReason(status), fields, body);
}

/** `200 OK`: a status line's status and reason, as a uWebSockets.js app (the inspector, the agent port) writes it. */
export function statusLine(status: number): string {
  return `${status} ${standardReason(status)}`;
}
