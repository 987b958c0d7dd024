/**
 * The `/api/v1` of the spec, section 4, plus Burrow's documented extensions (docs/api.md).
 *
 * `handle()` is a plain async function of an ApiRequest: route, authenticate, rate-limit, run the
 * handler, and map every failure to the spec's error shape. It owns no sockets.
 */
import { BurrowError, ERROR_CODES } from '../errors.js';
import { bodyJson, headerPairs, rejectionOf } from '../exchange-json.js';
import { idSegmentOfTokenId, nowIso } from '../ids.js';
import { subdomainProblem } from '../subdomain.js';
import { connectionRecordKind, type CaptureRecord, type CaptureStore, type CaptureSummary } from '../store/captures.js';
import type { DashboardSessions, SessionOptions, SessionRecord } from '../store/account-store.js';
import type { AccountStore, Principal, ReservationRecord, UsageCounter, RateLimiter } from '../store/account-store.js';
import { parsePolicySpec, policySummary, policyView } from '../protocol/policy.js';
import type { SecretBox } from '../store/secret-box.js';
import { storePolicy } from '../store/stored-policy.js';
import { periodOf } from '../store/usage.js';
import { isWriteFailure, storageFullError, type WriteFailures } from '../store/write-failures.js';
import { intParam, json, NO_CONTENT, queryParams, readJsonObject } from './http.js';
import type { RateDecision } from '../store/rate-limit.js';
import { Router } from './router.js';
import { isOfflineMode, type OfflineMode, type OfflineQueueStore } from '../store/offline-queue.js';
import { defineQueueRoutes } from './queue-routes.js';
import { checkCsrf, clearedSessionCookie, clearingSessionCookies, isStateChanging, readSessionCookies, sessionCookie } from './session.js';
import type { ApiRequest, ApiResponse, CaptureLog, ClusterQueueView, HeaderPairs, InstanceInfo, QueueDriver, ReplayOverrides, TunnelDirectory } from './types.js';
import { LocalCaptureLog } from './capture-log.js';

export interface ApiOptions {
  store: AccountStore;
  captures: CaptureStore;
  /** Where captures are read; the edge's own `captures` when absent (cluster mode: every edge's, src/edge/cluster/captures.ts). */
  captureLog?: CaptureLog;
  usage: UsageCounter;
  tunnels: TunnelDirectory;
  instance: InstanceInfo;
  /** Requests per window per token (spec section 8: 100 per minute by default). */
  rateLimit?: number;
  rateWindowMs?: number;
  /** Failed authentications per window per failing credential (token id, or client address). */
  authFailureLimit?: number;
  /** The edge's public scheme: the dashboard's expected Origin, and the cookie's Secure flag on https. */
  publicScheme?: 'http' | 'https';
  /** A tunnel's public URL as the edge prints it (the dashboard shows it). */
  publicUrlOf?: (subdomain: string) => string;
  /** Dashboard session lifetimes and the cap per token (docs/dashboard.md). */
  sessions?: SessionOptions;
  /** Sign-ins (`POST /api/v1/session`) per window per token and per client address: 10 and 30 by default. */
  signInLimits?: { perToken?: number; perAddress?: number };
  /** Webhooks held for offline reserved subdomains (the edge's own LMDB). */
  heldEvents: OfflineQueueStore;
  /** The edge's TCP tunnels' public ports (`--tcp-ports`), which a TCP port's reservation is one of; absent: the edge has none. */
  tcpPorts?: { first: number; last: number };
  /** Cluster mode: the webhooks held in the cluster's Redis, which GET /api/v1/queue lists instead. */
  clusterQueue?: ClusterQueueView;
  /** The edge's secret key: seals the secrets of stored policies (docs/policies.md). Without it a policy with secrets is refused. */
  secrets?: SecretBox;
  /** Told after a reservation's policy changed, so the edge drops what it compiled from the old one. */
  policyChanged?: (subdomain: string) => void;
  /** Delivery of held webhooks (the edge's offline queue); without it events are only listed. */
  queue?: QueueDriver;
  /** Where a write that failed to commit under a handler is counted and logged (issue 23). */
  writeFailures?: WriteFailures;
  clock?: () => number;
}

interface Context {
  req: ApiRequest;
  params: Record<string, string>;
  principal: Principal;
  /** The dashboard session the request came with, when it was authenticated by the cookie. */
  session: { id: string; record: SessionRecord; expiresAt: number } | null;
}

type Handler = (ctx: Context) => ApiResponse | Promise<ApiResponse>;
interface Route {
  handler: Handler;
  public: boolean;
  /** The answer, instead of 401, to a request that carries neither a token nor a session cookie. */
  signedOut?: ApiResponse;
}

export const LABEL_MAX = 64;
/**
 * On every answer of the API host (never a tunnel's): JSON is not to be sniffed into anything else, and
 * no page may frame it. The dashboard's own files carry their fuller policy (src/edge/dashboard.ts).
 */
export const API_SECURITY_HEADERS: readonly (readonly [string, string])[] = Object.freeze([
  ['x-content-type-options', 'nosniff'],
  ['content-security-policy', "default-src 'none'; frame-ancestors 'none'"],
  ['x-frame-options', 'DENY'],
] as const);
/** Sign-ins per window (a minute by default) per token and per client address (docs/dashboard.md). */
export const SIGN_IN_PER_TOKEN = 10;
export const SIGN_IN_PER_ADDRESS = 30;
export const REQUEST_LIST_DEFAULT = 50;
export const REQUEST_LIST_MAX = 1000;
/**
 * `GET /api/v1/requests?q=`: the longest query, and the captures and body bytes one call looks at, at
 * most. 64 MiB of bodies took 50-120 ms on the test machine: one call holds the event loop that long.
 */
