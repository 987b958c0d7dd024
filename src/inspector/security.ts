/**
 * The inspector's refusals, as pure functions (DESIGN.md section 6).
 *
 * It binds a loopback address, but a web page elsewhere can still reach it through the user's browser:
 * - DNS rebinding: a hostile name re-resolved to 127.0.0.1 sends Host: evil.example. Only the loopback
 *   names and the bound address literal are accepted as Host, with the inspector's own port.
 * - Cross-site requests: a page can POST to http://localhost:4040 (a form, fetch with no-cors) and open
 *   a WebSocket to it (no CORS there). Every non-GET request and every WebSocket upgrade must come from
 *   the inspector's own origin (or carry no Origin: a CLI, curl), and a non-GET must be JSON, which a form
 *   cannot send and fetch cannot send cross-site without a preflight we never answer.
 */

/** The Host values the inspector accepts: `localhost:PORT`, `127.0.0.1:PORT`, `[::1]:PORT`, and the bound address. */
export function allowedHosts(port: number, boundHost: string): Set<string> {
  const hosts = new Set([`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]);
  const bound = boundHost.includes(':') ? `[${boundHost}]` : boundHost;
  // An IP literal cannot be rebound to another address, so the bound one is as safe as 127.0.0.1.
  if (bound !== 'localhost') hosts.add(`${bound.toLowerCase()}:${port}`);
  return hosts;
}

/** Host names are case-insensitive; nothing else is tolerated (no trailing dot, no missing port). */
export function hostAllowed(host: string, allowed: ReadonlySet<string>): boolean {
  return allowed.has(host.toLowerCase());
}

/** No Origin (not a browser), or exactly the page's own origin. "null" (sandboxed frames, file:) is refused. */
export function originAllowed(origin: string, host: string): boolean {
  return origin === '' || origin.toLowerCase() === `http://${host.toLowerCase()}`;
}

const JSON_MEDIA_TYPE = /^application\/json\s*(;|$)/i;

export function isJsonContentType(value: string): boolean {
  return JSON_MEDIA_TYPE.test(value.trim());
}
