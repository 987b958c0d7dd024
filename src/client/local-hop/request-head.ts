/**
 * The request head the local hop writes, from what the tunnel gives: the method, the target and the
 * fields in their order and case, byte for byte (one character per byte, src/http1/parser.ts). Only the
 * hop-by-hop rules of RFC 9110 section 7.6.1 apply, and the framing is this hop's own:
 *
 * - Dropped: `Connection`, `Keep-Alive`, `Proxy-Connection`, `TE`, `Transfer-Encoding`, `Upgrade`, and
 *   every field a `Connection` field names. An upgrade request keeps its `Connection` and `Upgrade`
 *   fields as received (the handshake is end to end, docs/protocol.md section 13); the other fields its
 *   `Connection` names are dropped all the same. `Content-Length`, `Host` and `Expect` are never
 *   dropped for being named (the body's framing and the exchange's rules stand on them).
 * - Framing: a `Content-Length` the request has is kept as received (and the body is held to it); a body
 *   whose whole length is known when the request starts gets a `Content-Length`; a body of unknown
 *   length is sent chunked (`Transfer-Encoding: chunked`, trailers after it); no body, no framing field.
 * - `Expect: 100-continue` is forwarded, and the exchange holds the body until the local server answers
 *   100 (or its final status, or a second passes: exchange.ts).
 * - A request without `Host` (HTTP/1.0 allows it) gets the target's `host:port`: HTTP/1.1 requires one.
 *
 * The head is checked once, whole, for what a head cannot carry: a NUL, a character above U+00FF, a CR
 * or LF inside a name or value (one CRLF per line, exactly), a space in the method or target.
 */
import { badRequest, type LocalHopError } from './errors.js';
import type { LocalTarget } from '../routes.js';

export const RequestFraming = { NONE: 0, LENGTH: 1, CHUNKED: 2 } as const;
export type RequestFramingValue = (typeof RequestFraming)[keyof typeof RequestFraming];

/** What the head decided for the body that follows it; the exchange is this object. */
export interface RequestPlan {
  framing: RequestFramingValue;
  /** The Content-Length the head carries, -1 without one. */
  declaredLength: number;
  /** The head carries `Expect: 100-continue`. */
  expectContinue: boolean;
}

/** RFC 9110 section 9.2.2: the methods a client may retry after a connection failed under them. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE', 'PUT', 'DELETE']);

export function isIdempotent(method: string): boolean {
  return IDEMPOTENT.has(method);
}

const NOT_A_BYTE = /[\0\u0100-\uffff]/;
const DECIMAL = /^[0-9]{1,15}$/;

/**
 * The head for `fields` as one string of bytes (write it with 'latin1'), and `plan` filled in.
 * `knownLength` is the whole body's length when it is known at the start (-1 when more may follow).
 * Returns a LocalHopError instead when the request cannot be written.
 */
export function buildRequestHead(
  target: LocalTarget,
  method: string,
  requestTarget: string,
  fields: readonly string[],
  upgrade: boolean,
  knownLength: number,
  plan: RequestPlan,
): string | LocalHopError {
  // First pass: what the fields say about framing and which fields a Connection field names.
  let connection: string | null = null;
  let hopByHop = false;
  let declared = -1;
  let hasHost = false;
  let expectContinue = false;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    switch (kindOf(name)) {
      case FieldKind.CONNECTION:
        hopByHop = true;
        connection = connection === null ? fields[i + 1]! : `${connection},${fields[i + 1]!}`;
        break;
      case FieldKind.HOP_BY_HOP:
        hopByHop = true;
        break;
      case FieldKind.UPGRADE:
        if (!upgrade) hopByHop = true;
        break;
      case FieldKind.CONTENT_LENGTH: {
        const value = fields[i + 1]!.trim();
        if (!DECIMAL.test(value)) return badRequest(target, `Content-Length "${value}" is not a length`);
        const length = Number(value);
        if (declared !== -1 && declared !== length) return badRequest(target, 'two different Content-Length fields');
        declared = length;
        break;
      }
      case FieldKind.HOST:
        hasHost = true;
        break;
      case FieldKind.EXPECT:
        if (fields[i + 1]!.trim().toLowerCase() === '100-continue') expectContinue = true;
        break;
    }
  }
  const named = connection === null ? null : namedFields(connection, upgrade);

  let head = `${method} ${requestTarget} HTTP/1.1\r\n`;
  if (!hasHost) head += `Host: ${target.authority}\r\n`;
  let lines = hasHost ? 1 : 2;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    if (hopByHop) {
      const kind = kindOf(name);
      if (kind === FieldKind.HOP_BY_HOP || (kind === FieldKind.CONNECTION && !upgrade) || (kind === FieldKind.UPGRADE && !upgrade)) continue;
      if (named !== null && named.includes(name.toLowerCase())) continue;
    }
    head += `${name}: ${fields[i + 1]!}\r\n`;
    lines++;
  }

  if (declared !== -1) {
    plan.framing = RequestFraming.LENGTH;
    if (knownLength !== -1 && knownLength !== declared) return badRequest(target, `the body is ${knownLength} bytes, its Content-Length says ${declared}`);
  } else if (knownLength > 0) {
    plan.framing = RequestFraming.LENGTH;
    declared = knownLength;
    head += `Content-Length: ${knownLength}\r\n`;
    lines++;
  } else if (knownLength === -1) {
    plan.framing = RequestFraming.CHUNKED;
    head += 'Transfer-Encoding: chunked\r\n';
    lines++;
  } else {
    plan.framing = RequestFraming.NONE;
  }
  plan.declaredLength = declared;
  plan.expectContinue = expectContinue && plan.framing !== RequestFraming.NONE && declared !== 0;
  head += '\r\n';
  if (!wellFormed(head, lines + 1) || method.indexOf(' ') !== -1 || requestTarget.indexOf(' ') !== -1 || requestTarget.length === 0) {
    return badRequest(target, 'a field, the method or the target holds a byte a request head cannot carry (CR, LF, NUL, a character above U+00FF, or a space in the request line)');
  }
  return head;
}

