/**
 * The Host a local server sees (`--host-header`, DESIGN.md section 5b): by default the public Host, as
 * the edge received it, for plain HTTP and WebSocket alike; `rewrite` sends the local target's
 * host:port (for dev servers that check Host: Vite, Django's ALLOWED_HOSTS, Rails), any other value
 * is sent as given. X-Forwarded-Host carries the public host either way.
 */
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
 * Request headers for the local server: `expect` left out (undici refuses it; 100-continue is the
 * edge↔public client's business), Host per `mode`, X-Forwarded-Host kept or added with the public host.
 * Returns `headers` itself when nothing changes.
 */
export function localRequestHeaders(headers: string[], target: LocalTarget, mode: HostHeader): string[] {
  const host = hostFor(target, mode);
  let touched = host !== null;
  if (!touched) for (let i = 0; i < headers.length; i += 2) if (headers[i] === 'expect') touched = true;
  if (!touched) return headers;
  const kept: string[] = [];
  let publicHost: string | null = null;
  let forwardedHost = false;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    if (name === 'expect') continue;
    if (name === 'x-forwarded-host') forwardedHost = true;
    if (name === 'host' && host !== null) {
      publicHost = value;
      kept.push(name, host);
      continue;
    }
    kept.push(name, value);
  }
  if (host !== null && publicHost === null) kept.push('host', host);
  if (publicHost !== null && !forwardedHost) kept.push('x-forwarded-host', publicHost);
  return kept;
}
