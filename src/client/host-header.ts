/**
 * The Host a local server sees (`--host-header`, DESIGN.md section 5b): by default the public Host, as
 * the edge received it, for plain HTTP and WebSocket alike; `rewrite` sends the local target's
 * host:port (for dev servers that check Host: Vite, Django's ALLOWED_HOSTS, Rails), any other value
 * is sent as given. X-Forwarded-Host carries the public host either way.
 */
import { isName } from '../protocol/headers.js';
import type { LocalTarget } from './routes.js';

export type HostHeader = 'keep' | 'rewrite' | { value: string };

/** Parses the flag's value: `rewrite`, or a Host value (visible ASCII: a name or address and a port). */
export function parseHostHeader(text: string): HostHeader | { error: string } {
  if (text === 'rewrite') return 'rewrite';
  if (!/^[\x21-\x7e]+$/.test(text)) return { error: `"${text}" is not a Host value; give rewrite or a host such as app.test:3000` };
  return { value: text };
}

/** The Host value sent to `target`, or null to keep the public one. */
export function hostFor(target: LocalTarget, mode: HostHeader): string | null {
  if (mode === 'keep') return null;
  return mode === 'rewrite' ? target.authority : mode.value;
}

/**
 * Request headers for the local server (names of any case, as the public client sent them): Host per
 * `mode`, X-Forwarded-Host kept or added with the public host. Returns `headers` itself when nothing
 * changes.
 */
export function localRequestHeaders(headers: string[], target: LocalTarget, mode: HostHeader): string[] {
  const host = hostFor(target, mode);
  if (host === null) return headers;
  const kept: string[] = [];
  let publicHost: string | null = null;
  let forwardedHost = false;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    if (isName(name, 'x-forwarded-host')) forwardedHost = true;
    if (isName(name, 'host')) {
      publicHost = value;
      kept.push(name, host);
      continue;
    }
    kept.push(name, value);
  }
  if (publicHost === null) kept.push('Host', host);
  if (publicHost !== null && !forwardedHost) kept.push('X-Forwarded-Host', publicHost);
  return kept;
}