/** Trailer fields after a chunked body, checked like a head. Returns null when one cannot be carried. */
export function trailerSection(trailers: readonly string[]): string | null {
  let tail = '0\r\n';
  for (let i = 0; i < trailers.length; i += 2) tail += `${trailers[i]!}: ${trailers[i + 1]!}\r\n`;
  tail += '\r\n';
  return wellFormed(tail, trailers.length / 2 + 2) ? tail : null;
}

/** Every line ends in CRLF, there are exactly `lines` of them, and every character is one byte but NUL. */
function wellFormed(text: string, lines: number): boolean {
  if (NOT_A_BYTE.test(text)) return false;
  let count = 0;
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) {
    if (text.charCodeAt(at - 1) !== 13) return false;
    count++;
  }
  if (count !== lines) return false;
  let carriageReturns = 0;
  for (let at = text.indexOf('\r'); at !== -1; at = text.indexOf('\r', at + 1)) carriageReturns++;
  return carriageReturns === lines;
}

const FieldKind = { OTHER: 0, CONNECTION: 1, HOP_BY_HOP: 2, UPGRADE: 3, CONTENT_LENGTH: 4, HOST: 5, EXPECT: 6 } as const;
type FieldKindValue = (typeof FieldKind)[keyof typeof FieldKind];

/** The names the head looks at, indexed by length: most names are told apart without lower-casing them. */
const NAMES_BY_LENGTH: (readonly (readonly [string, FieldKindValue])[] | undefined)[] = [];
for (const [name, kind] of [
  ['te', FieldKind.HOP_BY_HOP],
  ['host', FieldKind.HOST],
  ['expect', FieldKind.EXPECT],
  ['upgrade', FieldKind.UPGRADE],
  ['connection', FieldKind.CONNECTION],
  ['keep-alive', FieldKind.HOP_BY_HOP],
  ['content-length', FieldKind.CONTENT_LENGTH],
  ['proxy-connection', FieldKind.HOP_BY_HOP],
  ['transfer-encoding', FieldKind.HOP_BY_HOP],
] as const) {
  NAMES_BY_LENGTH[name.length] = [...(NAMES_BY_LENGTH[name.length] ?? []), [name, kind]];
}

function kindOf(name: string): FieldKindValue {
  const candidates = NAMES_BY_LENGTH[name.length];
  if (candidates === undefined) return FieldKind.OTHER;
  for (let i = 0; i < candidates.length; i++) if (is(name, candidates[i]![0])) return candidates[i]![1];
  return FieldKind.OTHER;
}

function is(name: string, lowerCase: string): boolean {
  return name === lowerCase || name.toLowerCase() === lowerCase;
}

/** The field names a Connection value lists (lower-case), beyond the hop-by-hop set and `close`. */
function namedFields(connection: string, upgrade: boolean): string[] | null {
  const named: string[] = [];
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    if (name === '' || name === 'close' || name === 'keep-alive') continue;
    // An upgrade request's Connection names Upgrade, which it keeps.
    if (name === 'upgrade' && upgrade) continue;
    // The fields this hop frames and routes by stay whatever Connection says: dropping a Content-Length
    // the body is held to would send a body without a length (a request smuggled into the next one).
    if (name === 'content-length' || name === 'host' || name === 'expect') continue;
    named.push(name);
  }
  return named.length === 0 ? null : named;
}