export const REQUEST_SEARCH_MAX_LENGTH = 256;
export const REQUEST_SEARCH_SCAN = 1000;
export const REQUEST_SEARCH_BODY_BYTES = 64 * 1024 * 1024;

export class Api {
  private readonly router = new Router<Route>();
  readonly tokenLimiter: RateLimiter;
  readonly failureLimiter: RateLimiter;
  readonly signInTokenLimiter: RateLimiter;
  readonly signInAddressLimiter: RateLimiter;
  private readonly clock: () => number;
  readonly sessions: DashboardSessions;
  private readonly scheme: 'http' | 'https';

  constructor(private readonly options: ApiOptions) {
    this.clock = options.clock ?? Date.now;
    this.sessions = options.store.dashboardSessions(options.sessions);
    this.scheme = options.publicScheme ?? 'http';
    const windowMs = options.rateWindowMs ?? 60_000;
    this.tokenLimiter = options.store.rateLimiter('api', options.rateLimit ?? 100, windowMs, this.clock);
    this.failureLimiter = options.store.rateLimiter('auth-failures', options.authFailureLimit ?? 30, windowMs, this.clock);
    this.signInTokenLimiter = options.store.rateLimiter('sign-in-token', options.signInLimits?.perToken ?? SIGN_IN_PER_TOKEN, windowMs, this.clock);
    this.signInAddressLimiter = options.store.rateLimiter('sign-in-address', options.signInLimits?.perAddress ?? SIGN_IN_PER_ADDRESS, windowMs, this.clock);
    this.defineRoutes();
  }

  /** The API's routes as `METHOD /pattern` (HEAD is answered on every GET route besides). */
  get routes(): readonly { method: string; pattern: string }[] {
    return this.router.routes;
  }

  /** Drops finished rate-limit windows and ended sessions; the edge calls this from its coarse timer. */
  sweep(): void {
    this.tokenLimiter.sweep();
    this.failureLimiter.sweep();
    this.signInTokenLimiter.sweep();
    this.signInAddressLimiter.sweep();
    this.sessions.sweep(this.clock());
  }

