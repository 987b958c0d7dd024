/**
 * How the client finds an edge's address. `localhost` and every `*.localhost` name are this machine
 * (RFC 6761, section 6.3: name resolution APIs "SHOULD always return the IP loopback address" for them):
 * answered here, so no resolver is asked and a hostile one cannot send a token meant for loopback
 * elsewhere. Other names go to the system resolver, as net.connect would send them.
 *
 * Used by every connection the client makes to an edge: the tunnel's WebSocket (src/client/tunnel-client.ts)
 * and the undici requests of the CLI and the inspector (`edgeDispatcher` in src/cli/edge-ca.ts).
 */
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import { loopbackLookup } from './local-connector.js';

/** `localhost` or a name under it (RFC 6761), trailing dot or not. */
export function isLocalhostName(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  return host === 'localhost' || host.endsWith('.localhost');
}

/** net.connect's `lookup`: loopback for localhost names, the system resolver for the rest. */
export const edgeLookup = ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void): void => {
  if (isLocalhostName(hostname)) loopbackLookup(hostname, options, callback as Parameters<typeof loopbackLookup>[2]);
  // Through the module object, as net itself looks names up.
  else (dns.lookup as (...args: unknown[]) => void)(hostname, options, callback);
}) as unknown as LookupFunction;
