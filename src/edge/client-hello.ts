/**
 * The server name (SNI, RFC 6066) of a TLS ClientHello, read from the first bytes of a connection before
 * anything terminates it (docs/tcp.md, "TLS passthrough"): the edge's HTTPS port routes a connection to
 * a passthrough tunnel by it, or hands the same bytes to its own TLS server.
 *
 * A small strict parser: the records (RFC 8446 section 5.1: handshake content, version 3.x, at most 2^14
 * bytes each) are joined until the handshake message is whole (it may span records), the ClientHello's
 * fields are walked with every length checked against what holds it, extensions must fill their block
 * exactly and appear once each, the server name list holds at most one host name, and that name must be
 * an ASCII host name (letters, digits, `-`, `_`, dots between labels, no trailing dot, at most 253
 * characters). It never reads past its input and never allocates beyond the answer.
 */

/** A ClientHello bigger than this is not read (a real one is 0.5-2 KiB; post-quantum key shares ~1.8 KiB). */
export const MAX_HELLO_BYTES = 32 * 1024;
/**
 * The most bytes a reader should gather before giving up on a ClientHello still incomplete (`more`): the
 * largest one taken, in records of 16 KiB, and room for a sender that cuts it into smaller ones.
 */
export const MAX_HELLO_INPUT = 2 * MAX_HELLO_BYTES;
const RECORD_HEADER = 5;
const MAX_RECORD = 1 << 14;
const HANDSHAKE = 22;
const CLIENT_HELLO = 1;
const SERVER_NAME = 0;
const HOST_NAME = 0;

export type HelloResult =
  /** More bytes are needed to tell. */
  | { kind: 'more' }
  /** A ClientHello: its server name (lower-cased), or null without one. */
  | { kind: 'hello'; serverName: string | null }
  /** Not a ClientHello this parser takes, and why (the edge's own TLS server answers such bytes). */
  | { kind: 'invalid'; reason: string };

const MORE: HelloResult = { kind: 'more' };

function invalid(reason: string): HelloResult {
  return { kind: 'invalid', reason };
}

/** Reads the ClientHello at the start of `bytes` (everything read from the connection so far). */
export function readClientHello(bytes: Uint8Array): HelloResult {
  // Records, joined into the handshake message.
  let offset = 0;
  let message: Uint8Array | null = null;
  let messageLength = -1;
  const parts: Uint8Array[] = [];
  let gathered = 0;
  for (;;) {
    if (bytes.byteLength - offset < RECORD_HEADER) return MORE;
    if (bytes[offset] !== HANDSHAKE) return invalid(offset === 0 ? 'not a TLS handshake record' : 'a record of another type inside the ClientHello');
    if (bytes[offset + 1] !== 3 || bytes[offset + 2]! > 4) return invalid('not a TLS 1.x record');
    const length = (bytes[offset + 3]! << 8) | bytes[offset + 4]!;
    if (length === 0 || length > MAX_RECORD) return invalid('a record length outside 1-16384');
    if (bytes.byteLength - offset - RECORD_HEADER < length) return MORE;
    parts.push(bytes.subarray(offset + RECORD_HEADER, offset + RECORD_HEADER + length));
    gathered += length;
    offset += RECORD_HEADER + length;
    if (messageLength < 0 && gathered >= 4) {
      const head = join(parts, gathered, 4);
      if (head[0] !== CLIENT_HELLO) return invalid('the first handshake message is not a ClientHello');
      messageLength = (head[1]! << 16) | (head[2]! << 8) | head[3]!;
      if (messageLength > MAX_HELLO_BYTES) return invalid('the ClientHello is too large');
    }
    if (messageLength >= 0 && gathered >= 4 + messageLength) {
      // Bytes of a next handshake message in the same record are allowed (they are not read).
      message = join(parts, gathered, 4 + messageLength).subarray(4);
      break;
    }
  }
  return readBody(message);
}

/** The first `length` bytes of `parts` as one array (a view when one part holds them). */
function join(parts: Uint8Array[], total: number, length: number): Uint8Array {
  if (parts[0]!.byteLength >= length) return parts[0]!.subarray(0, length);
  const joined = new Uint8Array(Math.min(total, length));
  let at = 0;
  for (const part of parts) {
    if (at >= joined.byteLength) break;
    const take = Math.min(part.byteLength, joined.byteLength - at);
    joined.set(part.subarray(0, take), at);
    at += take;
  }
  return joined;
}

