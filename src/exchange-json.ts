/**
 * How captured headers and bodies look in JSON, for the edge's API and the local inspector alike:
 * headers as [name, value] pairs (order and repeats kept), bodies as UTF-8 text when they are, base64
 * otherwise, with their full size and whether the kept bytes are cut short.
 */
import { isUtf8 } from 'node:buffer';

export interface BodyJson {
  body: string;
  body_encoding: 'utf8' | 'base64';
  /** The body's full size; `body` holds the first bytes of it when `truncated`. */
  body_size: number;
  truncated: boolean;
}

/**
 * The mark of a capture the edge refused before it reached the local server (docs/api.md, `rejected`):
 * "signature" for a webhook whose signature did not verify (error SIGNATURE_INVALID), else null.
 */
export function rejectionOf(error: string | null | undefined): 'signature' | null {
  return error === 'SIGNATURE_INVALID' ? 'signature' : null;
}

export function headerPairs(flat: readonly string[]): [string, string][] {
  const list: [string, string][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) list.push([flat[i]!, flat[i + 1]!]);
  return list;
}

export function bodyJson(body: Uint8Array | null, size: number, truncated: boolean): BodyJson {
  if (body === null || body.byteLength === 0) return { body: '', body_encoding: 'utf8', body_size: size, truncated: truncated || size > 0 };
  // A truncated body may end inside a UTF-8 sequence: check it without its last incomplete character.
  const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const text = truncated ? trimPartialUtf8(bytes) : bytes;
  if (isUtf8(text)) return { body: text.toString('utf8'), body_encoding: 'utf8', body_size: size, truncated };
  return { body: bytes.toString('base64'), body_encoding: 'base64', body_size: size, truncated };
}

/** Drops up to 3 trailing bytes that start a multi-byte UTF-8 character cut short. */
function trimPartialUtf8(body: Buffer): Buffer {
  const end = body.byteLength;
  for (let back = 1; back <= 3 && back <= end; back++) {
    const byte = body[end - back]!;
    if ((byte & 0xc0) === 0x80) continue; // a continuation byte: look further back
    if (byte >= 0xc0) {
      const length = byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : 2;
      return length > back ? body.subarray(0, end - back) : body;
    }
    return body;
  }
  return body;
}
