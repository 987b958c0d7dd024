/**
 * A resolver that would answer otherwise: in this process every dns.lookup of a name (addresses pass
 * through) is written down and answered with ENOTFOUND, so a connection that asks the resolver fails and the name shows in `resolverCalls`.
 * Preloaded into CLI subprocesses with NODE_OPTIONS=--import (hostileDnsEnv), which append each name
 * asked to the file in HOSTILE_DNS_LOG.
 */
import { appendFileSync } from 'node:fs';
import dns from 'node:dns';
import { isIP } from 'node:net';
import { fileURLToPath } from 'node:url';

export const resolverCalls: string[] = [];

const original = dns.lookup;
const hostile = function lookup(hostname: string, options: unknown, callback?: (...args: unknown[]) => void): void {
  // An address is not a name: listening on 127.0.0.1 passes through.
  if (isIP(hostname) !== 0) {
    (original as unknown as (...args: unknown[]) => void).call(dns, hostname, options, callback);
    return;
  }
  const done = (typeof options === 'function' ? options : callback) as (...args: unknown[]) => void;
  resolverCalls.push(hostname);
  if (process.env.HOSTILE_DNS_LOG !== undefined) appendFileSync(process.env.HOSTILE_DNS_LOG, `${hostname}\n`);
  const error = Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname });
  process.nextTick(done, error);
};
(dns as unknown as { lookup: unknown }).lookup = hostile;

/** Environment for a CLI subprocess that resolves through the hostile resolver, logging to `log`. */
export function hostileDnsEnv(log: string): { NODE_OPTIONS: string; HOSTILE_DNS_LOG: string } {
  return { NODE_OPTIONS: `--import=${fileURLToPath(new URL('./hostile-dns.js', import.meta.url))}`, HOSTILE_DNS_LOG: log };
}
