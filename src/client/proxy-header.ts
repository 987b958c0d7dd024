/**
 * The PROXY protocol v2 header (HAProxy's spec, section 2.2) that `burrow tcp --proxy-protocol` (and
 * `burrow tls --proxy-protocol`) writes to the local server before a connection's bytes, so a server that
 * reads it (nginx `listen ... proxy_protocol`, HAProxy `accept-proxy`, PostgreSQL behind pgbouncer, ...)
 * sees the public client's address instead of the client's loopback one. The edge says who connected
 * (ACCEPT: the client's address and port as the edge believes them, and the edge's own address and
 * public port).
 */
import { addressBytes } from '../protocol/cidr.js';

const SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
const MAPPED = Buffer.from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]);

/**
 * The header for a connection from `source`:`sourcePort` to `destination`:`destinationPort`. An IPv4
 * source goes as AF_INET (its destination too when that is IPv4, else 0.0.0.0), any other IP as AF_INET6
 * (an IPv4 destination mapped); a source that is no IP makes a LOCAL header, which carries no address.
 */
export function proxyHeader(source: string, sourcePort: number, destination: string, destinationPort: number): Buffer {
  const from = addressBytes(source);
  if (from === null) return Buffer.concat([SIGNATURE, Buffer.from([0x20, 0x00, 0x00, 0x00])]);
  const to = addressBytes(destination) ?? new Uint8Array(16);
  const ipv4 = isMapped(from);
  const length = ipv4 ? 12 : 36;
  const header = Buffer.alloc(16 + length);
  SIGNATURE.copy(header, 0);
  header[12] = 0x21; // version 2, command PROXY
  header[13] = ipv4 ? 0x11 : 0x21; // AF_INET or AF_INET6, STREAM
  header.writeUInt16BE(length, 14);
  if (ipv4) {
    header.set(from.subarray(12), 16);
    if (isMapped(to)) header.set(to.subarray(12), 20);
    header.writeUInt16BE(sourcePort, 24);
    header.writeUInt16BE(destinationPort, 26);
  } else {
    header.set(from, 16);
    header.set(to, 32);
    header.writeUInt16BE(sourcePort, 48);
    header.writeUInt16BE(destinationPort, 50);
  }
  return header;
}

function isMapped(bytes: Uint8Array): boolean {
  for (let i = 0; i < 12; i++) if (bytes[i] !== MAPPED[i]) return false;
  return true;
}
