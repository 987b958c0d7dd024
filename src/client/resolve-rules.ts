/**
 * `--resolve HOST:PORT:ADDRESS` (curl's syntax): connect to ADDRESS whenever the edge URL names HOST and
 * PORT, without asking DNS. Only the address changes: the URL, the Host header, the TLS server name and
 * the certificate check keep HOST, so an edge can be tried over HTTPS before its DNS records exist (or
 * reached at another address than DNS says), its certificate still verified for its name.
 */
import type { LookupAddress } from 'node:dns';
import { isIP } from 'node:net';

export interface ResolveRule {
  /** Lower case, without brackets or a trailing dot. */
  host: string;
  port: number;
  address: LookupAddress;
}

/** A rule from `HOST:PORT:ADDRESS` (ADDRESS an IPv4 or IPv6 literal, the latter optionally in brackets), or why not. */
export function parseResolveRule(text: string): ResolveRule | string {
  const first = text.indexOf(':');
  const second = first === -1 ? -1 : text.indexOf(':', first + 1);
  if (second === -1) return `"${text}" is not HOST:PORT:ADDRESS (e.g. tunnels.example.com:443:203.0.113.7)`;
  const host = normaliseHost(text.slice(0, first));
  const portText = text.slice(first + 1, second);
  const address = text.slice(second + 1).replace(/^\[(.*)\]$/, '$1');
  if (host === '' || host.includes('*')) return `"${text}": HOST must be a name (no wildcard), as it appears in the edge URL`;
  const port = /^[0-9]{1,5}$/.test(portText) ? Number(portText) : 0;
  if (port < 1 || port > 65535) return `"${text}": PORT must be 1 to 65535 (443 for an https:// edge without a port)`;
  const family = isIP(address);
  if (family === 0) return `"${text}": ADDRESS must be an IPv4 or IPv6 address, not "${address}"`;
  return { host, port, address: { address, family } };
}

/** The rule for `url`'s host and port (its scheme's default port when it has none), if any. */
export function resolveRuleFor(rules: readonly ResolveRule[], url: URL): ResolveRule | undefined {
  if (rules.length === 0) return undefined;
  const host = normaliseHost(url.hostname);
  const port = url.port === '' ? (url.protocol === 'https:' || url.protocol === 'wss:' ? 443 : 80) : Number(url.port);
  return rules.find((rule) => rule.host === host && rule.port === port);
}

function normaliseHost(host: string): string {
  return host.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
}

/**
 * A failed name lookup said as such (ENOTFOUND: no such name; EAI_AGAIN: DNS did not answer), with what
 * to check, or null for any other failure: "is the edge running?" is the wrong question for a name
 * that does not resolve.
 */
export function describeLookupFailure(code: string | undefined, edge: string): string | null {
  if (code !== 'ENOTFOUND' && code !== 'EAI_AGAIN' && code !== 'EAI_FAIL' && code !== 'EAI_NONAME') return null;
  const url = new URL(edge);
  const port = url.port === '' ? (url.protocol === 'https:' ? '443' : '80') : url.port;
  const what = code === 'EAI_AGAIN' ? 'could not be looked up now: DNS did not answer' : 'does not resolve';
  return `the name ${url.hostname} ${what} (${code}); check the edge URL and its DNS records, or dial an address without DNS with --resolve ${url.hostname}:${port}:ADDRESS`;
}
