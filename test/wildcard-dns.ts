/**
 * Wildcard DNS for tests, as an edge's operator sets it up (`A <domain>` and `A *.<domain>`): names
 * under `burrow.test` (RFC 2606's reserved .test), and `dashboard.test`, resolve to 127.0.0.1 in this process. Imported by
 * TLS tests, and preloaded into CLI subprocesses with NODE_OPTIONS=--import (see tlsCliEnv), so
 * certificates are verified against the real names rather than an address.
 */
import dns from 'node:dns';

export const TEST_DOMAIN = 'burrow.test';
/** An API host on another registrable domain than the tunnels' (`burrow edge --api-host`). */
export const TEST_API_HOST = 'dashboard.test';

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | dns.LookupAddress[], family?: number) => void;

const original = dns.lookup;
function isTestName(hostname: string): boolean {
  return hostname === TEST_DOMAIN || hostname.endsWith(`.${TEST_DOMAIN}`) || hostname === TEST_API_HOST;
}

const patched = function lookup(hostname: string, options: unknown, callback?: LookupCallback): void {
  const done = (typeof options === 'function' ? options : callback) as LookupCallback;
  const all = typeof options === 'object' && options !== null && (options as { all?: boolean }).all === true;
  if (!isTestName(hostname)) {
    (original as unknown as (...args: unknown[]) => void).call(dns, hostname, options, callback);
    return;
  }
  if (all) process.nextTick(done, null, [{ address: '127.0.0.1', family: 4 }]);
  else process.nextTick(done, null, '127.0.0.1', 4);
};
(dns as unknown as { lookup: unknown }).lookup = patched;
