/**
 * Host dispatch (DESIGN.md section 1): which part of the edge a request's Host header names.
 *
 * `<domain>` and `api.<domain>` are the API; so are IP literals and a missing Host, since an address
 * can never carry a tunnel's subdomain (so `curl 127.0.0.1:8080/api/v1/...` works). `<label>.<domain>`
 * is a tunnel. Anything else is unknown and answered 404.
 *
 * With an API host of its own (`burrow edge --api-host HOST`, on a registrable domain other than the
 * tunnels': docs/deploy.md), that host is the API and the dashboard, and `<domain>` / `api.<domain>` stay
 * the API for tokens (clients configured with them keep working) without the dashboard: a page on any
 * `<sub>.<domain>` can set cookies for those, never for the API host.
 */

export type HostTarget = { kind: 'api'; dashboard: boolean } | { kind: 'tunnel'; subdomain: string } | { kind: 'unknown' };

const API: HostTarget = Object.freeze({ kind: 'api', dashboard: true });
const API_WITHOUT_DASHBOARD: HostTarget = Object.freeze({ kind: 'api', dashboard: false });
const UNKNOWN: HostTarget = Object.freeze({ kind: 'unknown' });
const IPV4 = /^[0-9]{1,3}(?:\.[0-9]{1,3}){3}$/;
const IPV6_LITERAL = /^\[[0-9a-f:.]{2,45}\](?::[0-9]{1,5})?$/;
const LABEL = /^[a-z0-9-]{1,63}$/;

export class HostDispatch {
  private readonly suffix: string;
  private readonly apiHost: string | null;
  private readonly domainApi: HostTarget;

  /** `apiHost`: a lower-case host name without port (checked by `apiHostProblem`). */
  constructor(
    private readonly domain: string,
    apiHost?: string,
  ) {
    this.suffix = `.${domain}`;
    this.apiHost = apiHost ?? null;
    this.domainApi = this.apiHost === null ? API : API_WITHOUT_DASHBOARD;
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
    if (host === this.apiHost) return API;
    if (host === this.domain || host === `api${this.suffix}`) return this.domainApi;
    if (IPV4.test(host)) return API;
    if (!host.endsWith(this.suffix)) return UNKNOWN;
    const label = host.slice(0, host.length - this.suffix.length);
    if (!LABEL.test(label)) return UNKNOWN;
    return { kind: 'tunnel', subdomain: label };
  }
}

/**
 * Why `apiHost` cannot be the API host beside tunnels on `domain`, or null: it must be a DNS name (not an
 * address), neither the domain, nor a name under it, nor a parent of it: a tunnel's page can set cookies
 * for all of those. (Another name of the same registrable domain is allowed and documented as weaker:
 * telling which that is needs the public suffix list.)
 */
export function apiHostProblem(apiHost: string, domain: string): string | null {
  const host = apiHost.toLowerCase();
  if (!/^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/.test(host) || IPV4.test(host)) {
    return `--api-host must be a DNS name such as dashboard.example.com, got "${apiHost}"`;
  }
  if (host === domain || host.endsWith(`.${domain}`)) {
    return `--api-host ${host} is under the tunnels' domain ${domain}, where any tunnel's page can set cookies for it; use a name on another registrable domain`;
  }
  if (domain.endsWith(`.${host}`)) {
    return `--api-host ${host} is a parent of the tunnels' domain ${domain}: any tunnel's page can set cookies for it; use a name on another registrable domain`;
  }
  return null;
}
