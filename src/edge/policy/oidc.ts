/**
 * `--oidc ISSUER --oidc-client-id ID --oidc-client-secret S`: the edge is an OpenID Connect relying party
 * on the tunnel's own host, through `openid-client` (panva): the authorization-code flow with PKCE
 * (S256), state and nonce, run on a reserved path (`/.burrow/oidc/callback`).
 *
 * Transport-free: `start`, `callback` and `signOut` are functions of a request (method, target, header
 * fields, scheme, host) to a response (status, fields, body); the public listener calls them.
 *
 * Cookies (both sealed with the edge's secret key, AES-256-GCM, their purpose naming the host, so a cookie
 * from one tunnel does not open on another):
 * - `burrow_oidc_flow`: the flow's PKCE verifier, state, nonce and the page to return to; Path=/.burrow/oidc/,
 *   10 minutes, HttpOnly, SameSite=Lax (the provider's redirect back is a top-level GET, which Lax allows).
 * - `burrow_oidc`: the signed-in e-mail address and the session's end; Path=/, HttpOnly, SameSite=Lax,
 *   Secure on HTTPS, Max-Age the session's length (12 hours by default).
 * Neither reaches the local server: the edge removes them from the Cookie header it forwards.
 */
import * as client from 'openid-client';
import { IDENTITY_HEADER, isLoopbackHostname, OIDC_PATH_PREFIX } from '../../protocol/policy.js';
import type { SecretBox } from '../../store/secret-box.js';
import { fieldValue } from './webhooks.js';

export const SESSION_COOKIE = 'burrow_oidc';
export const FLOW_COOKIE = 'burrow_oidc_flow';
export const CALLBACK_PATH = `${OIDC_PATH_PREFIX}callback`;
export const SIGN_OUT_PATH = `${OIDC_PATH_PREFIX}sign-out`;
export const DEFAULT_SESSION_MS = 12 * 3_600_000;
const FLOW_MS = 10 * 60_000;
const SESSION_CACHE = 1024;

export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  allowEmail: readonly string[];
  allowDomain: readonly string[];
}

export interface PolicyHttpRequest {
  method: string;
  target: string;
  fields: readonly string[];
  scheme: 'http' | 'https';
  /** The Host the client used (the tunnel's public host, with a port when it has one). */
  host: string;
}

export interface PolicyResponse {
  status: number;
  /** Flat [name, value, ...]. */
  fields: string[];
  body: string;
  /** The error code when the response is a refusal (the listener marks it with `burrow-error`). */
  code?: string;
}

interface FlowState {
  v: string;
  s: string;
  n: string;
  r: string;
  x: number;
}

interface SessionState {
  e: string;
  x: number;
}

/** Cookie values by name from a Cookie header; only the ones asked for. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const equals = part.indexOf('=');
    if (equals !== -1 && part.slice(0, equals).trim() === name) return part.slice(equals + 1).trim();
  }
  return undefined;
}

/** The Cookie header without the edge's own cookies; undefined when nothing is left. */
export function withoutOwnCookies(header: string): string | undefined {
  const kept = header
    .split(';')
    .map((part) => part.trim())
    .filter((part) => {
      const name = part.slice(0, part.indexOf('=')).trim();
      return part !== '' && name !== SESSION_COOKIE && name !== FLOW_COOKIE;
    });
  return kept.length === 0 ? undefined : kept.join('; ');
}

