/**
 * Where a request goes: `--route PREFIX=TARGET` rules, the longest prefix that matches on a
 * path-segment boundary wins ("/api" takes "/api" and "/api/x", not "/apix"), else the default target.
 * A target is `[scheme://][host:]port` (http or https; the host defaults to localhost). The client only
 * ever dials these targets, whatever a frame says.
 */

export interface LocalTarget {
  scheme: 'http' | 'https';
  /** A name or an address as given; an IPv6 address without brackets. */
  host: string;
  port: number;
  /** scheme://host:port (IPv6 in brackets): what is printed, and the key of the target's pool. */
  origin: string;
  /** host:port (IPv6 in brackets): the Host header `--host-header rewrite` sends. */
  authority: string;
}

/** A rule as given: a port on localhost, or a whole target. */
export interface Route {
  prefix: string;
  port: number;
  target?: LocalTarget;
  /** `--strip-prefix`: the local server sees the path without the prefix ("/api/x" → "/x"). */
  stripPrefix?: boolean;
}

export interface ResolvedRoute {
  prefix: string;
  target: LocalTarget;
  /** The target's port (for callers that show routes by port). */
  port: number;
  stripPrefix?: boolean;
}

export function localTarget(port: number, host = 'localhost', scheme: 'http' | 'https' = 'http'): LocalTarget {
  const bracketed = host.includes(':') ? `[${host}]` : host;
  const authority = `${bracketed}:${port}`;
  return { scheme, host, port, origin: `${scheme}://${authority}`, authority };
}

export class RouteTable {
  readonly defaultTarget: LocalTarget;
  /** Longest prefix first. */
  private readonly routes: ResolvedRoute[];

  constructor(defaultTarget: number | LocalTarget, routes: Route[] = []) {
    this.defaultTarget = typeof defaultTarget === 'number' ? localTarget(defaultTarget) : defaultTarget;
    this.routes = routes
      .map((route) => {
        const target = route.target ?? localTarget(route.port);
        return { prefix: route.prefix, target, port: target.port, ...(route.stripPrefix === true ? { stripPrefix: true } : {}) };
      })
      .sort((a, b) => b.prefix.length - a.prefix.length);
  }

  get defaultPort(): number {
    return this.defaultTarget.port;
  }

  /** Every target the client may dial, one per origin. */
  targets(): LocalTarget[] {
    const byOrigin = new Map<string, LocalTarget>([[this.defaultTarget.origin, this.defaultTarget]]);
    for (const route of this.routes) if (!byOrigin.has(route.target.origin)) byOrigin.set(route.target.origin, route.target);
    return [...byOrigin.values()];
  }

  get rules(): readonly ResolvedRoute[] {
    return this.routes;
  }

  /** The target for a request path (which may carry a query). */
  targetFor(path: string): LocalTarget {
    for (const route of this.routes) {
      if (matches(route.prefix, path)) return route.target;
    }
    return this.defaultTarget;
  }

  /**
   * The target and the path the local server gets: the path as received, or without the route's prefix
   * when the route strips it ("/api" → "/", "/api/x?q=1" → "/x?q=1", "/api?q" → "/?q"). Captures and
   * the inspector keep the public path; only the local hop sees the stripped one.
   */
  resolve(path: string): { target: LocalTarget; path: string } {
    for (const route of this.routes) {
      if (!matches(route.prefix, path)) continue;
      return { target: route.target, path: route.stripPrefix === true ? stripPrefix(route.prefix, path) : path };
    }
    return { target: this.defaultTarget, path };
  }

  /** The port for a request path. */
  portFor(path: string): number {
    return this.targetFor(path).port;
  }
}

function matches(prefix: string, path: string): boolean {
  if (prefix === '/') return true;
  if (!path.startsWith(prefix)) return false;
  if (path.length === prefix.length) return true;
  const next = path.charCodeAt(prefix.length);
  return next === 47 /* / */ || next === 63 /* ? */ || next === 35; /* # */
}

export function stripPrefix(prefix: string, path: string): string {
  if (prefix === '/') return path;
  const rest = path.slice(prefix.length);
  return rest.startsWith('/') ? rest : `/${rest}`;
}

export function parsePort(text: string): number | null {
  if (!/^[0-9]{1,5}$/.test(text)) return null;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : null;
}

const TARGET_FORMS = 'PORT, HOST:PORT or http(s)://HOST:PORT';

/**
 * Parses `[scheme://][host:]port`: "3000", "localhost:3000", "192.168.1.5:8080", "[::1]:3000",
 * "http://localhost:3000", "https://localhost:8443" (a URL without a port takes its scheme's).
 * Returns the reason when it is not one.
 */
export function parseTarget(text: string): LocalTarget | string {
  const bare = parsePort(text);
  if (bare !== null) return localTarget(bare);
  // All digits but not a port (99999, 0): the port is out of range, not missing.
  if (/^[0-9]+$/.test(text)) return `"${text}": the port must be 1 to 65535`;
  const hasScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text);
  if (!hasScheme && !/:[0-9]+$/.test(text)) return `"${text}" is not a target (${TARGET_FORMS}); the port is missing`;
  const portText = /:([0-9]+)$/.exec(text)?.[1];
  if (portText !== undefined && (Number(portText) < 1 || Number(portText) > 65535)) return `"${text}": the port must be 1 to 65535`;
  let url: URL;
  try {
    url = new URL(hasScheme ? text : `http://${text}`);
  } catch {
    return `"${text}" is not a target (${TARGET_FORMS})`;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `"${text}": the local server must be http:// or https://, not ${url.protocol}//`;
  if (url.username !== '' || url.password !== '') return `"${text}": a target has no user or password`;
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '') return `"${text}": a target has no path, query or fragment (use --route PREFIX=TARGET)`;
  const scheme = url.protocol === 'https:' ? 'https' : 'http';
  // URL drops a port equal to the scheme's default: "" then means 80 or 443, given or not.
  const port = url.port === '' ? (scheme === 'https' ? 443 : 80) : Number(url.port);
  if (port < 1 || port > 65535) return `"${text}": the port must be 1 to 65535`;
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  if (host === '') return `"${text}" is not a target (${TARGET_FORMS})`;
  return localTarget(port, host, scheme);
}

/** Parses "PREFIX=TARGET"; returns the reason when it is not one. */
export function parseRoute(text: string): ResolvedRoute | string {
  const equals = text.lastIndexOf('=');
  if (equals <= 0) return `"${text}" is not PREFIX=TARGET`;
  let prefix = text.slice(0, equals);
  const target = parseTarget(text.slice(equals + 1));
  if (typeof target === 'string') return target;
  if (!prefix.startsWith('/')) return `the prefix "${prefix}" must start with "/"`;
  if (/[\s?#]/.test(prefix)) return `the prefix "${prefix}" may not contain spaces, "?" or "#"`;
  if (prefix.length > 1 && prefix.endsWith('/')) prefix = prefix.slice(0, -1);
  return { prefix, target, port: target.port };
}
