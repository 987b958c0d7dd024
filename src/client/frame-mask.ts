/**
 * Whether the client masks what it sends the edge (RFC 6455, section 5.3).
 *
 * A client must mask every frame with a key chosen at random, so that a cleartext intermediary that does
 * not speak WebSocket (a transparent proxy, a cache) can never be made to read a frame's payload as an
 * HTTP request of the sender's choosing (section 10.3). Masking costs a copy of every frame: `ws` XORs each
 * payload into a buffer of its own before it writes.
 *
 * Two paths have no such intermediary: TLS (nothing between the ends can read the bytes, let alone act on
 * them) and this machine's loopback (nothing sits between the ends at all). There the client sends a zero
 * key, which `ws` recognises and skips the copy for; the frames stay valid WebSocket frames (the mask bit
 * is set, the key is zero) and the edge unmasks them as any others. Everywhere else the key stays random.
 * docs/protocol.md, "Masking".
 */
import { BlockList, isIP } from 'node:net';
import { isLocalhostName } from './edge-lookup.js';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** `ws`'s `generateMask`: a zero key, which it sends without masking the payload. */
export function zeroMask(mask: Buffer): void {
  mask[0] = 0;
  mask[1] = 0;
  mask[2] = 0;
  mask[3] = 0;
}

/** Whether frames to the edge at `url` may go with a zero key: over TLS, or to a loopback address or name. */
export function masksUnneeded(url: URL): boolean {
  if (url.protocol === 'wss:') return true;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (isLocalhostName(host)) return true;
  const family = isIP(host);
  return family !== 0 && LOOPBACK.check(host, family === 4 ? 'ipv4' : 'ipv6');
}
