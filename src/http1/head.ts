/**
 * The wire form of HTTP/1.1 heads, in one place (STYLE.md: the status line and the header block are built
 * by one module, everything else talks in (name, value) pairs). Heads are built as one-byte strings, to be
 * written with the `latin1` encoding, so every character becomes exactly the byte it stands for: field
 * names and values pass through byte for byte, whatever bytes they hold (parser.ts).
 *
 * Nothing here checks fields: a caller that takes names or values from a peer validates them first (no
 * CR, LF or NUL, no character above U+00FF), as the tunnel codec does for every frame.
 */
import { STATUS_CODES } from 'node:http';

/**
 * `HTTP/1.1 <status> <reason>\r\n<fields><framing>\r\n`; an empty reason keeps the space, as RFC 9112
 * allows. `framing` is whole field lines the writer adds after the given fields (Content-Length, ...).
 */
export function responseHead(status: number, reason: string, fields: readonly string[], framing = ''): string {
  let head = `HTTP/1.1 ${status} ${reason}\r\n`;
  for (let i = 0; i < fields.length; i += 2) head += `${fields[i]!}: ${fields[i + 1]!}\r\n`;
  return `${head}${framing}\r\n`;
}

let dateSecond = -1;
let dateText = '';

/** The current time as an HTTP date (IMF-fixdate), made once a second. */
export function httpDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(second * 1000).toUTCString();
  }
  return dateText;
}

/** `<method> <target> HTTP/1.1\r\n<fields>\r\n`. */
export function requestHead(method: string, target: string, fields: readonly string[]): string {
  let head = `${method} ${target} HTTP/1.1\r\n`;
  for (let i = 0; i < fields.length; i += 2) head += `${fields[i]!}: ${fields[i + 1]!}\r\n`;
  return `${head}\r\n`;
}

/** The standard reason phrase for a status the edge answers itself (`Unknown` for codes without one). */
export function standardReason(status: number): string {
  return STATUS_CODES[status] ?? 'Unknown';
}

/** A chunk of a chunked body: its size line, the bytes, CRLF (write the three in one corked write). */
export function chunkSizeLine(length: number): string {
  return `${length.toString(16)}\r\n`;
}

/** The last chunk and the trailer section: `0\r\n<fields>\r\n`. */
export function lastChunk(trailers: readonly string[]): string {
  let tail = '0\r\n';
  for (let i = 0; i < trailers.length; i += 2) tail += `${trailers[i]!}: ${trailers[i + 1]!}\r\n`;
  return `${tail}\r\n`;
}

/** Field names compared as HTTP does: ASCII case-insensitively (names are tokens, always ASCII). */
export function sameName(name: string, lowerCase: string): boolean {
  return name.length === lowerCase.length && (name === lowerCase || name.toLowerCase() === lowerCase);
}

/** The first value of `lowerCaseName` in flat `fields`, or undefined. */
export function fieldValue(fields: readonly string[], lowerCaseName: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) if (sameName(fields[i]!, lowerCaseName)) return fields[i + 1];
  return undefined;
}

/** Whether a comma-separated field value lists `lowerCaseToken` (e.g. `Connection: keep-alive, Upgrade`). */
export function listHasToken(value: string, lowerCaseToken: string): boolean {
  const lower = value.toLowerCase();
  let from = 0;
  while (from <= lower.length) {
    const comma = lower.indexOf(',', from);
    const end = comma === -1 ? lower.length : comma;
    if (lower.slice(from, end).trim() === lowerCaseToken) return true;
    if (comma === -1) break;
    from = comma + 1;
  }
  return false;
}
