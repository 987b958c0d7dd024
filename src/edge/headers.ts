/**
 * Header rules at the edge (DESIGN.md section 4): hop-by-hop headers, and those named in Connection,
 * never cross the tunnel; X-Forwarded-For/-Proto/-Host are the edge's own. The response side is checked
 * and cleaned in response-head.ts.
 *
 * Headers travel as flat arrays [name, value, ...] with names as the public client sent them (protocol
 * 2 keeps their case) and values as bytes (one character per byte). Names are compared ASCII
 * case-insensitively, and only names of a length some rule cares about are lower-cased at all.
 */
import { connectionNamed, HOP_BY_HOP, removeNamed } from '../protocol/headers.js';
import { FramingTally } from './request-framing.js';
import { CLUSTER_HEADER_PREFIX, ORDER_HEADER } from './cluster/secret.js';
import { restoreHeaderOrder } from './cluster/forwarded-head.js';

export interface PublicRequestHead {
  headers: string[];
  host: string;
  /** -1 when the request has no Content-Length. */
  contentLength: number;
  chunked: boolean;
  /** Why the request's framing is refused (400 and the connection closed), or null (src/edge/request-framing.ts). */
  framingProblem: string | null;
  /** `Expect: 100-continue`: the body comes only after the local server's 100 (or never). */
  expectContinue: boolean;
}

/** Lengths of the names a rule below looks at (the cluster's own prefix is longer than all of them). */
const WATCHED = new Set([2, 4, 6, 7, 10, 14, 15, 16, 17, 18, 19]);

const tally = new FramingTally();

/**
 * Copies a public request's headers for the tunnel: hop-by-hop and Connection-named headers dropped
 * (Connection and Upgrade kept for an `upgrade`), X-Forwarded-For extended with the address the edge got
 * the request from (`hopAddress`: the peer, see src/edge/client-address.ts), X-Forwarded-Proto and -Host
 * set by the edge (`forwardedHost` '' means the request's Host). `authority`: the host of an
 * absolute-form target, which replaces the Host field's value (RFC 9112 section 3.2.2).
 * The framing headers are checked on the same walk: `framingProblem` says why the request must be
 * refused (then nothing of it may be forwarded).
 * `forwarded`: the request came from another edge of the cluster with the secret (src/edge/cluster/hop.ts):
 * its headers are that edge's reading of the public request, kept as they are.
 */
export function readPublicRequestHead(
  fields: readonly string[],
  hopAddress: string,
  proto: string,
  forwardedHost = '',
  forwarded = false,
  upgrade = false,
  authority = '',
): PublicRequestHead {
  const headers: string[] = [];
  tally.reset();
  let host = '';
  let connection = '';
  let forwardedFor = '';
  let order = '';
  let expectContinue = false;
  for (let i = 0; i < fields.length; i += 2) {
    const name = fields[i]!;
    let value = fields[i + 1]!;
    const length = name.length;
    if (!WATCHED.has(length)) {
      if (length > 15 && (name.charCodeAt(0) | 0x20) === 98 /* b */ && name.toLowerCase().startsWith(CLUSTER_HEADER_PREFIX)) {
        // The cluster's own headers never reach a tunnel (docs/cluster.md), forged or not.
        if (forwarded && name.toLowerCase() === ORDER_HEADER) order = value;
        continue;
      }
      headers.push(name, value);
      continue;
    }
    const lower = name.toLowerCase();
    switch (lower) {
      case 'host':
        if (tally.hostCount++ === 0) {
          host = value;
          if (authority !== '') value = authority;
        }
        break;
      case 'content-length':
        tally.contentLengthHeader(value);
        break;
      case 'transfer-encoding':
        tally.transferEncodingHeader(value);
        continue;
      case 'connection':
        connection = connection === '' ? value : `${connection},${value}`;
        if (!upgrade) continue;
        break;
      case 'upgrade':
        if (!upgrade) continue;
        break;
      case 'expect':
        if (value.toLowerCase() === '100-continue') expectContinue = true;
        break;
      case 'x-forwarded-for':
        if (forwarded) break;
        forwardedFor = forwardedFor === '' ? value : `${forwardedFor}, ${value}`;
        continue;
      case 'x-forwarded-proto':
      case 'x-forwarded-host':
        if (forwarded) break;
        continue;
      default:
        if (HOP_BY_HOP.has(lower)) continue;
        if (length > 15 && lower.startsWith(CLUSTER_HEADER_PREFIX)) {
          if (forwarded && lower === ORDER_HEADER) order = value;
          continue;
        }
    }
    headers.push(name, value);
  }
  if (connection !== '') {
    const named = connectionNamed(connection);
    if (named.length > 0) removeNamed(headers, named);
  }
  if (forwarded) restoreHeaderOrder(headers, order);
  else {
    headers.push(
      'X-Forwarded-For',
      forwardedFor === '' ? hopAddress : `${forwardedFor}, ${hopAddress}`,
      'X-Forwarded-Proto',
      proto,
      'X-Forwarded-Host',
      forwardedHost === '' ? (authority === '' ? host : authority) : forwardedHost,
    );
  }
  if (authority !== '' && tally.hostCount === 0) headers.unshift('Host', authority);
  return {
    headers,
    host: authority === '' ? host : authority,
    contentLength: tally.contentLength,
    chunked: tally.transferEncodingCount > 0,
    framingProblem: tally.problem(),
    expectContinue,
  };
}
