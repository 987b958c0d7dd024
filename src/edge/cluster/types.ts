/**
 * Cluster mode's seams (docs/cluster.md): several edges share one Redis. The lease registry
 * (src/edge/cluster/registry.ts, on src/store/redis-leases.ts) says which edge holds each tunnel; the
 * internal hop (src/edge/cluster/hop.ts) carries public requests, releases and API calls between edges.
 * Each side sees the other only through these interfaces, so each is tested on its own.
 */

import type { StoredPolicy } from '../../protocol/policy.js';

export interface ClusterOptions {
  /** redis://HOST:PORT[/DB], or redis-sentinel://HOST:PORT[,HOST:PORT...]/MASTER (src/store/redis-url.ts). */
  redis: string;
  /** This edge's name in the cluster: stable across restarts, unique among the edges. */
  nodeId: string;
  /** Where the other edges reach this one (its public listener), e.g. http://10.0.0.5:8080. */
  advertise: string;
  /**
   * Authenticates the internal hop. Defaults to a secret the first edge stores in Redis (SET NX):
   * whoever can read Redis is inside the cluster anyway.
   */
  secret?: string;
}

/** An edge of the cluster. `boot` changes on every start, so a restarted edge is told apart from its old self. */
export interface ClusterPeer {
  nodeId: string;
  advertise: string;
  boot: string;
}

/** Who holds a subdomain now: what the registry keeps in Redis for a live tunnel. */
export interface TunnelLease extends ClusterPeer {
  subdomain: string;
  accountId: string;
  tokenId: string;
  port: number;
  startedAt: number;
  publicUrl: string;
  /** Grows by one on every grant of the name (a fencing token): a stale holder's renewals and claims fail. */
  fence: number;
  /** The tunnel's one-run policy (docs/policies.md): a forwarding edge applies it before its hop. */
  policy?: StoredPolicy;
}

/** The lease registry as the hop and the API see it. */
export interface ClusterDirectory {
  /** The edge holding `subdomain`'s tunnel now (cached for a moment), or null when no edge holds it. */
  ownerOf(subdomain: string): Promise<TunnelLease | null>;
  /** Drops a cached owner: its edge answered that it does not hold the tunnel (any more). */
  forget(subdomain: string): void;
  /**
   * The hop could not connect to `nodeId` (refused, or no answer to the connect): a tunnel attached to
   * several edges is looked up on its other edges first for a while.
   */
  unreachable?(nodeId: string): void;
  /** The edges alive now (their heartbeats), this one included. */
  peers(): Promise<ClusterPeer[]>;
  /** This edge. */
  readonly self: ClusterPeer;
}

/**
 * What an edge asked to give up a tunnel answers: it closed its session ('released'), it never held
 * that grant or its process is gone, the connection refused ('not-held'), or it could not be asked
 * ('unreachable': a timeout or a partition; then only the lease's expiry frees the name).
 */
export type ReleaseOutcome = 'released' | 'not-held' | 'unreachable';

/** The internal hop's control calls, as the registry uses them. */
export interface PeerLink {
  /**
   * Asks `peer` to end its session on `subdomain` granted with `fence` (a takeover by the same account);
   * with `instance`, only that client's member of the pool there (its reconnect elsewhere replaces it).
   */
  release(peer: ClusterPeer, subdomain: string, fence: number, instance?: string): Promise<ReleaseOutcome>;
  /** Asks `peer` whether it reaches the cluster's store; null when it could not be asked. */
  storeAvailable(peer: ClusterPeer): Promise<boolean | null>;
}

/** What this edge does when another edge's hop asks it (implemented by the lease registry). */
export interface LocalTunnels {
  /**
   * Ends the local session on `subdomain` if it was granted with `fence` (GOAWAY REPLACED); with
   * `instance`, only that client's pool member(s) there; 'not-held' otherwise.
   */
  release(subdomain: string, fence: number, instance?: string): 'released' | 'not-held';
  /** Whether this edge reaches the cluster's store now (asked by an edge that lost it). */
  storeAvailable?(): boolean;
}
