/**
 * Header rules at the edge (DESIGN.md section 4): hop-by-hop headers, and those named in Connection,
 * never cross the tunnel in either direction; X-Forwarded-For/-Proto/-Host are the edge's own. The
 * response side is checked and cleaned in response-head.ts.
 *
 * Headers travel as flat arrays [name, value, ...] with lower-case names. The uWS request is read
 * through one module-level collector, so a request costs no closure (uWS requests are synchronous).
 */
import { HOP_BY_HOP, connectionNamed, removeNamed } from '../protocol/headers.js';
import type { HttpRequest } from '../uws.js';
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
  /** Values needed for WebSocket upgrades. */
  upgrade: string;
  secWebSocketKey: string;
  secWebSocketProtocol: string;
  secWebSocketExtensions: string;
}

const collector = {
  headers: [] as string[],
  host: '',
  framing: new FramingTally(),
  connection: '',
  forwardedFor: '',
  upgrade: '',
  secWebSocketKey: '',
  secWebSocketProtocol: '',
  secWebSocketExtensions: '',
  /** The request came over the cluster's hop with its secret: its X-Forwarded-* are the first edge's. */
  forwarded: false,
  order: '',
  add(name: string, value: string): void {
    switch (name) {
      case 'host':
        if (collector.framing.hostCount++ === 0) collector.host = value;
        collector.headers.push(name, value);
        return;
      case 'content-length':
        collector.framing.contentLengthHeader(value);
        collector.headers.push(name, value);
        return;
      case 'transfer-encoding':
        collector.framing.transferEncodingHeader(value);
        return;
      case 'connection':
        collector.connection = collector.connection === '' ? value : `${collector.connection},${value}`;
        return;
      case 'x-forwarded-for':
        if (collector.forwarded) break;
        collector.forwardedFor = collector.forwardedFor === '' ? value : `${collector.forwardedFor}, ${value}`;
        return;
      case 'x-forwarded-proto':
      case 'x-forwarded-host':
        if (collector.forwarded) break;
        return;
      case 'upgrade':
        collector.upgrade = value;
        return;
      case 'sec-websocket-key':
        collector.secWebSocketKey = value;
        break;
      case 'sec-websocket-protocol':
        collector.secWebSocketProtocol = value;
        break;
      case 'sec-websocket-extensions':
        collector.secWebSocketExtensions = value;
        break;
      default:
        if (HOP_BY_HOP.has(name)) return;
        // The cluster's own headers never reach a tunnel (docs/cluster.md), forged or not.
        if (name.charCodeAt(0) === 98 /* b */ && name.startsWith(CLUSTER_HEADER_PREFIX)) {
          if (name === ORDER_HEADER) collector.order = value;
          return;
        }
    }
    collector.headers.push(name, value);
  },
};

/**
 * Copies a public request's headers for the tunnel: hop-by-hop and Connection-named headers dropped,
 * X-Forwarded-For extended with the address the edge got the request from (`hopAddress`: the peer, see
 * src/edge/client-address.ts), X-Forwarded-Proto and -Host set by the edge (`forwardedHost` '' means
 * the request's Host).
 * The framing headers are checked on the same walk: `framingProblem` says why the request must be
 * refused (then nothing of it may be forwarded).
 * `forwarded`: the request came from another edge of the cluster with the secret (src/edge/cluster/hop.ts):
 * its headers are that edge's reading of the public request, kept as they are.
 */
export function readPublicRequestHead(req: HttpRequest, hopAddress: string, proto: string, forwardedHost = '', forwarded = false): PublicRequestHead {
  collector.headers = [];
  collector.host = '';
  collector.framing.reset();
  collector.connection = '';
  collector.forwardedFor = '';
  collector.upgrade = '';
  collector.secWebSocketKey = '';
  collector.secWebSocketProtocol = '';
  collector.secWebSocketExtensions = '';
  collector.forwarded = forwarded;
  collector.order = '';
  req.forEach(collector.add);
  const headers = collector.headers;
  if (collector.connection !== '') {
    const named = connectionNamed(collector.connection);
    if (named.length > 0) removeNamed(headers, named);
  }
  if (forwarded) restoreHeaderOrder(headers, collector.order);
  else headers.push(
    'x-forwarded-for',
    collector.forwardedFor === '' ? hopAddress : `${collector.forwardedFor}, ${hopAddress}`,
    'x-forwarded-proto',
    proto,
    'x-forwarded-host',
    forwardedHost === '' ? collector.host : forwardedHost,
  );
  return {
    headers,
    host: collector.host,
    contentLength: collector.framing.contentLength,
    chunked: collector.framing.transferEncodingCount > 0,
    framingProblem: collector.framing.problem(),
    upgrade: collector.upgrade,
    secWebSocketKey: collector.secWebSocketKey,
    secWebSocketProtocol: collector.secWebSocketProtocol,
    secWebSocketExtensions: collector.secWebSocketExtensions,
  };
}
