/**
 * The internal hop (docs/cluster.md): what an edge of a cluster does with a public request for a tunnel
 * another edge holds, and with the calls other edges make on it.
 */
import type { Agent } from 'undici';
import type { ErrorCode } from '../../errors.js';
import { fieldValue } from '../../http1/head.js';
import type { ServerExchange } from '../../http1/server.js';
import { ForwardedUpgradeExchange, type ForwardedUpgrade } from './hop-upgrade.js';
import type { LocalCaptureLog } from '../../api/capture-log.js';
import type { CaptureLog, TunnelDirectory } from '../../api/types.js';
import type { RingIdSpace } from '../../store/captures.js';
import { ClusterCaptureLog, ClusterTunnels } from './captures.js';
import { ForwardedExchange, type ForwardLimits, type ForwardedRequest, type OfflineHold } from './hop-http.js';
import { InternalEndpoints } from './internal.js';
import { HttpPeerLink, peerAgent } from './peer-link.js';
import { CLIENT_HEADER, ClusterSecret, NOT_OWNER_HEADER, PROTO_HEADER, SECRET_HEADER } from './secret.js';
import type { ClusterDirectory, LocalTunnels } from './types.js';

/** What the edge needs to take part in the hop (EdgeOptions.clusterHop); the lease registry provides them in cluster mode. */
export interface ClusterHopOptions {
  directory: ClusterDirectory;
  /** Ends local sessions when another edge takes a tunnel over; without it every release answers 'not-held'. */
  local?: LocalTunnels;
  /** Shared by every edge of the cluster (at least 16 characters). */
  secret: string;
  /**
   * This edge's span of capture ring ids (`clusterRingIds(nodeNumber)`, src/store/captures.ts), so request
   * ids never repeat across the edges; the whole space when absent (a data directory of one edge).
   */
  ringIds?: RingIdSpace;
}

/** Sent with a 404 TUNNEL_NOT_FOUND to a forwarded request: the asked edge does not hold the tunnel. */
export const NOT_OWNER: [string, string][] = [[NOT_OWNER_HEADER, '1']];

export class ClusterHop {
  readonly directory: ClusterDirectory;
  readonly secret: ClusterSecret;
  /** Keep-alive connections to the peers, one pool per peer, for forwarded requests and control calls. */
  readonly agent: Agent;
  readonly internal: InternalEndpoints;
  /** The control calls this edge makes on its peers (the registry's PeerLink). */
  readonly peerLink: HttpPeerLink;
  /** The cluster's offline queue: answers requests for reserved names no edge holds (docs/offline.md). */
  offline: OfflineHold | null = null;

  constructor(options: ClusterHopOptions, readonly log: (line: string) => void) {
    this.directory = options.directory;
    this.secret = new ClusterSecret(options.secret);
    this.agent = peerAgent();
    this.internal = new InternalEndpoints(this.secret, this.directory, options.local ?? null, log);
    this.peerLink = new HttpPeerLink({ secret: options.secret, agent: this.agent });
  }

  /**
   * The public client's address and scheme when `req` came over the hop from another edge with the
   * secret, else null (then its burrow-cluster-* headers are dropped like hop-by-hop ones). Such a
   * request is served here or refused, never forwarded again.
   */
  forwardedOrigin(fields: readonly string[]): { client: string; proto: string } | null {
    const presented = fieldValue(fields, SECRET_HEADER) ?? '';
    if (presented === '' || !this.secret.matches(presented)) return null;
    const proto = fieldValue(fields, PROTO_HEADER);
    return { client: fieldValue(fields, CLIENT_HEADER) ?? '', proto: proto === 'https' ? 'https' : 'http' };
  }

  /** Forwards a public request this edge holds no session for to the edge that does (or answers 404). */
  forwardHttp(exchange: ServerExchange, request: ForwardedRequest, limits: ForwardLimits, refused: (code: ErrorCode) => void): void {
    new ForwardedExchange(exchange, request, this.directory, this.agent, this.secret.value, limits, refused, this.offline).start();
  }

  /** Forwards a public upgrade this edge holds no session for to the edge that does. */
  forwardUpgrade(exchange: ServerExchange, upgrade: ForwardedUpgrade, refused: (code: ErrorCode) => void): void {
    new ForwardedUpgradeExchange(exchange, upgrade, this.directory, this.secret.value, refused).start();
  }

  /**
   * The API's view of captures and tunnels across the cluster, built on this edge's own; also answers
   * the other edges' capture and replay calls from them.
   */
  apiParts(localCaptures: LocalCaptureLog, localTunnels: TunnelDirectory): { captureLog: CaptureLog; tunnels: TunnelDirectory } {
    const captureLog = new ClusterCaptureLog(localCaptures, this.directory, this.agent, this.secret.value, this.log);
    captureLog.register(this.internal, localTunnels);
    return { captureLog, tunnels: new ClusterTunnels(localTunnels, this.directory, captureLog) };
  }

  /** Serves an internal call (secret checked first); false leaves the exchange to the ordinary routes. */
  servesInternal(exchange: ServerExchange, path: string, query: string): boolean {
    return this.internal.serves(exchange, path, query);
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
