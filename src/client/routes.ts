/**
 * Which local port a request goes to: `--route PREFIX=PORT` rules, the longest prefix that matches on
 * a path-segment boundary wins ("/api" takes "/api" and "/api/x", not "/apix"), else the default port.
 * The client only ever dials these ports, whatever a frame says.
 */

export interface Route {
  prefix: string;
  port: number;
}

export class RouteTable {
  /** Longest prefix first. */
  private readonly routes: Route[];

  constructor(
    readonly defaultPort: number,
    routes: Route[] = [],
  ) {
    this.routes = [...routes].sort((a, b) => b.prefix.length - a.prefix.length);
  }

  /** All ports the client may dial. */
  ports(): number[] {
    return [...new Set([this.defaultPort, ...this.routes.map((route) => route.port)])];
  }

  get rules(): readonly Route[] {
    return this.routes;
  }

  /** The port for a request path (which may carry a query). */
  portFor(path: string): number {
    for (const route of this.routes) {
      if (matches(route.prefix, path)) return route.port;
    }
    return this.defaultPort;
  }
}

function matches(prefix: string, path: string): boolean {
  if (prefix === '/') return true;
  if (!path.startsWith(prefix)) return false;
  if (path.length === prefix.length) return true;
  const next = path.charCodeAt(prefix.length);
  return next === 47 /* / */ || next === 63 /* ? */ || next === 35; /* # */
}

export function parsePort(text: string): number | null {
  if (!/^[0-9]{1,5}$/.test(text)) return null;
  const port = Number(text);
  return port >= 1 && port <= 65535 ? port : null;
}

/** Parses "PREFIX=PORT"; returns the reason when it is not one. */
export function parseRoute(text: string): Route | string {
  const equals = text.lastIndexOf('=');
  if (equals <= 0) return `"${text}" is not PREFIX=PORT`;
  let prefix = text.slice(0, equals);
  const port = parsePort(text.slice(equals + 1));
  if (port === null) return `"${text.slice(equals + 1)}" is not a port (1 to 65535)`;
  if (!prefix.startsWith('/')) return `the prefix "${prefix}" must start with "/"`;
  if (/[\s?#]/.test(prefix)) return `the prefix "${prefix}" may not contain spaces, "?" or "#"`;
  if (prefix.length > 1 && prefix.endsWith('/')) prefix = prefix.slice(0, -1);
  return { prefix, port };
}
