/**
 * Host dispatch (DESIGN.md section 1): which part of the edge a request's Host header names.
 *
 * `<domain>` and `api.<domain>` are the API; so are IP literals and a missing Host, since an address
 * can never carry a tunnel's subdomain (so `curl 127.0.0.1:8080/api/v1/...` works). `<label>.<domain>`
 * is a tunnel. Anything else is unknown and answered 404.
 */

export type HostTarget = { kind: 'api' } | { kind: 'tunnel'; subdomain: string } | { kind: 'unknown' };

const API: HostTarget = Object.freeze({ kind: 'api' });
const UNKNOWN: HostTarget = Object.freeze({ kind: 'unknown' });
const IPV4 = /^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$/;
const IPV6_LITERAL = /^\[[0-9a-f:.]{2,45}\](?::[0-9]{1,5})?$/;
const LABEL = /^[a-z0-9-]{1,63}$/;

export class HostDispatch {
  private readonly suffix: string;

  constructor(private readonly domain: string) {
    this.suffix = `.${domain}`;
  }

  resolve(hostHeader: string): HostTarget {
    if (hostHeader.length === 0) return API;
    if (hostHeader.length > 300) return UNKNOWN;
    let host = hostHeader.toLowerCase();
    if (host.charCodeAt(0) === 91 /* [ */) {
      // An IPv6 literal, with or without a port; anything else in brackets is not a host.
      return IPV6_LITERAL.test(host) ? API : UNKNOWN;
    }
    const colon = host.lastIndexOf(':');
    if (colon !== -1) {
      if (!/^[0-9]{1,5}$/.test(host.slice(colon + 1))) return UNKNOWN;
      host = host.slice(0, colon);
    }
    if (host.endsWith('.')) host = host.slice(0, -1);
    if (host === this.domain || host === `api${this.suffix}`) return API;
    if (IPV4.test(host)) return API;
    if (!host.endsWith(this.suffix)) return UNKNOWN;
    const label = host.slice(0, host.length - this.suffix.length);
    if (!LABEL.test(label)) return UNKNOWN;
    return { kind: 'tunnel', subdomain: label };
  }
}
