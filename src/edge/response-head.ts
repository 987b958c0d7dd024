/**
 * The one check of the heads a tunnel client sends (RESPONSE, INFO, TRAILERS) before any of it reaches a
 * public client. A tenant's client is not trusted: a head that could misframe the public connection (a
 * 1xx or 101 as the final answer, a header name that is not a token, a character that is not a byte, a
 * Content-Length that is not one number) is refused, and the stream ends with 502 INVALID_RESPONSE and
 * RESET PROTOCOL_ERROR (docs/protocol.md section 6). CR, LF and NUL never get this far: the decoder
 * refuses a frame that holds them.
 *
 * Framing is the edge's own: Transfer-Encoding, Connection, the other hop-by-hop fields and those
 * Connection names are taken out. A Content-Length that is one plain number stays where it was (the
 * public writer enforces it against the body the client actually sends, src/http1/server.ts); a list
 * form (`5, 5`) or a repeated one is replaced by one line the writer adds after the fields. Everything
 * else goes out as it came: names in their case, values byte for byte, `Date` included
 * (docs/protocol.md 16), except the cluster's own `burrow-cluster-*` fields: an edge that forwarded a
 * request reads them in the answer (the owner saying "not mine" makes it ask another edge), so a
 * tunnel must not be able to speak them.
 */
import { connectionNamed, HOP_BY_HOP, isName } from '../protocol/headers.js';
import { CLUSTER_HEADER_PREFIX } from './cluster/secret.js';

export interface ResponseHead {
  /** The fields the public client gets: [name, value, ...] without framing fields. */
  headers: string[];
  /** The declared Content-Length, -1 when absent. */
  contentLength: number;
  /** `headers` hold the Content-Length field (one plain number, in its place). */
  lengthInFields: boolean;
}

/** RFC 9110 section 5.6.2 token (names of any case: protocol 2 keeps them as sent). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/**
 * What no field value or reason phrase may hold (RFC 9110 5.5, RFC 9112 4: HTAB, SP, visible ASCII and
 * bytes above 0x7F only): a control character, DEL, or a character that is not a byte.
 */
const NOT_FIELD_TEXT = /[^\t\x20-\x7e\x80-\xff]/;
const DIGITS = /^[0-9]{1,15}$/;

/** What the edge does with a RESPONSE's status. */
export const enum StatusKind {
  /** 200-599: the answer. */
  FINAL,
  /** 100, 102, 103, …: only as INFO, before the final answer. */
  INFORMATIONAL,
  /** 101: only to an upgrade request. */
  SWITCHING,
  /** Outside 100-599. */
  INVALID,
}

export function statusKind(status: number): StatusKind {
  if (status >= 200 && status <= 599) return StatusKind.FINAL;
  if (status === 101) return StatusKind.SWITCHING;
  if (status >= 100 && status <= 199) return StatusKind.INFORMATIONAL;
  return StatusKind.INVALID;
}

/** Why a reason phrase cannot go on a status line (a control character, one above \xFF), or null. */
export function reasonProblem(reason: string): string | null {
  return NOT_FIELD_TEXT.test(reason) ? 'the reason phrase holds a control character or a character above \\xFF' : null;
}

/**
 * Checks and cleans a head's fields. `keepUpgrade`: the head of a 101, which keeps its Connection and
 * Upgrade fields (they are what switches the public connection). Returns the head, or why it is
 * refused (a short reason, sent in the RESET and in the 502's message).
 */
export function checkResponseHeaders(headers: readonly string[], keepUpgrade = false): ResponseHead | string {
  let contentLength = -1;
  let lengthFields = 0;
  let plainLength = true;
  let connection = '';
  let dropSome = false;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    if (!TOKEN.test(name)) return `the header name ${quote(name)} is not an HTTP token`;
    if (NOT_FIELD_TEXT.test(value)) return `the value of ${name} holds a control character or a character above \\xFF`;
    const lower = name.length <= 17 ? name.toLowerCase() : '';
    if (lower === 'content-length') {
      const length = parseContentLength(value);
      if (length < 0 || (contentLength >= 0 && length !== contentLength)) return `the content-length ${quote(value)} is not one number`;
      contentLength = length;
      lengthFields++;
      if (!DIGITS.test(value)) plainLength = false;
    } else if (lower === 'connection') {
      connection = connection === '' ? value : `${connection},${value}`;
      if (!keepUpgrade) dropSome = true;
    } else if (HOP_BY_HOP.has(lower)) {
      if (!keepUpgrade || lower !== 'upgrade') dropSome = true;
    } else if (name.length > 15 && isClusterField(name)) {
      dropSome = true;
    }
  }
  const named = connection === '' ? null : connectionNamed(connection);
  // A 101 has no body: a length there is dropped; elsewhere one plain number keeps its place (unless
  // Connection names it, which drops it).
  const lengthInFields = lengthFields === 1 && plainLength && !keepUpgrade && !(named !== null && named.includes('content-length'));
  if (lengthFields > 0 && !lengthInFields) dropSome = true;
  if (!dropSome && named === null) return { headers: headers as string[], contentLength, lengthInFields };
  const kept: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const lower = name.toLowerCase();
    if ((lower === 'content-length' && !lengthInFields) || (named !== null && named.includes(lower))) continue;
    if (HOP_BY_HOP.has(lower) && !(keepUpgrade && (lower === 'connection' || lower === 'upgrade'))) continue;
    if (name.length > 15 && isClusterField(name)) continue;
    kept.push(name, headers[i + 1]!);
  }
  return { headers: kept, contentLength, lengthInFields };
}

/** A `burrow-cluster-*` field (the edges' own, docs/cluster.md): cheap first-letter test before the compare. */
function isClusterField(name: string): boolean {
  return (name.charCodeAt(0) | 0x20) === 98 /* b */ && name.toLowerCase().startsWith(CLUSTER_HEADER_PREFIX);
}

/** Trailer fields: checked like a head's; framing and hop-by-hop names are left out. */
export function checkTrailers(fields: readonly string[]): string[] | string {
  const checked = checkResponseHeaders(fields);
  if (typeof checked === 'string') return checked;
  const kept = withoutLength(checked);
  for (let i = 0; i < kept.length; i += 2) {
    if (isName(kept[i]!, 'host')) return 'a trailer field named Host';
  }
  return kept;
}

/** A checked head's fields without its Content-Length (interim answers and trailers have no body of their own). */
export function withoutLength(checked: ResponseHead): string[] {
  if (!checked.lengthInFields) return checked.headers;
  const kept: string[] = [];
  for (let i = 0; i < checked.headers.length; i += 2) if (!isName(checked.headers[i]!, 'content-length')) kept.push(checked.headers[i]!, checked.headers[i + 1]!);
  return kept;
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
