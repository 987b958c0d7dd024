/**
 * The edge's own answers (errors, the API, the dashboard): whole responses written through the public
 * listener's writer (src/http1/server.ts), with a `date` of the edge's (a tunnel's answer carries only
 * what its local server sent). Error bodies are built once per code and reused.
 */
import { defaultErrorJson, ERROR_CODES, type ErrorCode } from '../errors.js';
import { httpDate, standardReason } from '../http1/head.js';
import type { ServerExchange } from '../http1/server.js';

export function errorJson(code: ErrorCode, message: string): string {
  return message === ERROR_CODES[code].message ? defaultErrorJson(code) : JSON.stringify({ error: { code, message } });
}

/**
 * Answers an edge error on the public side at once. `burrow-error` tells users the edge answered, not
 * their app; `closeConnection` after a request whose body will not be read.
 */
export function writePublicError(
  exchange: ServerExchange,
  code: ErrorCode,
  message: string = ERROR_CODES[code].message,
  closeConnection = false,
  extraHeaders: readonly (readonly [string, string])[] = [],
): void {
  const status = ERROR_CODES[code].status;
  const fields: string[] = [];
  for (const [name, value] of extraHeaders) fields.push(name, value);
  fields.push('content-type', 'application/json', 'burrow-error', code, 'date', httpDate());
  if (closeConnection) exchange.closeAfter = true;
  exchange.respond(status, standardReason(status), fields, errorJson(code, message));
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
