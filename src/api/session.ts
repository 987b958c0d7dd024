/**
 * The dashboard's session cookie and its CSRF rule (docs/dashboard.md).
 *
 * The cookie is host-only (no Domain), HttpOnly, SameSite=Strict, Path=/, and Secure when the edge is on
 * HTTPS. SameSite alone is not enough here: every tunnel is `<sub>.<domain>`, the same *site* as the API
 * host, so a page served through any tunnel could send same-site requests carrying the cookie. Hence the
 * rule for every state-changing request authenticated by the cookie (and for sign-in): the Origin header
 * must be exactly the API host's own origin, and the custom header `X-Burrow-CSRF: 1` must be present
 * (a cross-origin page cannot add it without a CORS preflight, which the edge never grants).
 */
import { BurrowError } from '../errors.js';
import type { ApiRequest } from './types.js';

export const SESSION_COOKIE = 'burrow_session';
export const CSRF_HEADER = 'x-burrow-csrf';

/** The session id of the request's cookie header, or null. */
export function sessionIdOf(cookieHeader: string | undefined): string | null {
  if (cookieHeader === undefined || cookieHeader === '') return null;
  for (const part of cookieHeader.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    if (part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim();
  }
  return null;
}

export function isStateChanging(method: string): boolean {
  return method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS';
}

/** Refuses (403 CSRF_REJECTED) a request whose Origin is not the API host's own or that lacks the custom header. */
export function checkCsrf(req: ApiRequest, defaultScheme: string): void {
  const scheme = req.scheme ?? defaultScheme;
  const host = (req.headers.host ?? '').toLowerCase();
  const origin = req.headers.origin ?? '';
  if (origin === '' || host === '' || origin.toLowerCase() !== `${scheme}://${host}`) {
    throw new BurrowError('CSRF_REJECTED', `A request with the dashboard's session must come from its own page: the Origin header must be ${scheme}://${host || '<host>'}.`);
  }
  if (req.headers[CSRF_HEADER] !== '1') {
    throw new BurrowError('CSRF_REJECTED', 'A request with the dashboard\'s session must carry the header "X-Burrow-CSRF: 1".');
  }
}

export function sessionCookie(id: string, maxAgeMs: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${Math.floor(maxAgeMs / 1000)}${secure ? '; Secure' : ''}`;
}

export function clearedSessionCookie(secure: boolean): string {
  return `${SESSION_COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0${secure ? '; Secure' : ''}`;
}