  async handle(req: ApiRequest): Promise<ApiResponse> {
    const lookup = this.router.lookup(req.method, req.path);
    if (lookup.kind === 'not-found') return errorResponse(new BurrowError('NOT_FOUND', `No route for ${quoted(req.path)}.`));
    if (lookup.kind === 'method-not-allowed') {
      const allow = lookup.allow.join(', ');
      return errorResponse(
        new BurrowError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${quoted(req.path)}; use ${allow}.`, { Allow: allow }),
      );
    }
    const { handler: route, params } = lookup.match;
    if (route.public) return this.run(route.handler, { req, params, principal: undefined as unknown as Principal, session: null });

    // Not signed in at all is an answer there, not a failed authentication: it counts against nobody.
    if (route.signedOut !== undefined && req.headers.authorization === '' && readSessionCookies(req.headers.cookie, this.secureFor(req)).kind === 'none') return route.signedOut;
    let auth: Awaited<ReturnType<Api['authenticate']>>;
    let rate: RateDecision;
    try {
      auth = await this.authenticate(req);
      if ('refusal' in auth) return auth.refusal;
      rate = await this.tokenLimiter.hit(auth.principal.token.id);
    } catch (error) {
      // The token check and the rate limit read the store: Redis away in cluster mode is 503
      // STORE_UNAVAILABLE, as in the handlers, not an internal error.
      if (error instanceof BurrowError) return errorResponse(error);
      throw error;
    }
    const { principal, session } = auth;
    const rateHeaders = rateLimitHeaders(rate);
    if (!rate.allowed) {
      return errorResponse(
        new BurrowError('RATE_LIMITED', `Rate limit of ${rate.limit} requests per ${this.windowText()} reached.`, {
          'Retry-After': String(rate.resetSeconds),
        }),
        rateHeaders,
      );
    }
    // Best effort: a failed write of last_used_at must not fail the request, nor go unhandled.
    this.options.store.touchToken(principal.token.idSegment, this.clock()).catch(() => {});
    const response = await this.run(route.handler, { req, params, principal, session });
    // A new object: handlers may return shared frozen responses (NO_CONTENT).
    return { ...response, headers: response.headers === undefined ? rateHeaders : [...response.headers, ...rateHeaders] };
  }

  private async run(handler: Handler, ctx: Context): Promise<ApiResponse> {
    try {
      return await handler(ctx);
    } catch (error) {
      if (error instanceof BurrowError) return errorResponse(error);
      // A write that failed to commit (a full disk) and that its store did not answer for already: the
      // offline queue's (delivery, discard, pause); the accounts' stores answer 503 STORAGE_FULL themselves.
      if (isWriteFailure(error)) {
        this.options.writeFailures?.report('queue', error);
        return errorResponse(storageFullError());
      }
      process.stderr.write(`burrow: internal error on ${ctx.req.method} ${ctx.req.path}: ${(error as Error)?.stack ?? error}\n`);
      return errorResponse(new BurrowError('INTERNAL_ERROR'));
    }
  }

  /**
   * The principal, or the 401/403/429 response to send instead. A Bearer token wins; without one, the
   * dashboard's session cookie stands for its token (same rate limit), and a state-changing request
   * with it must pass the CSRF rule first (src/api/session.ts).
   */
  private async authenticate(req: ApiRequest): Promise<{ principal: Principal; session: Context['session'] } | { refusal: ApiResponse }> {
    const secure = this.secureFor(req);
    const cookies = req.headers.authorization === '' && this.servesDashboard(req) ? readSessionCookies(req.headers.cookie, secure) : null;
    if (cookies !== null && cookies.kind === 'conflict') {
      // Tossed by a page on another subdomain, most likely: nobody's session, and every copy cleared.
      const refusal = new BurrowError(
        'UNAUTHORIZED',
        `The request carried ${cookies.count} dashboard session cookies (a page on another host of this domain can set one); ` +
          'none of them is used, all are cleared now. Sign in again.',
      );
      return { refusal: errorResponse(refusal, clearingSessionCookies(req, secure).map(setCookie)) };
    }
    if (cookies !== null && cookies.kind === 'one') {
      if (isStateChanging(req.method)) {
        try {
          checkCsrf(req, this.scheme);
        } catch (error) {
          return { refusal: errorResponse(error as BurrowError) };
        }
      }
      const resolved = await this.sessions.resolve(cookies.id, this.clock());
      if (resolved === undefined) {
        const refusal = new BurrowError('UNAUTHORIZED', 'The dashboard session ended (signed out, expired, or its token was revoked). Sign in again.');
        return { refusal: errorResponse(refusal, [setCookie(clearedSessionCookie(secure))]) };
      }
      return { principal: resolved.principal, session: { id: cookies.id, record: resolved.record, expiresAt: resolved.expiresAt } };
    }
    const outcome = await this.authorize(req.headers.authorization, req.clientAddress);
    return outcome instanceof BurrowError ? { refusal: errorResponse(outcome) } : { principal: outcome, session: null };
  }

  /**
   * Checks an Authorization header: the principal, or the error to answer (401 UNAUTHORIZED, or 429
   * RATE_LIMITED once the failing credential failed too often). Used by the API and by the tunnel endpoint.
   *
   * Failures count against what failed, never against a valid token: a wrong secret or a revoked token
   * against its token id, anything else (no header, another scheme, not a token, an unknown id) against
   * the client address. A valid token is always accepted, so failures of others behind the same NAT or
   * proxy, or a guesser of one's token id, cannot lock anyone out. The secret's 144 random bits, not
   * the limiter, are what make guessing hopeless; the limiter answers persistent failures with 429.
   * Unknown ids count per address so that made-up ids cannot grow the limiter's table without bound.
   */
  async authorize(header: string, clientAddress: string): Promise<Principal | BurrowError> {
    let problem: string;
    let failureKey = `address:${clientAddress}`;
    if (header === '') {
      problem = 'The Authorization header is missing. Send "Authorization: Bearer <token>".';
    } else {
      const match = /^Bearer +(\S+) *$/i.exec(header);
      if (match === null) {
        problem = 'The Authorization header must be "Bearer <token>".';
      } else {
        const outcome = await this.options.store.verify(match[1]!);
        if ('principal' in outcome) return outcome.principal;
        if ('idSegment' in outcome) failureKey = `token:${outcome.idSegment}`;
        problem = 'The token is malformed, unknown or revoked.';
      }
    }
    const failures = await this.failureLimiter.hit(failureKey);
    if (!failures.allowed) return this.tooManyFailures(failures, failureKey.startsWith('token:'));
    return new BurrowError('UNAUTHORIZED', problem, { 'WWW-Authenticate': 'Bearer realm="burrow"' });
  }

  private tooManyFailures(decision: RateDecision, ofToken: boolean): BurrowError {
    const what = ofToken ? 'this token id' : 'this address';
    return new BurrowError('RATE_LIMITED', `Too many failed authentications with ${what}. Wait before trying again.`, {
      'Retry-After': String(decision.resetSeconds),
    });
  }

  private windowText(): string {
    const ms = this.tokenLimiter.windowMs;
    return ms === 60_000 ? 'minute' : `${ms / 1000} seconds`;
  }

  /** Secure cookies when the edge is on HTTPS, or when a trusted proxy says the browser came over HTTPS. */
  private secureFor(req: ApiRequest): boolean {
    return this.scheme === 'https' || req.scheme === 'https';
  }

  /** Off the dashboard's host (`burrow edge --api-host`) the session cookie is ignored and sign-in refused. */
  private servesDashboard(req: ApiRequest): boolean {
    return req.dashboardHost !== false;
  }

  /** Counts a sign-in against `limiter`; 429 RATE_LIMITED past its limit. */
  private async limitSignIn(limiter: RateLimiter, key: string, what: string): Promise<void> {
    const decision = await limiter.hit(key);
    if (decision.allowed) return;
    throw new BurrowError('RATE_LIMITED', `Too many sign-ins with ${what}: ${decision.limit} per ${this.windowText()}. Wait before trying again.`, {
      'Retry-After': String(decision.resetSeconds),
    });
  }

  private retentionOf(principal: Principal): number {
    return this.options.store.planLimits(principal.account.plan).retentionMs;
  }

  private sessionJson(principal: Principal, expiresAt: number | null): Record<string, unknown> {
    return {
      account: { id: principal.account.id, email: principal.account.email, plan: principal.account.plan },
      token_id: principal.token.id,
      expires_at: expiresAt === null ? null : nowIso(expiresAt),
      tunnel_url: this.options.publicUrlOf?.('{subdomain}') ?? null,
    };
  }

  private defineRoutes(): void {
    const { store, tunnels, usage, instance } = this.options;
    const captures = this.options.captureLog ?? new LocalCaptureLog(this.options.captures);
    const add = (method: string, path: string, handler: Handler, isPublic = false, signedOut?: ApiResponse): void => {
      this.router.add(method, path, { handler, public: isPublic, ...(signedOut === undefined ? {} : { signedOut }) });
    };

    add('GET', '/api/v1/instance', ({ req }) =>
      json(200, {
        build: instance.build,
        region: instance.region,
        server_time: nowIso(this.clock()),
        ...(instance.agentUrl === undefined ? {} : { agent_url: instance.agentUrl(req.headers.host ?? '') }),
      }), true);

    // The dashboard's session (docs/dashboard.md): an access token exchanged once for an HttpOnly cookie.
    add('POST', '/api/v1/session', async ({ req }) => {
      if (!this.servesDashboard(req)) throw new BurrowError('NOT_FOUND', 'The dashboard, and its sign-in, are on the API host (burrow edge --api-host), not on this one.');
      checkCsrf(req, this.scheme);
      const body = readJsonObject(req);
      rejectUnknownFields(body, ['token']);
      if (typeof body.token !== 'string' || body.token === '') throw new BurrowError('INVALID_REQUEST', '"token" must be an access token.');
      await this.limitSignIn(this.signInAddressLimiter, req.clientAddress, 'this address');
      const principal = await this.authorize(`Bearer ${body.token}`, req.clientAddress);
      if (principal instanceof BurrowError) throw principal;
      await this.limitSignIn(this.signInTokenLimiter, principal.token.id, 'this token');
      const now = this.clock();
      const secure = this.secureFor(req);
      const cookies = readSessionCookies(req.headers.cookie, secure);
      // Signing in again replaces the browser's session: the old one ends rather than lingering unused.
      if (cookies.kind === 'one') await this.sessions.close(cookies.id);
      const id = await this.sessions.open(principal, now);
      store.touchToken(principal.token.idSegment, now).catch(() => {});
      // Stray session cookies (tossed from another host) are cleared before the new one is set.
      const headers = cookies.kind === 'conflict' ? clearingSessionCookies(req, secure, true).map(setCookie) : [];
      headers.push(setCookie(sessionCookie(id, this.sessions.maxAgeMs, secure)));
      return json(201, this.sessionJson(principal, now + Math.min(this.sessions.idleMs, this.sessions.maxAgeMs)), headers);
    }, true);

    // The dashboard asks on every load whether this browser is signed in: 204 when the request carries
    // neither a token nor a session cookie, so a first visit logs no 401. A session that ended (revoked,
    // idle) is still 401 UNAUTHORIZED, which the page reports as such.
    add('GET', '/api/v1/session', ({ principal, session }) =>
      json(200, this.sessionJson(principal, session === null ? null : session.expiresAt)), false, NO_CONTENT);

    add('DELETE', '/api/v1/session', async ({ req, session }) => {
      if (session !== null) await this.sessions.close(session.id);
      return { status: 204, headers: [setCookie(clearedSessionCookie(this.secureFor(req)))] };
    });

    add('GET', '/api/v1/auth/me', ({ principal: { account } }) =>
      json(200, { id: account.id, email: account.email, plan: account.plan }));

    add('GET', '/api/v1/tokens', async ({ principal }) =>
      json(200, {
        tokens: (await store.listTokens(principal.account.id)).map((token) => ({
          id: token.id,
          label: token.label,
          prefix: token.prefix,
          created_at: nowIso(token.createdAt),
          last_used_at: token.lastUsedAt === null ? null : nowIso(token.lastUsedAt),
        })),
      }));

    add('POST', '/api/v1/tokens', async ({ req, principal }) => {
      const body = readJsonObject(req);
      rejectUnknownFields(body, ['label']);
      const label = validateLabel(body.label);
      const token = await store.createToken(principal.account, label, this.clock());
      return json(201, {
        id: token.id,
        label: token.label,
        prefix: token.prefix,
        token: token.token,
        created_at: nowIso(token.createdAt),
      });
    });

    add('DELETE', '/api/v1/tokens/:id', async ({ params, principal }) => {
      const idSegment = idSegmentOfTokenId(params.id!);
      if (idSegment === null || !(await store.revokeToken(principal.account.id, idSegment, this.clock()))) {
        throw new BurrowError('NOT_FOUND', `No active token ${quoted(params.id!)} on this account.`);
      }
      await tunnels.closeByToken(params.id!);
      return NO_CONTENT;
    });

    add('GET', '/api/v1/tunnels', async ({ principal }) =>
      json(200, {
        tunnels: (await tunnels.listByAccount(principal.account.id)).map((tunnel) => ({
          subdomain: tunnel.subdomain,
          port: tunnel.port,
          started_at: nowIso(tunnel.startedAt),
          token_id: tunnel.tokenId,
          // A pool (--pool) is one name served by several clients: listed once, with how many.
          ...(tunnel.poolMembers !== undefined && tunnel.poolMembers > 1 ? { pool_members: tunnel.poolMembers } : {}),
        })),
      }));

    const ownTunnel = async (subdomain: string, principal: Principal) => {
      const tunnel = await tunnels.get(subdomain);
      if (tunnel === undefined || tunnel.accountId !== principal.account.id) {
        throw new BurrowError('NOT_FOUND', `No active tunnel ${quoted(subdomain)} on this account.`);
      }
      return tunnel;
    };

    add('GET', '/api/v1/tunnels/:subdomain', async ({ params, principal }) => {
      const tunnel = await ownTunnel(params.subdomain!.toLowerCase(), principal);
      return json(200, {
        subdomain: tunnel.subdomain,
        port: tunnel.port,
        started_at: nowIso(tunnel.startedAt),
        token_id: tunnel.tokenId,
        reserved: (await store.getReservation(tunnel.subdomain))?.accountId === principal.account.id,
      });
    });

    add('DELETE', '/api/v1/tunnels/:subdomain', async ({ params, principal }) => {
      const tunnel = await ownTunnel(params.subdomain!.toLowerCase(), principal);
      await tunnels.close(tunnel.subdomain, 'closed-by-api');
      return NO_CONTENT;
    });

    add('GET', '/api/v1/requests', async ({ req, principal }) => {
      const query = queryParams(req);
      const subdomain = query.get('subdomain')?.toLowerCase() ?? null;
      if (subdomain === null || subdomain === '') {
        throw new BurrowError('INVALID_REQUEST', 'The "subdomain" query parameter is required.');
      }
      const limit = intParam(query, 'limit', REQUEST_LIST_DEFAULT, REQUEST_LIST_MAX);
      const before = query.get('before') ?? undefined;
      const q = query.get('q');
      if (q !== null && (q.length < 1 || q.length > REQUEST_SEARCH_MAX_LENGTH)) {
        throw new BurrowError('INVALID_REQUEST', `"q" must be 1 to ${REQUEST_SEARCH_MAX_LENGTH} characters.`);
      }
      const listOptions = {
        limit,
        ...(before === undefined ? {} : { before }),
        retentionMs: this.retentionOf(principal),
        now: this.clock(),
      };
      // Exactly the spec's fields (spec section 2, "Captured request"); a capture the edge refused adds
      // `rejected`, and a TCP or TLS connection's record says how it ended (`error`, docs/tcp.md): Burrow
      // extensions on records the spec's captures never are.
      const summaryJson = (entry: CaptureSummary) => {
        const rejected = rejectionOf(entry.error);
        return {
          id: entry.id,
          method: entry.method,
          path: entry.path,
          status: entry.status,
          duration_ms: entry.durationMs,
          received_at: nowIso(entry.receivedAt),
          ...(rejected === null ? {} : { rejected }),
          ...(connectionRecordKind(entry) !== undefined ? { error: entry.error } : {}),
        };
      };
      if (q !== null) {
        const found = await captures.search(principal.account.id, subdomain, q, { ...listOptions, maxScanned: REQUEST_SEARCH_SCAN, maxBodyBytes: REQUEST_SEARCH_BODY_BYTES });
        if (found === null) throw new BurrowError('NOT_FOUND', `No requests for ${quoted(subdomain)} on this account.`);
        return json(200, { requests: found.matches.map(summaryJson), scanned: found.scanned, next_before: found.resumeBefore });
      }
      const list = await captures.list(principal.account.id, subdomain, listOptions);
      if (list === null) throw new BurrowError('NOT_FOUND', `No requests for ${quoted(subdomain)} on this account.`);
      return json(200, { requests: list.map(summaryJson) });
    });

    const ownCapture = async (id: string, principal: Principal): Promise<CaptureRecord> => {
      const capture = await captures.get(principal.account.id, id, this.retentionOf(principal), this.clock());
      if (capture === null) throw new BurrowError('NOT_FOUND', `No request ${quoted(id)} on this account.`);
      return capture;
    };

    add('GET', '/api/v1/requests/:id', async ({ params, principal }) => json(200, captureJson(await ownCapture(params.id!, principal))));

    add('POST', '/api/v1/requests/:id/replay', async ({ req, params, principal }) => {
      const capture = await ownCapture(params.id!, principal);
      if (connectionRecordKind(capture) !== undefined) {
        throw new BurrowError('INVALID_REQUEST', `${capture.id} is the record of a ${capture.method} connection, not an HTTP request: there is nothing to replay.`);
      }
      const fields = readJsonObject(req, { optional: true });
      const allowTruncated = takeAllowTruncated(fields);
      const overrides = validateReplayOverrides(fields);
      refuseTruncatedReplay(capture.requestTruncated, capture.requestBodySize, overrides, allowTruncated);
      const tunnel = await tunnels.get(capture.subdomain);
      if (tunnel === undefined || tunnel.accountId !== principal.account.id) {
        throw new BurrowError('TUNNEL_OFFLINE', `The tunnel ${capture.subdomain} is not connected; start it with "burrow http" and replay again.`);
      }
      const replayed = await tunnels.replay(capture, overrides);
      // `truncated`: the body sent was the capture cut at the limit (allowed above).
      return json(200, { ...captureJson(replayed), truncated: capture.requestTruncated && overrides.body === undefined });
    });

    add('GET', '/api/v1/billing/summary', async ({ principal: { account } }) => {
      const limits = store.planLimits(account.plan);
      const period = periodOf(this.clock());
      const counts = await usage.current(account.id);
      return json(200, {
        plan: account.plan,
        period: { start: nowIso(period.start), end: nowIso(period.end) },
        usage: {
          active_tokens: await store.countActiveTokens(account.id),
          active_tunnels: (await tunnels.listByAccount(account.id)).length,
          requests: counts.requests,
          bytes_in: counts.bytesIn,
          bytes_out: counts.bytesOut,
        },
        limits: {
          active_tokens: limits.activeTokens,
          active_tunnels: limits.activeTunnels,
          captured_requests_per_tunnel: limits.capturedRequests,
          retention_hours: limits.retentionMs / 3_600_000,
          requests_per_minute: Math.round(this.tokenLimiter.limit * (60_000 / this.tokenLimiter.windowMs)),
          reserved_subdomains: limits.reservedSubdomains,
        },
      });
    });

    add('GET', '/api/v1/reserved-subdomains', async ({ principal }) =>
      json(200, {
        reserved_subdomains: (await store.listReservations(principal.account.id)).map((record) => reservationJson(record)),
      }));

    add('POST', '/api/v1/reserved-subdomains', async ({ req, principal }) => {
      const body = readJsonObject(req);
      rejectUnknownFields(body, ['subdomain', 'offline', 'kind']);
      const kind = reservationKind(body);
      const offline = offlineField(body.offline);
      if (kind !== 'http' && offline !== undefined && offline !== 'off') throw offlineOnlyForHttp(kind);
      const accountId = principal.account.id;
      const subdomain = kind === 'tcp' ? (body.subdomain === undefined ? await this.freeTcpName() : this.tcpReservationName(body.subdomain as string)) : (body.subdomain as string).toLowerCase();
      const problem = kind === 'tcp' ? null : subdomainProblem(subdomain);
      if (problem !== null) throw new BurrowError('INVALID_REQUEST', `Invalid subdomain "${quoted(body.subdomain as string)}": ${problem}.`);
      const existing = await store.getReservation(subdomain);
      if (existing?.accountId === accountId) {
        if ((existing.kind ?? 'http') !== kind) {
          throw new BurrowError('INVALID_REQUEST', `"${subdomain}" is already reserved by this account for ${kindText(existing.kind ?? 'http')}; release it first to reserve it for ${kindText(kind)}.`);
        }
        // Reserving again with "offline" changes the mode (as PATCH does).
        const current = offline === undefined ? existing : ((await store.setOfflineMode(accountId, subdomain, offline)) ?? existing);
        this.options.queue?.changed(subdomain);
        return json(200, reservationJson(current));
      }
      const holder = await tunnels.holderOf(subdomain);
      if (existing !== undefined || (holder !== undefined && holder !== accountId)) {
        throw new BurrowError('SUBDOMAIN_TAKEN', `The ${kind === 'tcp' ? 'port' : 'subdomain'} "${subdomain}" is in use by another account.`);
      }
      // The plan's cap is checked inside the store's write transaction: concurrent requests cannot pass it.
      const cap = store.planLimits(principal.account.plan).reservedSubdomains;
      const record = await store.reserve(accountId, subdomain, this.clock(), cap, offline, kind === 'http' ? undefined : kind);
      return json(201, reservationJson(record));
    });

    add('PATCH', '/api/v1/reserved-subdomains/:subdomain', async ({ req, params, principal }) => {
      const body = readJsonObject(req);
      rejectUnknownFields(body, ['offline']);
      const offline = offlineField(body.offline);
      if (offline === undefined) throw new BurrowError('INVALID_REQUEST', '"offline" is required: "off", "reject" or "queue".');
      const subdomain = params.subdomain!.toLowerCase();
      const kind = (await store.getReservation(subdomain))?.kind;
      if (kind !== undefined && offline !== 'off') throw offlineOnlyForHttp(kind);
      const record = await store.setOfflineMode(principal.account.id, subdomain, offline);
      if (record === undefined) throw new BurrowError('NOT_FOUND', `No reserved subdomain ${quoted(params.subdomain!)} on this account.`);
      this.options.queue?.changed(subdomain);
      return json(200, reservationJson(record));
    });

    add('DELETE', '/api/v1/reserved-subdomains/:subdomain', async ({ params, principal }) => {
      // Names are stored lower-cased, as POST stores them (host names are case-insensitive).
      if (!(await store.releaseReservation(principal.account.id, params.subdomain!.toLowerCase()))) {
        throw new BurrowError('NOT_FOUND', `No reserved subdomain ${quoted(params.subdomain!)} on this account.`);
      }
      this.options.queue?.changed(params.subdomain!.toLowerCase());
      // Its stored policy went with it: a live tunnel on the name falls back to its one-run policy, if any.
      this.options.policyChanged?.(params.subdomain!.toLowerCase());
      return NO_CONTENT;
    });

    const ownReservation = async (principal: Principal, name: string): Promise<ReservationRecord> => {
      const record = await store.getReservation(name.toLowerCase());
      if (record === undefined || record.accountId !== principal.account.id) {
        throw new BurrowError('NOT_FOUND', `No reserved subdomain ${quoted(name)} on this account.`);
      }
      return record;
    };
    const policyJson = (record: ReservationRecord): Record<string, unknown> => ({ subdomain: record.subdomain, policy: policyView(record.policy) });

    add('GET', '/api/v1/reserved-subdomains/:subdomain/policy', async ({ params, principal }) =>
      json(200, policyJson(await ownReservation(principal, params.subdomain!))));

    add('PUT', '/api/v1/reserved-subdomains/:subdomain/policy', async ({ req, params, principal }) => {
      const spec = parsePolicySpec(readJsonObject(req));
      const existing = await ownReservation(principal, params.subdomain!);
      if (existing.kind !== undefined) {
        // The edge reads no HTTP on these tunnels; their CIDR rules are the running tunnel's own (docs/tcp.md).
        throw new BurrowError('INVALID_REQUEST', `The reservation "${existing.subdomain}" (for ${kindText(existing.kind)}) holds no policy: give --allow-cidr and --deny-cidr to burrow ${existing.kind} instead.`);
      }
      const secrets = this.options.secrets;
      if (secrets === undefined && (spec.oidc?.client_secret !== undefined || spec.verify_webhook?.some((hook) => hook.secret !== undefined))) {
        throw new BurrowError('INTERNAL_ERROR', 'This edge has no secret key to seal secrets with.');
      }
      const stored = await storePolicy(spec, existing.policy, secrets!);
      const record = await store.setPolicy(principal.account.id, existing.subdomain, stored);
      if (record === undefined) throw new BurrowError('NOT_FOUND', `No reserved subdomain ${quoted(params.subdomain!)} on this account.`);
      this.options.policyChanged?.(record.subdomain);
      return json(200, policyJson(record));
    });

    add('DELETE', '/api/v1/reserved-subdomains/:subdomain/policy', async ({ params, principal }) => {
      const existing = await ownReservation(principal, params.subdomain!);
      await store.setPolicy(principal.account.id, existing.subdomain, undefined);
      this.options.policyChanged?.(existing.subdomain);
      return NO_CONTENT;
    });

    defineQueueRoutes(add, store, this.options.heldEvents, this.options.queue, this.options.clusterQueue);
  }

  /** `tcp:PORT` for a TCP port's reservation: a port of the edge's `--tcp-ports`, or why not. */
  private tcpReservationName(name: unknown): string {
    const range = this.tcpRange();
    const match = typeof name === 'string' ? /^tcp:([0-9]{1,5})$/i.exec(name.trim()) : null;
    if (match === null) throw new BurrowError('INVALID_REQUEST', `A TCP port's reservation is named tcp:PORT (like tcp:${range.first}), not ${JSON.stringify(name)}.`);
    const port = Number(match[1]);
    if (port < range.first || port > range.last) throw new BurrowError('INVALID_REQUEST', `The port ${port} is not one of this edge's TCP ports (${range.first}-${range.last}).`);
    return `tcp:${port}`;
  }

  /** A port of `--tcp-ports` that nobody has reserved and no other tunnel is live or held on, from a random place in the range. */
  private async freeTcpName(): Promise<string> {
    const { first, last } = this.tcpRange();
    const size = last - first + 1;
    const start = Math.floor(Math.random() * size);
    for (let i = 0; i < size; i++) {
      const name = `tcp:${first + ((start + i) % size)}`;
      if ((await this.options.store.getReservation(name)) === undefined && (await this.options.tunnels.holderOf(name)) === undefined) return name;
    }
    throw new BurrowError('SUBDOMAIN_TAKEN', `Every TCP port of this edge (${first}-${last}) is reserved or in use.`);
  }

  private tcpRange(): { first: number; last: number } {
    const range = this.options.tcpPorts;
    if (range === undefined) throw new BurrowError('INVALID_REQUEST', 'This edge serves no TCP tunnels: it was started without --tcp-ports (docs/tcp.md).');
    return range;
  }
}

type ReservationKind = 'http' | 'tls' | 'tcp';

/** What a POST reserves: `kind` as given, or `tcp` for a `tcp:PORT` name, `http` otherwise. */
function reservationKind(body: Record<string, unknown>): ReservationKind {
  const { kind, subdomain } = body;
  if (kind !== undefined && kind !== 'http' && kind !== 'tls' && kind !== 'tcp') throw new BurrowError('INVALID_REQUEST', '"kind" must be "http", "tls" or "tcp".');
  if (subdomain !== undefined && typeof subdomain !== 'string') throw new BurrowError('INVALID_REQUEST', '"subdomain" must be a string.');
  const named = subdomain?.trim().toLowerCase().startsWith('tcp:') === true ? 'tcp' : undefined;
  if (kind === undefined) {
    if (subdomain === undefined) throw new BurrowError('INVALID_REQUEST', '"subdomain" must be a string.');
    return named ?? 'http';
  }
  if (kind !== 'tcp' && subdomain === undefined) throw new BurrowError('INVALID_REQUEST', '"subdomain" must be a string.');
  if (kind !== 'tcp' && named !== undefined) throw new BurrowError('INVALID_REQUEST', `"${subdomain}" names a TCP port: reserve it with "kind": "tcp".`);
  return kind;
}

function kindText(kind: ReservationKind): string {
  return kind === 'tcp' ? 'TCP tunnels' : kind === 'tls' ? 'TLS passthrough tunnels' : 'HTTP tunnels';
}

function offlineOnlyForHttp(kind: ReservationKind): BurrowError {
  return new BurrowError('INVALID_REQUEST', `"offline" is for HTTP tunnels' names: a reservation for ${kindText(kind)} is "off".`);
}

function reservationJson(record: ReservationRecord): Record<string, unknown> {
  return {
    subdomain: record.subdomain,
    kind: record.kind ?? 'http',
    created_at: nowIso(record.createdAt),
    offline: record.offline ?? 'off',
    policy: record.policy === undefined ? null : policySummary(record.policy),
  };
}

function offlineField(value: unknown): OfflineMode | undefined {
  if (value === undefined) return undefined;
  if (!isOfflineMode(value)) throw new BurrowError('INVALID_REQUEST', '"offline" must be "off", "reject" or "queue".');
  return value;
}

function setCookie(value: string): [string, string] {
  return ['Set-Cookie', value];
}

export function errorResponse(error: BurrowError, extraHeaders?: HeaderPairs): ApiResponse {
  const headers: HeaderPairs = Object.entries(error.headers);
  if (extraHeaders !== undefined) headers.push(...extraHeaders);
  return { status: ERROR_CODES[error.code].status, headers, body: error.toBody() };
}

/** A client-supplied path or name for an error message: cut short, so a huge URL is not echoed back whole. */
function quoted(path: string): string {
  return path.length <= 200 ? path : `${path.slice(0, 200)}…`;
}

function rateLimitHeaders(rate: RateDecision): HeaderPairs {
  return [
    ['RateLimit-Limit', String(rate.limit)],
    ['RateLimit-Remaining', String(rate.remaining)],
    ['RateLimit-Reset', String(rate.resetSeconds)],
  ];
}

function rejectUnknownFields(body: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(body)) {
    if (!known.includes(key)) throw new BurrowError('INVALID_REQUEST', `Unknown field "${key}"; expected ${known.map((k) => `"${k}"`).join(', ')}.`);
  }
}

// Control characters (C0, DEL, C1) and the Unicode line/paragraph separators.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
const LONE_SURROGATE = /\p{Cs}/u;
// Format characters: bidi overrides and isolates (U+202A-U+202E, U+2066-U+2069), zero-width characters,
// the BOM, soft hyphens... They make a label show other than it is (or not at all).
const FORMAT_CHARACTERS = /\p{Cf}/u;

export function validateLabel(value: unknown): string {
  if (value === undefined) throw new BurrowError('INVALID_REQUEST', '"label" is required.');
  if (typeof value !== 'string') throw new BurrowError('INVALID_REQUEST', '"label" must be a string.');
  const label = value.trim();
  if (label.length === 0) throw new BurrowError('INVALID_REQUEST', '"label" must not be empty.');
  if ([...label].length > LABEL_MAX) throw new BurrowError('INVALID_REQUEST', `"label" must be at most ${LABEL_MAX} characters.`);
  if (CONTROL_CHARACTERS.test(label)) throw new BurrowError('INVALID_REQUEST', '"label" must not contain control characters.');
  // A lone surrogate (valid in JSON, not in UTF-8) would be stored as U+FFFD and listed unlike it was created.
  if (LONE_SURROGATE.test(label)) throw new BurrowError('INVALID_REQUEST', '"label" must be valid Unicode text.');
  if (FORMAT_CHARACTERS.test(label)) {
    throw new BurrowError('INVALID_REQUEST', '"label" must not contain invisible format characters (bidi controls, zero-width characters).');
  }
  return label;
}

const METHOD = /^[A-Z]{1,16}$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/;
const HEADER_VALUE = /^[\t\u0020-\u007e\u0080-\u00ff]*$/;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export function validateReplayOverrides(body: Record<string, unknown>): ReplayOverrides {
  rejectUnknownFields(body, ['method', 'path', 'headers', 'body', 'body_encoding']);
  const overrides: ReplayOverrides = {};
  if (body.method !== undefined) {
    if (typeof body.method !== 'string' || !METHOD.test(body.method.toUpperCase())) {
      throw new BurrowError('INVALID_REQUEST', '"method" must be an HTTP method such as "POST".');
    }
    overrides.method = body.method.toUpperCase();
  }
  if (body.path !== undefined) {
    if (typeof body.path !== 'string' || !body.path.startsWith('/') || body.path.length > 8192 || /[\s\u0000-\u001f]/.test(body.path)) {
      throw new BurrowError('INVALID_REQUEST', '"path" must start with "/" and hold no spaces or control characters.');
    }
    overrides.path = body.path;
  }
  if (body.headers !== undefined) {
    if (body.headers === null || typeof body.headers !== 'object' || Array.isArray(body.headers)) {
      throw new BurrowError('INVALID_REQUEST', '"headers" must be an object of header names to string values.');
    }
    const headers: Record<string, string | null> = {};
    for (const [name, value] of Object.entries(body.headers as Record<string, unknown>)) {
      if (!HEADER_NAME.test(name) || (value !== null && (typeof value !== 'string' || !HEADER_VALUE.test(value)))) {
        throw new BurrowError('INVALID_REQUEST', `Header "${name}" must have a valid name and a string value (or null to remove it).`);
      }
      headers[name.toLowerCase()] = value;
    }
    overrides.headers = headers;
  }
  // A binary body travels as base64 (the editors' hex editing), as the captures' own JSON gives it.
  const encoding = body.body_encoding ?? 'utf8';
  if (encoding !== 'utf8' && encoding !== 'base64') throw new BurrowError('INVALID_REQUEST', '"body_encoding" must be "utf8" or "base64".');
  if (body.body !== undefined) {
    if (typeof body.body !== 'string') throw new BurrowError('INVALID_REQUEST', '"body" must be a string.');
    if (encoding === 'base64' && !BASE64.test(body.body)) throw new BurrowError('INVALID_REQUEST', '"body" must be base64 when "body_encoding" is "base64".');
    overrides.body = Buffer.from(body.body, encoding);
  } else if (body.body_encoding !== undefined) {
    throw new BurrowError('INVALID_REQUEST', '"body_encoding" says how "body" is written: send it with a "body".');
  }
  return overrides;
}

/** Takes the replay's `allow_truncated` field (a boolean) out of the body; the rest are overrides. */
export function takeAllowTruncated(body: Record<string, unknown>): boolean {
  const value = body.allow_truncated;
  delete body.allow_truncated;
  if (value === undefined) return false;
  if (typeof value !== 'boolean') throw new BurrowError('INVALID_REQUEST', '"allow_truncated" must be true or false.');
  return value;
}

/** A replay of a body cut at the capture limit would send less than the original: only when asked. */
export function refuseTruncatedReplay(truncated: boolean, size: number, overrides: ReplayOverrides, allowTruncated: boolean): void {
  if (!truncated || overrides.body !== undefined || allowTruncated) return;
  throw new BurrowError(
    'REPLAY_TRUNCATED',
    `The captured body (${size} bytes) was cut at the capture limit; a replay would send only its first part. Send "allow_truncated": true (burrow replay --allow-truncated) to replay it anyway.`,
  );
}

/** The full exchange as the API shows it: spec fields first, then the detail. */
export function captureJson(capture: CaptureRecord): Record<string, unknown> {
  return {
    id: capture.id,
    method: capture.method,
    path: capture.path,
    status: capture.status,
    duration_ms: capture.durationMs,
    received_at: nowIso(capture.receivedAt),
    subdomain: capture.subdomain,
    client_address: capture.clientAddress,
    token_id: capture.tokenId,
    error: capture.error,
    rejected: rejectionOf(capture.error),
    // A delivery of a held webhook is sent by the replay machinery: its "replay_of" is the event's id.
    replay_of: capture.replayOf !== null && capture.replayOf.startsWith('evt_') ? null : capture.replayOf,
    event_id: capture.replayOf !== null && capture.replayOf.startsWith('evt_') ? capture.replayOf : null,
    request: {
      headers: headerPairs(capture.requestHeaders),
      ...bodyJson(capture.requestBody, capture.requestBodySize, capture.requestTruncated),
    },
    response: {
      status: capture.status,
      headers: headerPairs(capture.responseHeaders),
      ...bodyJson(capture.responseBody, capture.responseBodySize, capture.responseTruncated),
    },
  };
}
