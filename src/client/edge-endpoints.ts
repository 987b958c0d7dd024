/**
 * The edges a tunnel client may use, in failover order: each configured edge URL, and an edge whose one
 * DNS name has several addresses once per address (a cluster behind round-robin DNS), so a dead address
 * is skipped instead of being tried again by chance.
 *
 * A pinned address only replaces the name's lookup: the URL, the Host header, the TLS server name and
 * the certificate check all keep the configured name.
 */
import dns, { type LookupAddress } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { isLoopbackHost } from './edge-trust.js';
import { resolveRuleFor, type ResolveRule } from './resolve-rules.js';

export interface EdgeEndpoint {
  /** The configured edge URL (http(s)://name:port). */
  edge: string;
  /** The one address to connect to, or null to let the name resolve as usual. */
  address: LookupAddress | null;
}

/** How an endpoint is named to the user: the URL, and the address when one is pinned. */
export function endpointLabel(endpoint: EdgeEndpoint): string {
  return endpoint.address === null ? endpoint.edge : `${endpoint.edge} (${endpoint.address.address})`;
}

/** A lookup that answers `address` whatever it is asked, in both of net's calling forms. */
export function pinnedLookup(address: LookupAddress): LookupFunction {
  return ((_hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    if (options.all === true) callback(null, [address]);
    else callback(null, address.address, address.family);
  }) as unknown as LookupFunction;
}

function resolveAll(hostname: string): Promise<LookupAddress[]> {
  return new Promise((resolve) => {
    // Through the module object, as net itself looks names up: one resolver for both.
    dns.lookup(hostname, { all: true }, (error, addresses) => resolve(error === null ? addresses : []));
  });
}

/**
 * The endpoints of `edges`, in order. A name that does not resolve (yet) stays one endpoint with no
 * address, so connecting to it fails with the resolver's own error (ENOTFOUND) as it always did;
 * loopback names (localhost: ::1 and 127.0.0.1 are one machine) and IP literals are never split. An
 * edge that a `--resolve` rule names is its rule's one address, without DNS (resolve-rules.ts).
 */
export async function resolveEndpoints(edges: readonly string[], rules: readonly ResolveRule[] = []): Promise<EdgeEndpoint[]> {
  const resolved = await Promise.all(
    edges.map(async (edge): Promise<EdgeEndpoint[]> => {
      const url = new URL(edge);
      const rule = resolveRuleFor(rules, url);
      if (rule !== undefined) return [{ edge, address: rule.address }];
      const hostname = url.hostname.replace(/^\[|\]$/g, '');
      if (isIP(hostname) !== 0 || isLoopbackHost(hostname)) return [{ edge, address: null }];
      const addresses = await resolveAll(hostname);
      if (addresses.length <= 1) return [{ edge, address: null }];
      return addresses.map((address) => ({ edge, address }));
    }),
  );
  return resolved.flat();
}
