/**
 * The one check of a response head a tunnel client sends (RESPONSE, and WS_RESPONSE when it refuses an
 * upgrade) before any of it reaches a public client. A tenant's client is not trusted: a head that
 * could misframe the public connection (a 1xx or 101 as the final answer, a header name that is not a
 * token, a value with CR, LF or NUL, a Content-Length that is not one number) is refused, and the
 * stream ends with 502 INVALID_RESPONSE and RESET PROTOCOL_ERROR (docs/protocol.md section 6).
 *
 * Framing headers are the edge's own: Content-Length is checked here and enforced against the body
 * the client actually sends (EdgeHttpStream); Date, Transfer-Encoding, Connection, the other hop-by-hop
 * headers and those Connection names are dropped, since uWebSockets.js frames the public response.
 *
 * Header values are byte strings (docs/protocol.md section 12): each char code 0-255 of the string is
 * one byte. They go to uWS as bytes: a plain-ASCII value as the string itself (uWS's UTF-8 encoding of
 * ASCII is the same bytes, and a string costs no Buffer), any other as Buffer.from(value, 'latin1'),
 * so `caf\xE9` leaves as the four bytes it arrived as and UTF-8 is never encoded twice.
 */
import { connectionNamed, HOP_BY_HOP } from '../protocol/headers.js';

/** A header value as uWS takes it: a string when ASCII, bytes otherwise. */
export type HeaderValue = string | Uint8Array;

export interface ResponseHead {
  /** The headers the public client gets: [name, value, ...] without framing headers. */
  headers: HeaderValue[];
  /** The declared Content-Length, -1 when absent. */
  contentLength: number;
}

/** RFC 9110 section 5.6.2 token, lower-case (the decoder refuses upper-case names already). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
/** The common case: visible ASCII, space and tab. */
const PLAIN_VALUE = /^[\t\x20-\x7e]*$/;
/** What no value may hold: CR, LF, NUL, or a char code that is not a byte. */
const BAD_VALUE = /[\r\n\0]|[^\0-\xff]/;
const DIGITS = /^[0-9]{1,15}$/;

/** What the edge does with a RESPONSE's status. */
export const enum StatusKind {
  /** 200-599: the answer. */
  FINAL,
  /** 100, 102, 103, …: dropped; the final status follows. */
  INFORMATIONAL,
  /** 101 on an HTTP stream, or outside 100-599. */
  INVALID,
}

export function statusKind(status: number): StatusKind {
  if (status >= 200 && status <= 599) return StatusKind.FINAL;
  if (status >= 100 && status <= 199 && status !== 101) return StatusKind.INFORMATIONAL;
  return StatusKind.INVALID;
}

/**
 * Checks and cleans a final response head's headers. Returns the head, or why it is refused (a short
 * reason, sent in the RESET and in the 502's message).
 */
export function checkResponseHeaders(headers: readonly string[]): ResponseHead | string {
  let contentLength = -1;
  let connection = '';
  let keepAll = true;
  let plain = true;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    if (!TOKEN.test(name)) return `the header name ${quote(name)} is not an HTTP token`;
    if (!PLAIN_VALUE.test(value)) {
      if (BAD_VALUE.test(value)) return `the value of ${name} holds CR, LF, NUL or a character above \\xFF`;
      plain = false;
    }
    if (name === 'content-length') {
      const length = parseContentLength(value);
      if (length < 0 || (contentLength >= 0 && length !== contentLength)) return `the content-length ${quote(value)} is not one number`;
      contentLength = length;
      keepAll = false;
    } else if (name === 'connection') {
      connection = connection === '' ? value : `${connection},${value}`;
      keepAll = false;
    } else if (name === 'date' || HOP_BY_HOP.has(name)) {
      keepAll = false;
    }
  }
  if (keepAll && plain) return { headers: headers as string[], contentLength };
  const named = connection === '' ? null : connectionNamed(connection);
  const kept: HeaderValue[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (name === 'content-length' || name === 'date' || HOP_BY_HOP.has(name) || (named !== null && named.includes(name))) continue;
    const value = headers[i + 1]!;
    kept.push(name, plain || PLAIN_VALUE.test(value) ? value : Buffer.from(value, 'latin1'));
  }
  return { headers: kept, contentLength };
}

/** A Content-Length value: digits, or a list of equal numbers (RFC 9110 section 8.6); -1 otherwise. */
function parseContentLength(value: string): number {
  if (DIGITS.test(value)) return Number(value);
  let length = -1;
  for (const part of value.split(',')) {
    const item = part.trim();
    if (!DIGITS.test(item)) return -1;
    const number = Number(item);
    if (length >= 0 && number !== length) return -1;
    length = number;
  }
  return length;
}

/** Short, printable, and safe inside a JSON error message. */
function quote(text: string): string {
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}…` : text);
}

/**
 * A WebSocket subprotocol chosen by the local server goes into Sec-WebSocket-Protocol: one token, and one
 * the public client offered (`offered`: its Sec-WebSocket-Protocol list), else the client fails the
 * handshake after the edge has completed it (RFC 6455 section 4.1). None at all is always allowed.
 */
export function checkSubprotocol(protocol: string, offered: string): string | null {
  if (protocol === '') return null;
  if (!TOKEN.test(protocol.toLowerCase())) return `the subprotocol ${quote(protocol)} is not an HTTP token`;
  for (const candidate of offered.split(',')) if (candidate.trim() === protocol) return null;
  return `the subprotocol ${quote(protocol)} is not one the public client offered`;
}