/** ClientHello (RFC 8446 section 4.1.2; TLS 1.0-1.2's has the same layout, extensions optional). */
function readBody(body: Uint8Array): HelloResult {
  const end = body.byteLength;
  let at = 0;
  if (end < 2 + 32 + 1) return invalid('a ClientHello shorter than its fixed fields');
  if (body[0] !== 3) return invalid('a ClientHello of no TLS version');
  at += 2 + 32;
  const sessionId = body[at]!;
  if (sessionId > 32) return invalid('a session id longer than 32 bytes');
  at += 1 + sessionId;
  if (at + 2 > end) return invalid('a ClientHello cut before its cipher suites');
  const suites = (body[at]! << 8) | body[at + 1]!;
  if (suites < 2 || suites % 2 !== 0) return invalid('a cipher suite list of odd or no length');
  at += 2 + suites;
  if (at + 1 > end) return invalid('a ClientHello cut before its compression methods');
  const compressions = body[at]!;
  if (compressions < 1) return invalid('no compression method');
  at += 1 + compressions;
  if (at > end) return invalid('a ClientHello cut inside its compression methods');
  if (at === end) return { kind: 'hello', serverName: null };
  if (at + 2 > end) return invalid('a ClientHello cut before its extensions');
  const extensionsLength = (body[at]! << 8) | body[at + 1]!;
  at += 2;
  if (at + extensionsLength !== end) return invalid('extensions that do not fill the ClientHello');
  const seen = new Set<number>();
  let serverName: string | null = null;
  while (at < end) {
    if (at + 4 > end) return invalid('an extension header cut short');
    const type = (body[at]! << 8) | body[at + 1]!;
    const length = (body[at + 2]! << 8) | body[at + 3]!;
    at += 4;
    if (at + length > end) return invalid('an extension longer than its block');
    if (seen.has(type)) return invalid(`extension ${type} twice`);
    seen.add(type);
    if (type === SERVER_NAME) {
      const name = readServerName(body.subarray(at, at + length));
      if (name !== null && typeof name === 'object') return name;
      serverName = name;
    }
    at += length;
  }
  return { kind: 'hello', serverName };
}

/** The server_name extension's data: a list holding one host name; an empty extension names nothing. */
function readServerName(data: Uint8Array): string | null | HelloResult {
  if (data.byteLength === 0) return null;
  if (data.byteLength < 2) return invalid('a server name list cut short');
  const listLength = (data[0]! << 8) | data[1]!;
  if (listLength + 2 !== data.byteLength || listLength < 3) return invalid('a server name list of the wrong length');
  let at = 2;
  let name: string | null = null;
  while (at < data.byteLength) {
    if (at + 3 > data.byteLength) return invalid('a server name entry cut short');
    const type = data[at]!;
    const length = (data[at + 1]! << 8) | data[at + 2]!;
    at += 3;
    if (at + length > data.byteLength) return invalid('a server name longer than its list');
    if (type === HOST_NAME) {
      if (name !== null) return invalid('two host names in one ClientHello');
      const host = hostName(data.subarray(at, at + length));
      if (host === null) return invalid('a server name that is not a host name');
      name = host;
    }
    at += length;
  }
  return name;
}

/** An ASCII host name, lower-cased, or null. */
function hostName(bytes: Uint8Array): string | null {
  if (bytes.byteLength === 0 || bytes.byteLength > 253) return null;
  let text = '';
  let labelLength = 0;
  for (let i = 0; i < bytes.byteLength; i++) {
    const c = bytes[i]!;
    if (c === 0x2e) {
      if (labelLength === 0) return null;
      labelLength = 0;
    } else if ((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x5f) {
      labelLength++;
    } else if (c >= 0x41 && c <= 0x5a) {
      labelLength++;
      text += String.fromCharCode(c + 0x20);
      continue;
    } else {
      return null;
    }
    if (labelLength > 63) return null;
    text += String.fromCharCode(c);
  }
  return labelLength === 0 ? null : text;
}