function page(status: number, title: string, text: string, code?: string, extra: string[] = []): PolicyResponse {
  const escape = (value: string): string => value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
  const body = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title></head><body><h1>${escape(title)}</h1><p>${escape(text)}</p></body></html>\n`;
  return {
    status,
    fields: ['content-type', 'text/html; charset=utf-8', 'cache-control', 'no-store', ...extra],
    body,
    ...(code === undefined ? {} : { code }),
  };
}

export class OidcGate {
  private configuration: Promise<client.Configuration> | null = null;
  private readonly sessions = new Map<string, SessionState>();

  constructor(
    private readonly settings: OidcSettings,
    private readonly box: SecretBox,
    private readonly options: { sessionMs?: number; clock?: () => number } = {},
  ) {}

  private now(): number {
    return (this.options.clock ?? Date.now)();
  }

  /** Whether a path is the edge's own (callback, sign-out): never forwarded. */
  static owns(target: string): boolean {
    return target.startsWith(OIDC_PATH_PREFIX);
  }

  /** The signed-in e-mail of a request's session cookie, or null. Synchronous: a cache, else one AES-GCM open. */
  signedIn(request: PolicyHttpRequest): string | null {
    const sealed = cookieValue(fieldValue(request.fields, 'cookie'), SESSION_COOKIE);
    if (sealed === undefined) return null;
    let state = this.sessions.get(sealed);
    if (state === undefined) {
      const opened = this.box.open(sealed, `oidc-session:${request.host.toLowerCase()}`);
      if (opened === null) return null;
      try {
        state = JSON.parse(opened) as SessionState;
      } catch {
        return null;
      }
      if (this.sessions.size >= SESSION_CACHE) this.sessions.delete(this.sessions.keys().next().value!);
      this.sessions.set(sealed, state);
    }
    if (state.x <= this.now()) {
      this.sessions.delete(sealed);
      return null;
    }
    return state.e;
  }

  /** The request headers' extra pair for the local server: the signed-in e-mail. */
  static identityFields(email: string): string[] {
    return [IDENTITY_HEADER, email];
  }

  /** Handles the edge's own paths: the callback and sign-out. */
  async handle(request: PolicyHttpRequest): Promise<PolicyResponse> {
    const path = request.target.split('?')[0]!;
    if (path === CALLBACK_PATH) return this.callback(request);
    if (path === SIGN_OUT_PATH) return this.signOut(request);
    return page(404, 'Not found', 'No such sign-in page.');
  }

  /** Begins a sign-in: a redirect to the provider, with the flow's state in a sealed cookie. */
  async start(request: PolicyHttpRequest): Promise<PolicyResponse> {
    let configuration: client.Configuration;
    try {
      configuration = await this.discover();
    } catch (error) {
      return page(502, 'Sign-in unavailable', `The identity provider ${this.settings.issuer} could not be reached: ${(error as Error).message}`, 'SIGN_IN_FAILED');
    }
    const verifier = client.randomPKCECodeVerifier();
    const flow: FlowState = {
      v: verifier,
      s: client.randomState(),
      n: client.randomNonce(),
      r: returnPath(request.target),
      x: this.now() + FLOW_MS,
    };
    const location = client.buildAuthorizationUrl(configuration, {
      redirect_uri: this.redirectUri(request),
      scope: 'openid email',
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state: flow.s,
      nonce: flow.n,
    });
    const cookie = this.cookie(FLOW_COOKIE, this.box.seal(JSON.stringify(flow), `oidc-flow:${request.host.toLowerCase()}`), request, OIDC_PATH_PREFIX, FLOW_MS);
    return { status: 302, fields: ['location', location.href, 'set-cookie', cookie, 'cache-control', 'no-store'], body: '' };
  }

  private async callback(request: PolicyHttpRequest): Promise<PolicyResponse> {
    const clearFlow = ['set-cookie', this.cookie(FLOW_COOKIE, '', request, OIDC_PATH_PREFIX, 0)];
    const sealed = cookieValue(fieldValue(request.fields, 'cookie'), FLOW_COOKIE);
    const opened = sealed === undefined ? null : this.box.open(sealed, `oidc-flow:${request.host.toLowerCase()}`);
    let flow: FlowState | null = null;
    try {
      flow = opened === null ? null : (JSON.parse(opened) as FlowState);
    } catch {
      flow = null;
    }
    if (flow === null || flow.x <= this.now()) {
      return page(400, 'Sign-in expired', 'This sign-in was not started here or took too long. Open the page again to sign in.', 'INVALID_REQUEST', clearFlow);
    }
    let email: string;
    try {
      const configuration = await this.discover();
      const tokens = await client.authorizationCodeGrant(configuration, new URL(`${request.scheme}://${request.host}${request.target}`), {
        pkceCodeVerifier: flow.v,
        expectedState: flow.s,
        expectedNonce: flow.n,
        idTokenExpected: true,
      });
      const claims = tokens.claims()!;
      let found = claims as { email?: unknown; email_verified?: unknown };
      if (typeof claims.email !== 'string') found = await client.fetchUserInfo(configuration, tokens.access_token, claims.sub);
      if (typeof found.email !== 'string') return page(403, 'Not allowed', 'The identity provider did not give an e-mail address.', 'SIGN_IN_FORBIDDEN', clearFlow);
      if (found.email_verified === false) return page(403, 'Not allowed', `The e-mail address ${found.email} is not verified.`, 'SIGN_IN_FORBIDDEN', clearFlow);
      email = found.email.toLowerCase();
    } catch (error) {
      const status = error instanceof client.ResponseBodyError || error instanceof client.AuthorizationResponseError ? 502 : 400;
      return page(status, 'Sign-in failed', `The sign-in did not complete: ${(error as Error).message}`, 'SIGN_IN_FAILED', clearFlow);
    }
    if (!this.allows(email)) {
      return page(403, 'Not allowed', `${email} is not allowed on this tunnel.`, 'SIGN_IN_FORBIDDEN', clearFlow);
    }
    const sessionMs = this.options.sessionMs ?? DEFAULT_SESSION_MS;
    const session: SessionState = { e: email, x: this.now() + sessionMs };
    const cookie = this.cookie(SESSION_COOKIE, this.box.seal(JSON.stringify(session), `oidc-session:${request.host.toLowerCase()}`), request, '/', sessionMs);
    return { status: 303, fields: ['location', flow.r, 'set-cookie', cookie, ...clearFlow, 'cache-control', 'no-store'], body: '' };
  }

  private signOut(request: PolicyHttpRequest): PolicyResponse {
    return page(200, 'Signed out', 'You are signed out of this tunnel.', undefined, ['set-cookie', this.cookie(SESSION_COOKIE, '', request, '/', 0)]);
  }

  /** Whether a signed-in address may pass: no lists means any verified address of the provider. */
  allows(email: string): boolean {
    const { allowEmail, allowDomain } = this.settings;
    if (allowEmail.length === 0 && allowDomain.length === 0) return true;
    if (allowEmail.includes(email)) return true;
    const domain = email.slice(email.lastIndexOf('@') + 1);
    return allowDomain.includes(domain);
  }

  private redirectUri(request: PolicyHttpRequest): string {
    return `${request.scheme}://${request.host}${CALLBACK_PATH}`;
  }

  private cookie(name: string, value: string, request: PolicyHttpRequest, path: string, maxAgeMs: number): string {
    const secure = request.scheme === 'https' ? '; Secure' : '';
    return `${name}=${value}; Path=${path}; Max-Age=${Math.floor(maxAgeMs / 1000)}; HttpOnly; SameSite=Lax${secure}`;
  }

  /** The provider's metadata, fetched once; a failure is not kept, so the next sign-in tries again. */
  private discover(): Promise<client.Configuration> {
    if (this.configuration === null) {
      const issuer = new URL(this.settings.issuer);
      const insecure = issuer.protocol === 'http:' && isLoopbackHostname(issuer.hostname);
      this.configuration = client
        .discovery(issuer, this.settings.clientId, this.settings.clientSecret, undefined, insecure ? { execute: [client.allowInsecureRequests] } : undefined)
        .catch((error: unknown) => {
          this.configuration = null;
          throw error;
        });
    }
    return this.configuration;
  }
}

/** Where to return after signing in: the requested path, never another origin. */
function returnPath(target: string): string {
  if (!target.startsWith('/') || target.startsWith('//') || target.startsWith(OIDC_PATH_PREFIX)) return '/';
  return target;
}
