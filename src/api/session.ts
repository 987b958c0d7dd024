/**
 * The dashboard's session cookie and its CSRF rule (docs/dashboard.md). Functions of request headers to
 * a decision, so they do not depend on the listener that read the headers.
 *
 * The cookie is host-only (no Domain), HttpOnly, SameSite=Strict, Path=/. On HTTPS it is named
 * `__Host-burrow_session` and Secure: a browser stores a `__Host-` cookie only from a secure origin, with
 * Path=/ and without Domain, so no other host (a tunnel's page included) can set one that reaches the API
 * host. Plain-HTTP dev mode keeps the name `burrow_session`, which any `<sub>.<domain>` page can set for
 * the whole domain (docs/security.md, "Cookie tossing").
 *
 * A tunnel's page can still toss a `burrow_session` cookie with `Domain=<domain>` and a longer path,
 * which the browser then sends beside (and before) the real one. So a request with more than one
 * session cookie, or with one of the name the other scheme uses, authenticates as nobody: it is refused
 * and answered with expired cookies for every name, path and domain the stray one can have had, so the
 * next sign-in starts clean.
 *
 * SameSite alone is not enough against cross-site requests either: every tunnel is `<sub>.<domain>`, the
 * same *site* as the API host, so a page served through any tunnel could send same-site requests
 * carrying the cookie. Hence the rule for every state-changing request authenticated by the cookie (and
 * for sign-in): the Origin header must be exactly the API host's own origin, and the custom header
 * `X-Burrow-CSRF: 1` must be present (a cross-origin page cannot add it without a CORS preflight, which
 * the edge never grants).
 */
import { BurrowError } from '../errors.js';
import type { ApiRequest } from './types.js';

/** The cookie's name over plain HTTP (dev mode). */
export const SESSION_COOKIE = 'burrow_session';
/** The cookie's name over HTTPS: the browser enforces Secure, Path=/ and no Domain for it. */
export const SECURE_SESSION_COOKIE = '__Host-burrow_session';
export const CSRF_HEADER = 'x-burrow-csrf';

export function sessionCookieName(secure: boolean): string {
  return secure ? SECURE_SESSION_COOKIE : SESSION_COOKIE;
}

/**
 * The session cookies a request came with: none, exactly one of the name this scheme uses (`id`), or a
 * conflict (two or more of either name, or one of the other scheme's name), which authenticates nobody.
 */
export type SessionCookies = { kind: 'none' } | { kind: 'one'; id: string } | { kind: 'conflict'; count: number };

const NONE: SessionCookies = Object.freeze({ kind: 'none' });

/** Reads the session cookies of a Cookie header; `secure` says which name this request's scheme uses. */
export function readSessionCookies(cookieHeader: string | undefined, secure: boolean): SessionCookies {
  // Both names contain this; most API requests (Bearer tokens) have no cookie at all.
  if (cookieHeader === undefined || !cookieHeader.includes(SESSION_COOKIE)) return NONE;
  const own = sessionCookieName(secure);
  let count = 0;
  let foreign = 0;
  let id = '';
  for (const part of cookieHeader.split(';')) {
    const eq = part.indexOf('=');
    // A nameless cookie (`=burrow_session=x`) reaches the server as `burrow_session=x`: it counts too.
    const name = (eq === -1 ? part : part.slice(0, eq)).trim();
    if (name === own) {
      count++;
      id = eq === -1 ? '' : part.slice(eq + 1).trim();
    } else if (name === SESSION_COOKIE || name === SECURE_SESSION_COOKIE) foreign++;
  }
  if (count + foreign === 0) return NONE;
  if (count === 1 && foreign === 0) return { kind: 'one', id };
  return { kind: 'conflict', count: count + foreign };
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
  return `${sessionCookieName(secure)}=${id}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${Math.floor(maxAgeMs / 1000)}${secure ? '; Secure' : ''}`;
}

/** Sign-out: the session's own cookie expired. */
export function clearedSessionCookie(secure: boolean): string {
  return `${sessionCookieName(secure)}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0${secure ? '; Secure' : ''}`;
}

/** Paths and domains tried at most: an API path has a handful of segments, a host a few labels. */
const MAX_PATHS = 16;
const MAX_DOMAINS = 6;
const IP_HOST = /^(?:[0-9.]+|\[[0-9a-f:.]+\])$/;

/**
 * Expired `Set-Cookie` values for every session cookie that can have reached this request, so a browser
 * drops each one: a cookie is replaced only by one of the same name, domain and path. A stray cookie
 * sent with this request has a path that is a prefix of the request's path (RFC 6265 path-match) and a
 * Domain that is the host or one of its parent domains, or none; `__Host-` exists only host-only at `/`.
 * With `keepOwn` (sign-in, which sets the new cookie after these), the own host-only `/` cookie is left
 * for the new one to replace.
 */
export function clearingSessionCookies(req: Pick<ApiRequest, 'path' | 'headers'>, secure: boolean, keepOwn = false): string[] {
  const flags = `; HttpOnly; SameSite=Strict; Max-Age=0${secure ? '; Secure' : ''}`;
  const cookies: string[] = [];
  if (secure && !keepOwn) cookies.push(`${SECURE_SESSION_COOKIE}=; Path=/${flags}`);
  const domains = [null, ...parentDomains(hostnameOf(req.headers.host ?? ''))];
  for (const path of pathPrefixes(req.path)) {
    for (const domain of domains) {
      if (keepOwn && !secure && domain === null && path === '/') continue;
      cookies.push(`${SESSION_COOKIE}=; Path=${path}${domain === null ? '' : `; Domain=${domain}`}${flags}`);
    }
  }
  return cookies;
}

/** `/api/v1/x` → `/`, `/api`, `/api/`, `/api/v1`, `/api/v1/`, `/api/v1/x` (the paths that path-match it). */
function pathPrefixes(path: string): string[] {
  const prefixes = ['/'];
  if (!path.startsWith('/')) return prefixes;
  for (let slash = path.indexOf('/', 1); prefixes.length < MAX_PATHS; slash = path.indexOf('/', slash + 1)) {
    const end = slash === -1 ? path.length : slash;
    if (end > 1) prefixes.push(path.slice(0, end));
    if (slash === -1) break;
    if (slash + 1 < path.length) prefixes.push(path.slice(0, slash + 1));
  }
  return [...new Set(prefixes)].filter(isCookiePath);
}

/** A path a Set-Cookie header can carry: no `;`, no control characters. */
function isCookiePath(path: string): boolean {
  return /^\/[\x21-\x3a\x3c-\x7e]*$/.test(path);
}

function hostnameOf(host: string): string {
  const lower = host.toLowerCase();
  if (lower.startsWith('[')) return lower.slice(0, lower.indexOf(']') + 1);
  const colon = lower.lastIndexOf(':');
  return (colon === -1 ? lower : lower.slice(0, colon)).replace(/\.$/, '');
}

/**
 * The host and its parent domains, nearest first (a browser ignores the expiry of a cookie for a public
 * suffix such as `com`, as it refused to store one).
 */
function parentDomains(hostname: string): string[] {
  if (hostname === '' || IP_HOST.test(hostname) || !/^[a-z0-9.-]+$/.test(hostname)) return [];
  const labels = hostname.split('.');
  const domains: string[] = [];
  for (let first = 0; first < labels.length && domains.length < MAX_DOMAINS; first++) domains.push(labels.slice(first).join('.'));
  return domains;
}
