/**
 * The PROXY protocol version 2 header (HAProxy's spec, section 2.2) that a layer-4 balancer sends before
 * the client's bytes on a plain-HTTP connection. Read and taken off every connection that starts with
 * its signature; its source address is believed only from a `--trust-proxy` peer (client-address.ts),
 * as uWebSockets.js did before the public listener was ours.
 */
import { isIP } from 'node:net';

const SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const HEADER = 16;
/** A header with TLVs is bounded: more than this is not a balancer's. */
const MAX_LENGTH = 4096;

export type ProxyHeader =
  /** More bytes are needed to tell. */
  | { kind: 'more' }
  /** Not a PROXY header: the bytes are the client's. */
  | { kind: 'none' }
  /** A header of `length` bytes; `source` is the client's address and port, or '' and 0 (LOCAL, or an unknown family). */
  | { kind: 'header'; length: number; source: string; sourcePort: number }
  /** The signature, then something that is not a valid v2 header. */
  | { kind: 'invalid' };

/** Reads a PROXY v2 header at the start of `bytes` (all that was read so far). */
export function readProxyHeader(bytes: Buffer): ProxyHeader {
  const known = Math.min(bytes.length, SIGNATURE.length);
  for (let i = 0; i < known; i++) if (bytes[i] !== SIGNATURE[i]) return { kind: 'none' };
  if (bytes.length < HEADER) return { kind: 'more' };
  const versionCommand = bytes[12]!;
  if (versionCommand >> 4 !== 2) return { kind: 'invalid' };
  const length = bytes.readUInt16BE(14);
  if (length > MAX_LENGTH) return { kind: 'invalid' };
  if (bytes.length < HEADER + length) return { kind: 'more' };
  const command = versionCommand & 0x0f;
  const family = bytes[13]! >> 4;
  let source = '';
  let sourcePort = 0;
  if (command === 1 && family === 1 && length >= 12) {
    source = `${bytes[16]}.${bytes[17]}.${bytes[18]}.${bytes[19]}`;
    sourcePort = bytes.readUInt16BE(24);
  } else if (command === 1 && family === 2 && length >= 36) {
    const groups: string[] = [];
    for (let i = 0; i < 8; i++) groups.push(bytes.readUInt16BE(16 + i * 2).toString(16));
    source = groups.join(':');
    sourcePort = bytes.readUInt16BE(48);
    if (isIP(source) !== 6) {
      source = '';
      sourcePort = 0;
    }
  } else if (command > 1) {
    return { kind: 'invalid' };
  }
  return { kind: 'header', length: HEADER + length, source, sourcePort };
}

