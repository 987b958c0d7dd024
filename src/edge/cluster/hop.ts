/**
 * The internal hop (docs/cluster.md): what an edge of a cluster does with a public request for a tunnel
 * another edge holds, and with the calls other edges make on it.
 */
import type { Agent } from 'undici';
import type { HttpRequest, HttpResponse } from '../../uws.js';
import { InternalEndpoints } from './internal.js';
import { HttpPeerLink, peerAgent } from './peer-link.js';
import { ClusterSecret } from './secret.js';
import type { ClusterDirectory, LocalTunnels } from './types.js';

/** What the edge needs to take part in the hop (EdgeOptions.clusterHop); the lease registry provides them in cluster mode. */
export interface ClusterHopOptions {
  directory: ClusterDirectory;
  /** Ends local sessions when another edge takes a tunnel over; without it every release answers 'not-held'. */
  local?: LocalTunnels;
  /** Shared by every edge of the cluster (at least 16 characters). */
  secret: string;
}

export class ClusterHop {
  readonly directory: ClusterDirectory;
  readonly secret: ClusterSecret;
  /** Keep-alive connections to the peers, one pool per peer, for forwarded requests and control calls. */
  readonly agent: Agent;
  readonly internal: InternalEndpoints;
  /** The control calls this edge makes on its peers (the registry's PeerLink). */
  readonly peerLink: HttpPeerLink;

  constructor(options: ClusterHopOptions, readonly log: (line: string) => void) {
    this.directory = options.directory;
    this.secret = new ClusterSecret(options.secret);
    this.agent = peerAgent();
    this.internal = new InternalEndpoints(this.secret, this.directory, options.local ?? null, log);
    this.peerLink = new HttpPeerLink({ secret: options.secret, agent: this.agent });
  }

  /** Serves an internal call (secret checked first); false leaves `res` to the ordinary routes. */
  servesInternal(res: HttpResponse, req: HttpRequest): boolean {
    return this.internal.serves(res, req);
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
