/**
 * The internal hop's authentication (docs/cluster.md, "The internal hop"): every call between edges
 * carries the cluster secret in `burrow-cluster-secret`, and the receiving edge compares it in constant
 * time, as SHA-256 digests of equal length (the way tokens are compared, DESIGN.md section 7).
 *
 * A bearer secret rather than an HMAC of each request: a forwarded request's body streams, so a MAC
 * could cover its head only, and a MAC of the head alone proves no more than the secret does unless it
 * also carries a timestamp and a replay cache. The hop runs between edges of one operator on a private
 * network (or over TLS to the advertised https URL), the same trust Redis's password gets; whoever can
 * read the secret can read Redis, where the default secret lives, anyway.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** The secret itself; without it the other `burrow-cluster-*` headers are dropped like hop-by-hop ones. */
export const SECRET_HEADER = 'burrow-cluster-secret';
/** The public client's address as the first edge saw it (trusted only with the secret). */
export const CLIENT_HEADER = 'burrow-cluster-client';
/** The public client's scheme, http or https (trusted only with the secret). */
export const PROTO_HEADER = 'burrow-cluster-proto';
/**
 * Where Host and Content-Length stood among the request's headers ("H,C", pair indices, -1 when absent):
 * undici writes Host first and Content-Length last, and the owner puts them back.
 */
export const ORDER_HEADER = 'burrow-cluster-order';
/**
 * On a 404 TUNNEL_NOT_FOUND from an edge reached through the hop: the edge was asked as the owner and
 * does not hold the tunnel (any more). The forwarding edge forgets its cached owner.
 */
export const NOT_OWNER_HEADER = 'burrow-cluster-not-owner';
/** Every header of the hop starts with this: a public request's headers with it are dropped. */
export const CLUSTER_HEADER_PREFIX = 'burrow-cluster-';

/**
 * Internal endpoints live under this prefix, on any host that is not a tunnel's (the API host, an IP
 * address, the advertised name), and answer only with the secret: without it, a path here is an
 * ordinary unknown API path (404 NOT_FOUND).
 */
export const INTERNAL_PREFIX = '/_burrow/cluster/';
export const RELEASE_PATH = '/_burrow/cluster/v1/release';
/** Whether the asked edge reaches the cluster's store: asked by an edge that lost it (a partition or an outage?). */
export const STORE_STATUS_PATH = '/_burrow/cluster/v1/store';

export class ClusterSecret {
  private readonly digest: Buffer;

  constructor(readonly value: string) {
    if (value.length < 16) throw new Error('the cluster secret must be at least 16 characters');
    this.digest = createHash('sha256').update(value).digest();
  }

  /** True when `presented` is the secret; the time taken does not depend on where they differ. */
  matches(presented: string): boolean {
    if (presented === '') return false;
    return timingSafeEqual(createHash('sha256').update(presented).digest(), this.digest);
  }
}
