/**
 * The internal hop's control calls (docs/cluster.md): one edge asks another to give up a tunnel. Calls
 * go over the same pooled keep-alive connections as forwarded requests (one undici pool per peer) and
 * carry the cluster secret; the receiving side is src/edge/cluster/internal.ts.
 */
import { Agent } from 'undici';
import type { ClusterPeer, PeerLink, ReleaseOutcome } from './types.js';
import { RELEASE_PATH, SECRET_HEADER, STORE_STATUS_PATH } from './secret.js';

export interface PeerLinkOptions {
  secret: string;
  /** How long a control call may take before the peer counts as unreachable; 1 s by default. */
  timeoutMs?: number;
  /** The connections to the peers; shared with the hop when given (closing it is the caller's job). */
  agent?: Agent;
}

/** What a release call carries (JSON). `boot` names the process the caller believes holds the tunnel. */
export interface ReleaseCall {
  subdomain: string;
  fence: number;
  boot: string;
  /** Only this client's member of a pool (absent: the whole tunnel on that edge). */
  instance?: string;
}

export class HttpPeerLink implements PeerLink {
  private readonly secret: string;
  private readonly timeoutMs: number;
  private readonly agent: Agent;
  private readonly ownsAgent: boolean;

  constructor(options: PeerLinkOptions) {
    this.secret = options.secret;
    this.timeoutMs = options.timeoutMs ?? 1_000;
    this.ownsAgent = options.agent === undefined;
    this.agent = options.agent ?? peerAgent();
  }

  async release(peer: ClusterPeer, subdomain: string, fence: number, instance?: string): Promise<ReleaseOutcome> {
    const call: ReleaseCall = { subdomain, fence, boot: peer.boot, ...(instance === undefined ? {} : { instance }) };
    try {
      const response = await this.agent.request({
        origin: peer.advertise,
        path: RELEASE_PATH,
        method: 'POST',
        headers: { [SECRET_HEADER]: this.secret, 'content-type': 'application/json' },
        body: JSON.stringify(call),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      const text = await response.body.text();
      // Anything but the endpoint's own answer (a 404 from an edge without the hop or with another
      // secret, a proxy's 502) says nothing about the tunnel: only the lease's expiry frees the name.
      if (response.statusCode !== 200) return 'unreachable';
      const outcome = (JSON.parse(text) as { outcome?: unknown }).outcome;
      return outcome === 'released' || outcome === 'not-held' ? outcome : 'unreachable';
    } catch (error) {
      // Nothing listens at the peer's address: its process is gone, and its tunnels with it.
      return connectionRefused(error) ? 'not-held' : 'unreachable';
    }
  }

  async storeAvailable(peer: ClusterPeer): Promise<boolean | null> {
    try {
      const response = await this.agent.request({
        origin: peer.advertise,
        path: STORE_STATUS_PATH,
        method: 'GET',
        headers: { [SECRET_HEADER]: this.secret },
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      const text = await response.body.text();
      if (response.statusCode !== 200) return null;
      const available = (JSON.parse(text) as { available?: unknown }).available;
      return typeof available === 'boolean' ? available : null;
    } catch {
      return null;
    }
  }

  async close(): Promise<void> {
    if (this.ownsAgent) await this.agent.close();
  }
}

/**
 * Keep-alive connections to the peers, one pool per advertised origin. Idle ones are dropped after 4 s,
 * well before the public listener closes an idle connection (10 s), so a request never goes out on a socket the
 * peer is closing.
 */
export function peerAgent(): Agent {
  return new Agent({ connections: 64, keepAliveTimeout: 4_000, keepAliveMaxTimeout: 4_000, connect: { timeout: 2_000 } });
}

/** True when the error is a refused TCP connection (ECONNREFUSED), however undici wrapped it. */
export function connectionRefused(error: unknown): boolean {
  for (let cause = error as { code?: unknown; cause?: unknown } | undefined, depth = 0; cause !== undefined && cause !== null && depth < 4; depth++) {
    if (cause.code === 'ECONNREFUSED') return true;
    if (Array.isArray((cause as { errors?: unknown }).errors)) {
      // Happy eyeballs: an AggregateError of every address tried.
      if (((cause as { errors: unknown[] }).errors).every((each) => connectionRefused(each))) return true;
    }
    cause = cause.cause as typeof cause;
  }
  return false;
}
